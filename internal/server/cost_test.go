package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Provider bytes as the vendors send them, with cache and reasoning counts
// (docs/cost.md): OpenAI counts cached tokens inside prompt_tokens and
// reasoning inside completion_tokens; Anthropic counts input_tokens apart
// from the cache reads and writes.
const (
	costChatBody = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m-oa","choices":[{"index":0,` +
		`"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1000,` +
		`"completion_tokens":200,"total_tokens":1200,"prompt_tokens_details":{"cached_tokens":400},` +
		`"completion_tokens_details":{"reasoning_tokens":50}}}`
	costChatChunk1 = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m-oa","choices":[{"index":0,"delta":{"role":"assistant","content":"hel"},"finish_reason":null}]}`
	costChatChunk2 = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m-oa","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]}`
	costChatUsage  = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m-oa","choices":[],"usage":{"prompt_tokens":1000,` +
		`"completion_tokens":200,"total_tokens":1200,"prompt_tokens_details":{"cached_tokens":400},"completion_tokens_details":{"reasoning_tokens":50}}}`
	costResponsesBody = `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"m-oa","output":[{"type":"message",` +
		`"id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"hello","annotations":[]}]}],` +
		`"usage":{"input_tokens":1000,"input_tokens_details":{"cached_tokens":400},"output_tokens":200,` +
		`"output_tokens_details":{"reasoning_tokens":50},"total_tokens":1200}}`
	costEmbeddingsBody = `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2]}],"model":"m-emb",` +
		`"usage":{"prompt_tokens":8,"total_tokens":8}}`
	costMessagesBody = `{"id":"msg_1","type":"message","role":"assistant","model":"m-an","content":[{"type":"text","text":"hello"}],` +
		`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":100,"cache_creation_input_tokens":100,` +
		`"cache_read_input_tokens":2000,"output_tokens":50}}`
)

// costMessagesStream is an Anthropic stream with the same usage as
// costMessagesBody: the prompt's counts in message_start, the output in
// message_delta.
var costMessagesStream = strings.Join([]string{
	"event: message_start\ndata: " + `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m-an","content":[],` +
		`"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":100,"cache_creation_input_tokens":100,"cache_read_input_tokens":2000,"output_tokens":1}}}`,
	"event: content_block_start\ndata: " + `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
	"event: content_block_delta\ndata: " + `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hello"}}`,
	"event: content_block_stop\ndata: " + `{"type":"content_block_stop","index":0}`,
	"event: message_delta\ndata: " + `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":50}}`,
	"event: message_stop\ndata: " + `{"type":"message_stop"}`,
}, "\n\n") + "\n\n"

// costChatStream is the OpenAI stream as the provider sends it when asked
// for usage, and costChatStreamPlain what it sends a client that did not
// ask: the same without the usage chunk.
var (
	costChatStream      = "data: " + costChatChunk1 + "\n\ndata: " + costChatChunk2 + "\n\ndata: " + costChatUsage + "\n\ndata: [DONE]\n\n"
	costChatStreamPlain = "data: " + costChatChunk1 + "\n\ndata: " + costChatChunk2 + "\n\ndata: [DONE]\n\n"
)

// costProvider answers every route with the canned bytes above, streams
// when asked to, and the usage chunk only when the request asks for it.
func costProvider(t *testing.T) *httptest.Server {
	srv, _ := countedCostProvider(t)
	return srv
}

// countedCostProvider is costProvider that counts the requests it got.
func countedCostProvider(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		b, _ := io.ReadAll(r.Body)
		var req struct {
			Stream        bool `json:"stream"`
			StreamOptions struct {
				IncludeUsage bool `json:"include_usage"`
			} `json:"stream_options"`
		}
		_ = json.Unmarshal(b, &req)
		switch {
		case strings.HasSuffix(r.URL.Path, "/messages") && req.Stream:
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, costMessagesStream)
		case strings.HasSuffix(r.URL.Path, "/messages"):
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, costMessagesBody)
		case strings.HasSuffix(r.URL.Path, "/chat/completions") && req.Stream:
			w.Header().Set("Content-Type", "text/event-stream")
			// A hostile header: the gateway's own are never the provider's.
			w.Header().Set("X-Gateway-Cost-Usd", "0")
			if req.StreamOptions.IncludeUsage {
				_, _ = io.WriteString(w, costChatStream)
			} else {
				_, _ = io.WriteString(w, costChatStreamPlain)
			}
		case strings.HasSuffix(r.URL.Path, "/chat/completions"):
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Gateway-Cost-Usd", "0")
			_, _ = io.WriteString(w, costChatBody)
		case strings.HasSuffix(r.URL.Path, "/responses"):
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, costResponsesBody)
		case strings.HasSuffix(r.URL.Path, "/embeddings"):
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, costEmbeddingsBody)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

