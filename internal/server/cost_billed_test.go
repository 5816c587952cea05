package server_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// A provider that starts a stream bills it, even when the gateway then
// fails over or a hedge wins (docs/cost.md, "Which attempts count"): these
// tests hold the request's cost to the sum of its attempts', with the
// attempts that did not answer estimated and flagged.

// startedProvider sends one chat chunk of a stream and then, cut true,
// breaks the connection, else waits for the gateway to let go.
func startedProvider(t *testing.T, cut bool) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: "+costChatChunk1+"\n\n")
		w.(http.Flusher).Flush()
		if cut {
			panic(http.ErrAbortHandler) // the connection breaks mid-stream
		}
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return srv
}

// billedRoutes: m-fo fails over from a provider that breaks after its
// first chunk (held: it commits at three events) to one that answers;
// m-hedge hedges a provider that stalls after its first chunk with one
// that answers. Every provider prices m-oa alike.
func billedRoutes(cut, stall, broken, oa string) string {
	prices := `    prices: { m-oa: { input: 2.5, output: 10, cached_input: 1.25 } }
    max_concurrency: 8
`
	return `%[3]s
providers:
  - name: cut
    base_url: ` + cut + `/v1
    api_keys: ["${PRIMARY_KEY}"]
    stream_commit: { events: 3 }
` + prices + `  - name: stall
    base_url: ` + stall + `/v1
    api_keys: ["${PRIMARY_KEY}"]
    stream_commit: { events: 3 }
` + prices + `  - name: broken
    base_url: ` + broken + `/v1
    api_keys: ["${PRIMARY_KEY}"]
` + prices + `  - name: oa
    base_url: ` + oa + `/v1
    api_keys: ["${BACKUP_KEY}"]
` + prices + `models:
  - { name: m-fo, candidates: [{ provider: cut, model: m-oa }, { provider: oa, model: m-oa, priority: 2 }] }
  - name: m-hedge
    hedge: { after: 100ms }
    candidates: [{ provider: stall, model: m-oa }, { provider: oa, model: m-oa, priority: 2 }]
  - { name: m-broken, candidates: [{ provider: broken, model: m-oa }, { provider: oa, model: m-oa, priority: 2 }] }
clients:
  - { name: costly, key_sha256: "` + sha(costToken) + `" }
`
}

// billedRow is one candidate row's cost columns.
type billedRow struct {
	provider, status   string
	cost               *float64
	prompt, completion *int64
	estimated          bool
}

// billedRows reads request id's candidate rows, in candidate order, once
// they settled.
func (g *gateway) billedRows(t *testing.T, id string) []billedRow {
	t.Helper()
	g.ledger(t, id)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, g.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rs, err := conn.Query(ctx, `SELECT provider, status, cost_usd::float8, prompt_tokens, completion_tokens, usage_estimated
		FROM request_candidates WHERE request_id = $1 ORDER BY candidate_index, retry_index`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var out []billedRow
	for rs.Next() {
		var r billedRow
		if err := rs.Scan(&r.provider, &r.status, &r.cost, &r.prompt, &r.completion, &r.estimated); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// TestCostCountsBilledAttempts: a stream that broke before its commit
// point and a hedge loser that had started streaming each cost their
// estimate (the prompt's bytes / 4 at the input price, one token per chunk
// at the output price), flagged usage_estimated, and the request's cost is
// theirs plus the answer's exact cost. The answer's own bytes and cost
// header are as without them.
func TestCostCountsBilledAttempts(t *testing.T) {
	cut, stall, oa := startedProvider(t, true), startedProvider(t, false), costProvider(t)
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, `{"error":{"message":"upstream down","type":"server_error"}}`)
	}))
	t.Cleanup(broken.Close)
	g := start(t, setup{routes: billedRoutes(cut.URL, stall.URL, broken.URL, oa.URL), db: true})
	const chatCost = (600*2.5 + 400*1.25 + 200*10) / 1e6
	for _, tc := range []struct {
		name, model, loser, loserStatus string
	}{
		{"failed over after its first chunk", "m-fo", "cut", "failed"},
		{"hedge lost after its first chunk", "m-hedge", "stall", "cancelled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, got, err := g.postStream(t, "/v1/chat/completions",
				`{"model":"`+tc.model+`","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
				"Authorization", "Bearer "+costToken)
			if err != nil || resp.StatusCode != http.StatusOK || string(got) != costChatStreamPlain {
				t.Fatalf("%d %v:\n%s\nwant the answering provider's bytes\n%s", resp.StatusCode, err, got, costChatStreamPlain)
			}
			id := resp.Header.Get("X-Request-Id")
			rows := g.billedRows(t, id)
			if len(rows) != 2 {
				t.Fatalf("rows %+v, want the two candidates", rows)
			}
			l, w := rows[0], rows[1]
			if l.provider != tc.loser || l.status != tc.loserStatus || !l.estimated || l.cost == nil ||
				l.prompt == nil || *l.prompt <= 0 || l.completion == nil || *l.completion != 1 {
				t.Fatalf("the %s row: %+v cost %s prompt %s completion %s; want %s, estimated, a cost, one output token per chunk",
					tc.loser, l, fp(l.cost), ip(l.prompt), ip(l.completion), tc.loserStatus)
			}
			loserCost := (float64(*l.prompt)*2.5 + 1*10) / 1e6
			if !near(*l.cost, loserCost) {
				t.Errorf("the %s row costs %v, want %v (its estimate × the price)", tc.loser, *l.cost, loserCost)
			}
			if w.provider != "oa" || w.status != "success" || w.estimated || w.cost == nil || !near(*w.cost, chatCost) {
				t.Errorf("the answer's row %+v cost %s, want success at %v, not estimated", w, fp(w.cost), chatCost)
			}
			r := g.costOf(t, id)
			if r.cost == nil || !near(*r.cost, loserCost+chatCost) || !r.estimated {
				t.Errorf("request cost %s estimated %v, want %v (both attempts), estimated", fp(r.cost), r.estimated, loserCost+chatCost)
			}
		})
	}

	t.Run("an error status costs nothing", func(t *testing.T) {
		for _, body := range []string{
			`{"model":"m-broken","messages":[{"role":"user","content":"hi"}]}`,
			`{"model":"m-broken","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		} {
			resp, got, err := g.postStream(t, "/v1/chat/completions", body, "Authorization", "Bearer "+costToken)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %v: %s", resp.StatusCode, err, got)
			}
			id := resp.Header.Get("X-Request-Id")
			rows := g.billedRows(t, id)
			// The 502 cools the provider: the stream skips it (unused).
			for _, r := range rows {
				if r.provider == "broken" && (r.status != "failed" && r.status != "unused" || r.cost != nil || r.estimated) {
					t.Errorf("rows %+v: want the 502 not billed", rows)
				}
			}
			if r := g.costOf(t, id); r.cost == nil || !near(*r.cost, chatCost) || r.estimated {
				t.Errorf("request cost %s estimated %v, want the answer's %v alone", fp(r.cost), r.estimated, chatCost)
			}
			if h := resp.Header.Get("X-Gateway-Cost-Usd"); !strings.Contains(body, "stream") && h != strconv.FormatFloat(chatCost, 'f', -1, 64) {
				t.Errorf("x-gateway-cost-usd %q, want %v", h, chatCost)
			}
		}
	})
}
