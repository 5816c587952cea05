package server_test

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// mockCostRoutes prices the mock's answers: m-oa on the primary mock as an
// OpenAI provider, m-an on the backup mock as an Anthropic one.
const mockCostRoutes = `
providers:
  - name: oa
    base_url: %[1]s/v1
    api_keys: ["${PRIMARY_KEY}"]
    max_concurrency: 8
    prices:
      m-oa: { input: 2.5, output: 10, cached_input: 1.25 }
%[3]s
  - name: an
    format: anthropic
    base_url: %[2]s/v1
    api_keys: ["${BACKUP_KEY}"]
    max_concurrency: 8
    prices:
      m-an: { input: 3, output: 15, cached_input: 0.3, cache_write: 3.75 }
models:
  - { name: m-oa, candidates: [{ provider: oa, model: m-oa }] }
  - { name: m-an, candidates: [{ provider: an, model: m-an }] }
`

// TestCostOfMockCacheAndReasoning drives the real mock's cache and
// reasoning counts (Behavior.CachedTokens, CacheWriteTokens,
// ReasoningTokens) through every route, translated or not, stream and not:
// the request row keeps the provider's cache and reasoning counts, and its
// cost is docs/cost.md's formula of them at the routes file's prices, the
// same as x-gateway-cost-usd. Before, an Anthropic client on an OpenAI
// provider lost the cached and reasoning counts, and paid its cached
// prompt at the full input price.
func TestCostOfMockCacheAndReasoning(t *testing.T) {
	const cached, write, reasoning = 40, 8, 5
	tokens := mockupstream.Behavior{Usage: true, CachedTokens: cached, CacheWriteTokens: write, ReasoningTokens: reasoning}
	g := start(t, setup{routes: mockCostRoutes, db: true, primary: tokens, backup: tokens})
	type price struct{ in, out, cached, write float64 }
	oa, an := price{2.5, 10, 1.25, 2.5}, price{3, 15, 0.3, 3.75}
	for _, tc := range []struct {
		name, path, body string
		p                price
		anthropic        bool // the provider is the Anthropic mock
	}{
		{"chat", "/v1/chat/completions", `{"model":"m-oa","messages":[{"role":"user","content":"hi"}]}`, oa, false},
		{"chat stream", "/v1/chat/completions", `{"model":"m-oa","stream":true,"messages":[{"role":"user","content":"hi"}]}`, oa, false},
		{"responses", "/v1/responses", `{"model":"m-oa","input":"hi"}`, oa, false},
		{"responses stream", "/v1/responses", `{"model":"m-oa","stream":true,"input":"hi"}`, oa, false},
		{"messages to openai", "/v1/messages", `{"model":"m-oa","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`, oa, false},
		{"messages to openai stream", "/v1/messages", `{"model":"m-oa","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, oa, false},
		{"messages", "/v1/messages", `{"model":"m-an","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`, an, true},
		{"messages stream", "/v1/messages", `{"model":"m-an","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, an, true},
		{"chat to anthropic", "/v1/chat/completions", `{"model":"m-an","messages":[{"role":"user","content":"hi"}]}`, an, true},
		{"chat to anthropic stream", "/v1/chat/completions", `{"model":"m-an","stream":true,"messages":[{"role":"user","content":"hi"}]}`, an, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, got, err := g.postStream(t, tc.path, tc.body)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %v: %s", resp.StatusCode, err, got)
			}
			id := resp.Header.Get("X-Request-Id")
			g.ledger(t, id)
			ctx := context.Background()
			conn, err := pgx.Connect(ctx, g.DatabaseURL)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			var cost *float64
			var prompt, completion, gotCached, gotWrite, gotReasoning *int64
			if err := conn.QueryRow(ctx, `SELECT cost_usd::float8, prompt_tokens, completion_tokens, cached_tokens, cache_write_tokens,
				reasoning_tokens FROM requests WHERE id = $1`, id).Scan(&cost, &prompt, &completion, &gotCached, &gotWrite, &gotReasoning); err != nil {
				t.Fatal(err)
			}
			if prompt == nil || completion == nil || cost == nil {
				t.Fatalf("tokens %s/%s, cost %s", ip(prompt), ip(completion), fp(cost))
			}
			// OpenAI reports no cache writes: the mock counts them in the
			// prompt, billed as input; Anthropic reports no reasoning: it is
			// output.
			wantCached, wantWrite, wantReasoning := int64(cached), int64(0), int64(reasoning)
			if tc.anthropic {
				wantWrite, wantReasoning = write, 0
			}
			if ip(gotCached) != strconv.FormatInt(wantCached, 10) || ip(gotWrite) != strconv.FormatInt(wantWrite, 10) ||
				ip(gotReasoning) != strconv.FormatInt(wantReasoning, 10) {
				t.Fatalf("cached %s write %s reasoning %s, want %d %d %d", ip(gotCached), ip(gotWrite), ip(gotReasoning),
					wantCached, wantWrite, wantReasoning)
			}
			plain := *prompt - wantCached - wantWrite
			want := (float64(plain)*tc.p.in + float64(wantCached)*tc.p.cached + float64(wantWrite)*tc.p.write +
				float64(*completion)*tc.p.out) / 1e6
			if math.Abs(*cost-want) > 1e-12 {
				t.Fatalf("cost_usd %v, want %v (prompt %d, completion %d)", *cost, want, *prompt, *completion)
			}
			if h := resp.Header.Get("X-Gateway-Cost-Usd"); h != "" {
				if v, err := strconv.ParseFloat(h, 64); err != nil || math.Abs(v-want) > 1e-12 {
					t.Fatalf("x-gateway-cost-usd %q, want %v", h, want)
				}
			}
		})
	}
}