const (
	costToken      = "sk-cost-client-SENTINEL"
	costInUsageTok = "sk-cost-in-usage-SENTINEL"
)

// costRoutes prices m-oa (openai), m-emb and m-an (anthropic) in the
// routes file; m-free has no price anywhere.
func costRoutes(oa, an string) string {
	return `
providers:
  - name: oa
    base_url: ` + oa + `/v1
    api_keys: ["${PRIMARY_KEY}"]
    max_concurrency: 8
    prices:
      m-oa: { input: 2.5, output: 10, cached_input: 1.25 }
      m-emb: { input: 0.02, output: 0 }
%[3]s
  - name: an
    format: anthropic
    base_url: ` + an + `/v1
    api_keys: ["${BACKUP_KEY}"]
    max_concurrency: 8
    prices:
      m-an: { input: 3, output: 15, cached_input: 0.3, cache_write: 3.75 }
models:
  - { name: m-oa, candidates: [{ provider: oa, model: m-oa }] }
  - { name: m-emb, candidates: [{ provider: oa, model: m-emb }] }
  - { name: m-an, candidates: [{ provider: an, model: m-an }] }
  - { name: m-free, candidates: [{ provider: oa, model: m-free }] }
teams:
  - { name: search }
clients:
  - { name: costly, key_sha256: "` + sha(costToken) + `", team: search }
  - { name: curious, key_sha256: "` + sha(costInUsageTok) + `", cost_in_usage: true }
`
}

// costRecord is the cost columns of one request and its candidates.
type costRecord struct {
	cost, candCost           *float64
	prompt, cached, write    *int64
	reasoning                *int64
	estimated, candEstimated bool
	team                     *string
}

// costOf reads request id's cost once its rows settled.
func (g *gateway) costOf(t *testing.T, id string) costRecord {
	t.Helper()
	g.ledger(t, id) // waits for the request and its candidates to settle
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, g.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var r costRecord
	err = conn.QueryRow(ctx, `SELECT r.cost_usd::float8, r.prompt_tokens, r.cached_tokens, r.cache_write_tokens, r.reasoning_tokens,
		r.usage_estimated, r.team, (SELECT sum(c.cost_usd)::float8 FROM request_candidates c WHERE c.request_id = r.id),
		(SELECT bool_or(c.usage_estimated) FROM request_candidates c WHERE c.request_id = r.id)
		FROM requests r WHERE r.id = $1`, id).
		Scan(&r.cost, &r.prompt, &r.cached, &r.write, &r.reasoning, &r.estimated, &r.team, &r.candCost, &r.candEstimated)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9 }

func fp(p *float64) string {
	if p == nil {
		return "NULL"
	}
	return strconv.FormatFloat(*p, 'g', -1, 64)
}

func ip(p *int64) string {
	if p == nil {
		return "NULL"
	}
	return strconv.FormatInt(*p, 10)
}

