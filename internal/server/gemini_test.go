package server_test

import (
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// geminiRoutes: the primary mock as a gemini provider (tier 0), the backup
// as an openai one (tier 1), for the model gemini-2.5-flash, priced by the
// built-in table's gemini entry.
const geminiRoutes = `
providers:
  - name: gem
    format: gemini
    base_url: %[1]s/v1beta
    api_keys: ["${PRIMARY_KEY}"]
    max_concurrency: 8
%[3]s
  - name: backup
    base_url: %[2]s/v1
    api_keys: ["${BACKUP_KEY}"]
    max_concurrency: 8
models:
  - name: gemini-2.5-flash
    candidates:
      - { provider: gem, model: gemini-2.5-flash, priority: 0 }
      - { provider: backup, model: up-backup-mini, priority: 1 }
  - name: gemini-only
    candidates:
      - { provider: gem, model: gemini-2.5-flash }
`

// The built-in price of gemini-2.5-flash (internal/pricing/prices.yaml).
const gemIn, gemOut, gemCached = 0.30, 2.50, 0.03

const geminiPath = "/v1beta/models/gemini-2.5-flash:generateContent"

// TestGeminiProvider: OpenAI and Anthropic clients, stream and not, reach a
// gemini candidate: the answer, its finish reason and usage (the thoughts
// as reasoning, the cached content as cached tokens) reach the client,
// the request and candidate rows and the cost at the built-in gemini
// price; the key went in x-goog-api-key, nowhere in the URL.
func TestGeminiProvider(t *testing.T) {
	const cached, reasoning = 4, 3
	g := start(t, setup{routes: geminiRoutes, db: true,
		primary: mockupstream.Behavior{CachedTokens: cached, ReasoningTokens: reasoning}})
	const want = "Hello from primary chunk 1 2 3"
	for _, tc := range []struct {
		name, path, body string
		want             []string
	}{
		{"chat", "/v1/chat/completions", `{"model":"gemini-2.5-flash","messages":[{"role":"user","content":"hi"}]}`,
			[]string{`"content":"` + want + `"`, `"finish_reason":"stop"`, `"reasoning_tokens":3`, `"cached_tokens":4`}},
		{"chat stream", "/v1/chat/completions", `{"model":"gemini-2.5-flash","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`,
			[]string{`"content":"Hello from primary chunk 1"`, `"finish_reason":"stop"`, `"reasoning_tokens":3`, "data: [DONE]"}},
		{"messages", "/v1/messages", `{"model":"gemini-2.5-flash","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`,
			[]string{`"text":"` + want + `"`, `"stop_reason":"end_turn"`, `"output_tokens":6`}},
		{"messages stream", "/v1/messages", `{"model":"gemini-2.5-flash","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			[]string{`"text":"Hello from primary chunk 1"`, `"stop_reason":"end_turn"`, "event: message_stop"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body, err := g.postStream(t, tc.path, tc.body)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %v: %s", resp.StatusCode, err, body)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(body), w) {
					t.Errorf("%s not in the answer: %s", w, body)
				}
			}
			id := resp.Header.Get("X-Request-Id")
			req, rows := g.ledger(t, id)
			wantRows(t, rows, "success/200/(gem)", "unused/0/(backup)")
			c := g.costOf(t, id)
			if req.PromptTokens == nil || req.TotalTokens == nil || c.cost == nil || ip(c.cached) != "4" || ip(c.reasoning) != "3" {
				t.Fatalf("request row: prompt %s total %s cost %s cached %s reasoning %s",
					ip(req.PromptTokens), ip(req.TotalTokens), fp(c.cost), ip(c.cached), ip(c.reasoning))
			}
			// The mock's output is its 3 chunks and the reasoning: Gemini
			// counts thoughts apart, the gateway inside the completion.
			completion := *req.TotalTokens - *req.PromptTokens
			if completion != 3+reasoning {
				t.Fatalf("completion tokens %d, want 6", completion)
			}
			cost := (float64(*req.PromptTokens-cached)*gemIn + cached*gemCached + float64(completion)*gemOut) / 1e6
			if math.Abs(*c.cost-cost) > 1e-12 || c.candCost == nil || math.Abs(*c.candCost-cost) > 1e-12 {
				t.Fatalf("cost %s (candidates %s), want %v", fp(c.cost), fp(c.candCost), cost)
			}
		})
	}
	for _, path := range []string{geminiPath, "/v1beta/models/gemini-2.5-flash:streamGenerateContent"} {
		last, ok := g.Primary.LastRequestAt(path)
		if !ok {
			t.Fatalf("no request at %s", path)
		}
		if last.Header.Get("X-Goog-Api-Key") != primaryKey || last.Header.Get("Authorization") != "" ||
			strings.Contains(last.Query.Encode(), primaryKey) || strings.Contains(string(last.Body), primaryKey) {
			t.Fatalf("the key travelled wrong: %s %v %v", last.Path, last.Query, last.Header)
		}
	}
	if n := g.Backup.Stats().Requests; n != 0 {
		t.Fatalf("the backup got %d requests", n)
	}

	t.Run("tools", func(t *testing.T) {
		g.Primary.SetBehavior(mockupstream.Behavior{Identity: "primary", ToolUse: mockupstream.ToolUseFirst})
		defer g.Primary.SetBehavior(mockupstream.Behavior{Identity: "primary"})
		tools := `"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object"}}}]`
		for _, stream := range []bool{false, true} {
			body := `{"model":"gemini-2.5-flash","stream":` + map[bool]string{false: "false", true: "true"}[stream] +
				`,"messages":[{"role":"user","content":"hi"}],` + tools + `}`
			resp, b, err := g.postStream(t, "/v1/chat/completions", body)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %v: %s", resp.StatusCode, err, b)
			}
			for _, w := range []string{`"name":"lookup"`, `"finish_reason":"tool_calls"`, `identity`} {
				if !strings.Contains(string(b), w) {
					t.Errorf("stream %v: %s not in %s", stream, w, b)
				}
			}
		}
		last, _ := g.Primary.LastRequestAt(geminiPath)
		if !strings.Contains(string(last.Body), `"functionDeclarations":[{"name":"lookup"`) {
			t.Fatalf("the tools were not translated: %s", last.Body)
		}
	})

	t.Run("embeddings", func(t *testing.T) {
		resp, b, err := g.postStream(t, "/v1/embeddings", `{"model":"gemini-only","input":["abcdefgh","x"],"dimensions":4}`)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %v: %s", resp.StatusCode, err, b)
		}
		var v struct {
			Data []struct {
				Embedding []float64 `json:"embedding"`
			} `json:"data"`
			Usage struct {
				PromptTokens int `json:"prompt_tokens"`
			} `json:"usage"`
		}
		if json.Unmarshal(b, &v) != nil || len(v.Data) != 2 || len(v.Data[0].Embedding) != 4 || v.Usage.PromptTokens != 3 {
			t.Fatalf("embeddings answer %s", b)
		}
		req, rows := g.ledger(t, resp.Header.Get("X-Request-Id"))
		wantRows(t, rows, "success/200/(gem)")
		if req.PromptTokens == nil || *req.PromptTokens != 3 {
			t.Fatalf("prompt tokens %s, want the estimate 2+1", ip(req.PromptTokens))
		}
		last, _ := g.Primary.LastRequestAt("/v1beta/models/gemini-2.5-flash:batchEmbedContents")
		if last.Header.Get("X-Goog-Api-Key") != primaryKey {
			t.Fatalf("embeddings key header %q", last.Header.Get("X-Goog-Api-Key"))
		}
	})
}

// TestGeminiFailover: a gemini candidate answering 503, or 429
// RESOURCE_EXHAUSTED with its wait in RetryInfo, fails over to the openai
// candidate, which answers; the rows say so.
func TestGeminiFailover(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    mockupstream.Behavior
		code string
	}{
		{"503", mockupstream.Behavior{Status: http.StatusServiceUnavailable}, "failed/503/upstream_http_error(gem)"},
		{"500", mockupstream.Behavior{Status: http.StatusInternalServerError}, "failed/500/upstream_http_error(gem)"},
		{"429", mockupstream.Behavior{ErrorKind: mockupstream.ErrorRequestsExhausted}, "failed/429/upstream_http_error(gem)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := start(t, setup{routes: geminiRoutes, db: true, primary: tc.b})
			for _, stream := range []bool{false, true} {
				body := `{"model":"gemini-2.5-flash","messages":[{"role":"user","content":"hi"}],"stream":` +
					map[bool]string{false: "false", true: "true"}[stream] + `}`
				resp, b, err := g.postStream(t, "/v1/chat/completions", body)
				if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "Hello from backup") {
					t.Fatalf("stream %v: %d %v: %s", stream, resp.StatusCode, err, b)
				}
				_, rows := g.ledger(t, resp.Header.Get("X-Request-Id"))
				if tc.name == "429" && stream {
					// The first 429 cooled the key's model for RetryInfo's
					// 37s: the second request skips it.
					if len(rows) != 2 || rows[0].Status != "skipped" || rows[1].String() != "success/200/(backup)" {
						t.Fatalf("after a 429: %v", rows)
					}
					continue
				}
				wantRows(t, rows, tc.code, "success/200/(backup)")
			}
			if tc.name == "429" {
				h := g.target(t, "gem", 0)
				if h.CooldownUntil == nil {
					t.Fatalf("a 429 with RetryInfo did not cool the target: %s", h)
				}
			}
		})
	}
}

// TestGeminiInvalidArgument: 400 INVALID_ARGUMENT blames the request: it
// reaches the client as 400 in its own shape, with Gemini's message, and
// no other candidate is tried.
func TestGeminiInvalidArgument(t *testing.T) {
	g := start(t, setup{routes: geminiRoutes, db: true, primary: mockupstream.Behavior{Status: http.StatusBadRequest}})
	resp, b := g.post(t, `{"model":"gemini-2.5-flash","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("%d: %s", resp.StatusCode, b)
	}
	if e := decodeError(t, b); e.Error.Type != "invalid_request_error" || e.Error.Message != "mock error" {
		t.Fatalf("error %+v", e)
	}
	_, rows := g.ledger(t, resp.Header.Get("X-Request-Id"))
	wantRows(t, rows, "failed/400/upstream_http_error(gem)", "unused/0/(backup)")

	resp, b, _ = g.postStream(t, "/v1/messages", `{"model":"gemini-2.5-flash","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)
	var ae struct {
		Type  string `json:"type"`
		Error struct{ Type, Message string }
	}
	if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(b, &ae) != nil || ae.Type != "error" ||
		ae.Error.Type != "invalid_request_error" || ae.Error.Message != "mock error" {
		t.Fatalf("messages: %d %s", resp.StatusCode, b)
	}
	// A field Gemini cannot honour is refused by the gateway, naming it.
	resp, b = g.post(t, `{"model":"gemini-2.5-flash","n":2,"messages":[{"role":"user","content":"hi"}]}`)
	if e := decodeError(t, b); resp.StatusCode != http.StatusBadRequest || e.Error.Param == nil || *e.Error.Param != "n" {
		t.Fatalf("n: 2: %d %s", resp.StatusCode, b)
	}
	if n := g.Backup.Stats().Requests; n != 0 {
		t.Fatalf("the backup got %d requests", n)
	}
}

// TestGeminiKeyNeverShown: the gemini provider's key reaches the provider
// in its header only: not the client's answers (success, failover, a
// relayed 400), the rows, the admin answers or the gateway's log.
func TestGeminiKeyNeverShown(t *testing.T) {
	log := &syncBuffer{}
	g := start(t, setup{routes: geminiRoutes, db: true, log: log})
	var ids []string
	check := func(what, s string) {
		t.Helper()
		if strings.Contains(s, primaryKey) || strings.Contains(s, primaryKey[:10]) {
			t.Errorf("%s holds the gemini key: %s", what, s)
		}
	}
	for _, b := range []mockupstream.Behavior{{}, {Status: http.StatusServiceUnavailable}, {Status: http.StatusBadRequest},
		{Status: http.StatusUnauthorized}} {
		b.Identity = "primary"
		g.Primary.SetBehavior(b)
		for _, path := range []string{"/v1/chat/completions", "/v1/messages"} {
			for _, stream := range []string{"false", "true"} {
				resp, body, _ := g.postStream(t, path, `{"model":"gemini-2.5-flash","max_tokens":9,"stream":`+stream+
					`,"messages":[{"role":"user","content":"hi"}]}`)
				check("the answer", string(body))
				for k, v := range resp.Header {
					check("the answer's header "+k, strings.Join(v, ","))
				}
				ids = append(ids, resp.Header.Get("X-Request-Id"))
			}
		}
	}
	for _, id := range ids {
		rows := g.rowsText(t, id)
		check("the rows of "+id, rows)
		_, b := g.get(t, "/admin/requests/"+id, true)
		check("/admin/requests/"+id, string(b))
	}
	for _, path := range []string{"/admin/config", "/admin/health"} {
		_, b := g.get(t, path, true)
		check(path, string(b))
	}
	g.shutdown(t)
	check("the gateway's log", log.String())
}