// TestCostExact is issue 30's first "done when": for OpenAI and Anthropic
// providers, stream and not, on every client route, with cached tokens, the
// x-gateway-cost-usd header, the request row and the candidate rows equal
// usage × the routes file's prices within 1e-9, and a stream client that
// did not ask for usage gets exactly the bytes the provider sends without
// the usage chunk.
func TestCostExact(t *testing.T) {
	oa, an := costProvider(t), costProvider(t)
	g := start(t, setup{routes: costRoutes(oa.URL, an.URL), db: true})
	// gpt-4o-like: 600 uncached × 2.5 + 400 cached × 1.25 + 200 out × 10, per 1e6.
	const chatCost = (600*2.5 + 400*1.25 + 200*10) / 1e6
	// Anthropic: 100 uncached × 3 + 2000 read × 0.3 + 100 written × 3.75 + 50 out × 15.
	const anCost = (100*3 + 2000*0.3 + 100*3.75 + 50*15) / 1e6
	for _, tc := range []struct {
		name, path, body string
		stream           bool
		want             float64
		prompt, cached   int64
		write, reasoning int64
		wantBody         string // "" when not compared
	}{
		{"chat openai", "/v1/chat/completions", `{"model":"m-oa","messages":[{"role":"user","content":"hi"}]}`, false,
			chatCost, 1000, 400, 0, 50, costChatBody},
		{"chat openai stream without usage", "/v1/chat/completions", `{"model":"m-oa","stream":true,"messages":[{"role":"user","content":"hi"}]}`, true,
			chatCost, 1000, 400, 0, 50, costChatStreamPlain},
		{"chat openai stream with usage", "/v1/chat/completions",
			`{"model":"m-oa","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, true,
			chatCost, 1000, 400, 0, 50, costChatStream},
		{"responses openai", "/v1/responses", `{"model":"m-oa","input":"hi"}`, false,
			chatCost, 1000, 400, 0, 50, costResponsesBody},
		{"embeddings openai", "/v1/embeddings", `{"model":"m-emb","input":"hi"}`, false,
			8 * 0.02 / 1e6, 8, 0, 0, 0, costEmbeddingsBody},
		{"messages anthropic", "/v1/messages", `{"model":"m-an","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`, false,
			anCost, 2200, 2000, 100, 0, costMessagesBody},
		{"messages anthropic stream", "/v1/messages", `{"model":"m-an","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, true,
			anCost, 2200, 2000, 100, 0, costMessagesStream},
		{"chat to anthropic", "/v1/chat/completions", `{"model":"m-an","messages":[{"role":"user","content":"hi"}]}`, false,
			anCost, 2200, 2000, 100, 0, ""},
		{"chat to anthropic stream", "/v1/chat/completions", `{"model":"m-an","stream":true,"messages":[{"role":"user","content":"hi"}]}`, true,
			anCost, 2200, 2000, 100, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, got, err := g.postStream(t, tc.path, tc.body, "Authorization", "Bearer "+costToken)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %v: %s", resp.StatusCode, err, got)
			}
			if tc.wantBody != "" && string(got) != tc.wantBody {
				t.Fatalf("body\n%s\nwant the provider's bytes\n%s", got, tc.wantBody)
			}
			h := resp.Header.Get("X-Gateway-Cost-Usd")
			if tc.stream {
				if h != "" {
					t.Errorf("a stream carries x-gateway-cost-usd %q (the provider's?)", h)
				}
			} else {
				v, err := strconv.ParseFloat(h, 64)
				if err != nil || !near(v, tc.want) || strings.ContainsAny(h, "eE") {
					t.Errorf("x-gateway-cost-usd %q, want %v as a plain decimal", h, tc.want)
				}
			}
			r := g.costOf(t, resp.Header.Get("X-Request-Id"))
			if r.cost == nil || !near(*r.cost, tc.want) || r.candCost == nil || !near(*r.candCost, tc.want) {
				t.Errorf("cost_usd request %s, candidates %s; want %v", fp(r.cost), fp(r.candCost), tc.want)
			}
			if ip(r.prompt) != fmt.Sprint(tc.prompt) || ip(r.cached) != fmt.Sprint(tc.cached) ||
				ip(r.write) != fmt.Sprint(tc.write) || ip(r.reasoning) != fmt.Sprint(tc.reasoning) {
				t.Errorf("tokens prompt %s cached %s write %s reasoning %s; want %d %d %d %d",
					ip(r.prompt), ip(r.cached), ip(r.write), ip(r.reasoning), tc.prompt, tc.cached, tc.write, tc.reasoning)
			}
			if r.estimated || r.candEstimated {
				t.Errorf("usage_estimated on an answer with its usage")
			}
			if r.team == nil || *r.team != "search" {
				t.Errorf("team %v, want search", r.team)
			}
		})
	}

	t.Run("unpriced model runs with its cost unknown", func(t *testing.T) {
		resp, got := g.post(t, `{"model":"m-free","messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer "+costToken)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Gateway-Cost-Usd") != "" {
			t.Fatalf("%d cost %q: %s", resp.StatusCode, resp.Header.Get("X-Gateway-Cost-Usd"), got)
		}
		if r := g.costOf(t, resp.Header.Get("X-Request-Id")); r.cost != nil || r.candCost != nil || ip(r.prompt) != "1000" {
			t.Errorf("cost request %s candidates %s prompt %s; want NULL, NULL, 1000", fp(r.cost), fp(r.candCost), ip(r.prompt))
		}
	})

	t.Run("cost_in_usage", func(t *testing.T) {
		resp, got := g.post(t, `{"model":"m-oa","messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer "+costInUsageTok)
		var body struct {
			Usage struct {
				Cost *float64 `json:"cost"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(got, &body); err != nil || body.Usage.Cost == nil || !near(*body.Usage.Cost, chatCost) {
			t.Fatalf("%d usage.cost %v (%v): %s", resp.StatusCode, body.Usage.Cost, err, got)
		}
		if n, _ := strconv.Atoi(resp.Header.Get("Content-Length")); n != len(got) {
			t.Errorf("Content-Length %d for a %d-byte body", n, len(got))
		}
		_, sgot, err := g.postStream(t, "/v1/chat/completions",
			`{"model":"m-oa","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`,
			"Authorization", "Bearer "+costInUsageTok)
		want := strings.Replace(costChatStream, `"completion_tokens_details":{"reasoning_tokens":50}}`,
			`"completion_tokens_details":{"reasoning_tokens":50},"cost":`+strconv.FormatFloat(chatCost, 'f', -1, 64)+`}`, 1)
		if err != nil || string(sgot) != want {
			t.Fatalf("stream %v\n%s\nwant\n%s", err, sgot, want)
		}
	})

	t.Run("spend by team and model", func(t *testing.T) {
		eventually(t, 10*time.Second, "spend of team search", func() (bool, string) {
			code, b := g.get(t, "/admin/spend?by=team&window=1h", true)
			var a struct {
				Groups []struct {
					Group    string  `json:"group"`
					Requests int64   `json:"requests"`
					CostUSD  float64 `json:"cost_usd"`
					Unpriced int64   `json:"unpriced"`
				} `json:"groups"`
			}
			_ = json.Unmarshal(b, &a)
			for _, gr := range a.Groups {
				if gr.Group == "search" {
					// 10 requests of costly: four chat-priced, one
					// embedding, four Anthropic, one unpriced.
					want := 4*chatCost + 8*0.02/1e6 + 4*anCost
					return code == 200 && gr.Requests == 10 && near(gr.CostUSD, want) && gr.Unpriced == 1, string(b)
				}
			}
			return false, fmt.Sprintf("%d %s", code, b)
		})
		if code, b := g.get(t, "/admin/spend?by=key", true); code != http.StatusBadRequest || !strings.Contains(string(b), "by must be one of") {
			t.Errorf("by=key: %d %s", code, b)
		}
		if code, b := g.get(t, "/admin/spend?window=2h", true); code != http.StatusBadRequest || !strings.Contains(string(b), "window must be one of") {
			t.Errorf("window=2h: %d %s", code, b)
		}
	})

	t.Run("metrics", func(t *testing.T) {
		_, m := g.get(t, "/metrics", false)
		for _, want := range []string{
			`gateway_cost_usd_total{model="m-an",provider="an",team="search"}`,
			`gateway_tokens_total{kind="cached_input",model="m-oa",provider="oa",team="search"}`,
			`gateway_cost_unpriced_total{model="m-free",provider="oa"} 1`,
		} {
			if !strings.Contains(string(m), want) {
				t.Errorf("metrics lack %s", want)
			}
		}
		if strings.Contains(string(m), "costly") || strings.Contains(string(m), "SENTINEL") {
			t.Errorf("a metric names a client or a key")
		}
	})
}

// TestBudgetRefusal is issue 30's second "done when": a client over its
// daily budget gets 429 insufficient_quota / budget_exceeded with a
// Retry-After counting down to UTC midnight, and the provider sees no
// attempt; a team's budget refuses every client of the team; every answer
// to a budgeted client says what is left.
func TestBudgetRefusal(t *testing.T) {
	oa, calls := countedCostProvider(t)
	an := costProvider(t)
	routes := strings.Replace(costRoutes(oa.URL, an.URL), `teams:
  - { name: search }
clients:
  - { name: costly, key_sha256: "`+sha(costToken)+`", team: search }`, `teams:
  - { name: search }
  - { name: ads, budget: { usd: 0.006, per: month } }
clients:
  - { name: costly, key_sha256: "`+sha(costToken)+`", team: search, budget: { usd: 0.01, per: day } }
  - { name: ads-a, key_sha256: "`+sha(limitedToken)+`", team: ads }
  - { name: ads-b, key_sha256: "`+sha(openToken)+`", team: ads }`, 1)
	g := start(t, setup{routes: routes, db: true})
	const body = `{"model":"m-oa","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`

	ok := 0
	var refused *http.Response
	var refusedBody []byte
	for i := range 10 {
		resp, got := g.post(t, body, "Authorization", "Bearer "+costToken)
		if resp.StatusCode == http.StatusOK {
			ok++
			if h := resp.Header.Get("X-Gateway-Budget-Remaining-Usd"); h == "" {
				t.Errorf("answer %d to a budgeted client has no x-gateway-budget-remaining-usd", i)
			}
			continue
		}
		refused, refusedBody = resp, got
		break
	}
	// 0.004 each: the third is reserved at 0.008 spent and fits; the
	// fourth finds 0.012 spent.
	if refused == nil || ok != 3 {
		t.Fatalf("%d answered before a refusal (refused: %v %s), want 3", ok, refused != nil, refusedBody)
	}
	e := decodeError(t, refusedBody)
	if refused.StatusCode != http.StatusTooManyRequests || e.Error.Type != "insufficient_quota" || e.Error.Code != "budget_exceeded" ||
		!strings.Contains(e.Error.Message, "client costly, day") {
		t.Fatalf("refusal %d %+v", refused.StatusCode, e.Error)
	}
	now := time.Now().UTC()
	midnight := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
	ra, err := strconv.Atoi(refused.Header.Get("Retry-After"))
	if want := int(midnight.Sub(now).Seconds()); err != nil || ra < want-2 || ra > want+2 {
		t.Errorf("Retry-After %q, want about %d (seconds to UTC midnight)", refused.Header.Get("Retry-After"), want)
	}
	before := calls.Load()
	if resp, _ := g.post(t, body, "Authorization", "Bearer "+costToken); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("the next request: %d, want 429", resp.StatusCode)
	}
	if calls.Load() != before {
		t.Errorf("a refused request reached the provider")
	}
	// The Anthropic shape on /v1/messages.
	resp, got, _ := g.postStream(t, "/v1/messages", `{"model":"m-an","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`,
		"Authorization", "Bearer "+costToken)
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(got), `"type":"error"`) {
		t.Errorf("messages refusal %d %s", resp.StatusCode, got)
	}

	// The team: a's answer spends 0.004 of 0.006, b's 0.004 more (its
	// reservation fitted), then both are refused.
	for i, tok := range []string{limitedToken, openToken} {
		if resp, got := g.post(t, body, "Authorization", "Bearer "+tok); resp.StatusCode != http.StatusOK {
			t.Fatalf("team request %d: %d %s", i, resp.StatusCode, got)
		}
	}
	for _, tok := range []string{limitedToken, openToken} {
		resp, got := g.post(t, body, "Authorization", "Bearer "+tok)
		if e := decodeError(t, got); resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(e.Error.Message, "team ads, month") {
			t.Errorf("team over budget: %d %s", resp.StatusCode, got)
		}
	}

	code, b := g.get(t, "/admin/budgets", true)
	var list struct {
		Budgets []struct {
			Owner    struct{ Kind, Name string }
			Per      string
			LimitUSD float64
			SpentUSD float64
		} `json:"budgets"`
	}
	if err := json.Unmarshal(b, &list); err != nil || code != 200 || len(list.Budgets) != 2 {
		t.Fatalf("/admin/budgets %d %s", code, b)
	}
	_, m := g.get(t, "/metrics", false)
	for _, want := range []string{`gateway_budget_refusals_total{budget="client:costly"} 3`, `gateway_budget_refusals_total{budget="team:ads"} 2`,
		`gateway_budget_remaining_usd{budget="client:costly"}`} {
		if !strings.Contains(string(m), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
