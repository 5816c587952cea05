package candidates

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/health"
	"github.com/llmgw/gateway/internal/report"
	"github.com/llmgw/gateway/internal/upstream"
)

// byModel fails the attempts for the upstream models it names and lets the
// others succeed, on one provider: the setup of a fallback model on the
// same provider and key. It counts attempts per model.
type byModel struct {
	fail  map[string]error
	tries map[string]int
}

func (b *byModel) Send(ctx context.Context, call *upstream.Call) (*http.Response, error) {
	var body struct{ Model string }
	if err := json.Unmarshal(call.Body, &body); err != nil {
		return nil, err
	}
	b.tries[body.Model]++
	if err := b.fail[body.Model]; err != nil {
		return nil, err
	}
	return succeed{}.Send(ctx, call)
}

// sameProviderRoutes: gpt-4o falls back to gpt-4o-mini on the same provider,
// which has two keys.
const sameProviderRoutes = `
providers:
  - { name: p, base_url: "http://p.example/v1", api_keys: [k1, k2], max_concurrency: 4, health: { failures: 1 } }
models:
  - name: m
    candidates: [ { provider: p, model: gpt-4o }, { provider: p, model: gpt-4o-mini, priority: 1 } ]
`

// TestFailureScopes: what one failure of the primary model skips in the
// same request and what it cools for the next, with the fallback model on
// the same provider and keys. A model's failure (5xx, context length, a
// plain 429) skips the primary model on the other key but never the
// fallback model; a key's refusal
// skips nothing in the request and cools every model of that key; only a
// provider that cannot be reached skips all of it.
func TestFailureScopes(t *testing.T) {
	ctxLen := &upstream.StatusError{Code: 400, Body: []byte(`{"error":{"message":"too long","type":"invalid_request_error","code":"context_length_exceeded"}}`)}
	cases := []struct {
		name string
		err  error
		rows string // candidate rows, in plan order: gpt-4o k1, k2, gpt-4o-mini k1, k2
		out  int    // the request's status
		// cooled: the (key, model) entries cooling afterwards
		cooled string
	}{
		{"503", &upstream.StatusError{Code: 503}, "failed skipped/model_failed success unused", 200, "key0/gpt-4o"},
		{"529", &upstream.StatusError{Code: 529}, "failed skipped/model_failed success unused", 200, "key0/gpt-4o"},
		{"reset", &upstream.ConnectError{Provider: "p", Err: errors.New("reset")}, "failed skipped/model_failed success unused", 200, "key0/gpt-4o"},
		{"context length", ctxLen, "failed skipped/model_failed success unused", 200, ""},
		{"429", &upstream.StatusError{Code: 429}, "failed skipped/model_failed success unused", 200, "key0/gpt-4o"},
		// Both keys refuse: the key-wide verdicts cool the fallback model
		// on them too, so it is skipped.
		{"key-wide 429", &upstream.StatusError{Code: 429, KeyWide: true}, "failed failed skipped/cooling_down skipped/cooling_down", 429,
			"key0/gpt-4o key0/gpt-4o-mini key1/gpt-4o key1/gpt-4o-mini"},
		{"401", &upstream.StatusError{Code: 401}, "failed failed skipped/cooling_down skipped/cooling_down", 502,
			"key0/gpt-4o key0/gpt-4o-mini key1/gpt-4o key1/gpt-4o-mini"},
		{"unreachable", &upstream.ConnectError{Provider: "p", Err: errors.New("refused"), Dial: true},
			"failed skipped/provider_failed skipped/provider_failed skipped/provider_failed", 502,
			"key0/gpt-4o key0/gpt-4o-mini key1/gpt-4o key1/gpt-4o-mini"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHealthRig(t, sameProviderRoutes)
			up := &byModel{fail: map[string]error{"gpt-4o": tc.err}, tries: map[string]int{}}
			h.run.Upstreams = map[string]Sender{"p": up}
			plan, err := h.plan.Plan("m")
			if err != nil {
				t.Fatal(err)
			}
			l := &ledger{cands: map[int]report.Candidate{}}
			h.run.Record = l
			out := runAll(h.run, &Request{ID: uuid.New(), Model: "m", Priority: admission.Interactive,
				Received: h.clock.Now(), Candidates: plan, Exchange: chatOf("m")})
			var rows, cooled []string
			for i := range plan {
				row := l.cands[i]
				s := row.Status
				if row.SkipReason != "" {
					s += "/" + row.SkipReason
				}
				rows = append(rows, s)
			}
			if got := strings.Join(rows, " "); got != tc.rows {
				t.Errorf("rows %q, want %q", got, tc.rows)
			}
			if out.StatusCode != tc.out {
				t.Errorf("request answered %d, want %d", out.StatusCode, tc.out)
			}
			for _, st := range h.tracker.Snapshot() {
				if st.State != health.Healthy {
					cooled = append(cooled, st.KeyID[:4]+"/"+st.Model)
				}
			}
			if got := strings.Join(cooled, " "); got != tc.cooled {
				t.Errorf("cooling afterwards %q, want %q", got, tc.cooled)
			}
		})
	}
}

// TestContextLengthExhausted: when the last candidate refuses the request
// for its size, the client gets that provider's 400 (relayed in its shape),
// and the request's error type says why.
func TestContextLengthExhausted(t *testing.T) {
	h := newHealthRig(t, sameProviderRoutes)
	ctxLen := &upstream.StatusError{Code: 400, Body: []byte(`{"error":{"message":"too long","code":"context_length_exceeded"}}`)}
	up := &byModel{fail: map[string]error{"gpt-4o": ctxLen, "gpt-4o-mini": ctxLen}, tries: map[string]int{}}
	h.run.Upstreams = map[string]Sender{"p": up}
	plan, _ := h.plan.Plan("m")
	h.run.Record = &ledger{cands: map[int]report.Candidate{}}
	out := runAll(h.run, &Request{ID: uuid.New(), Model: "m", Priority: admission.Interactive,
		Received: h.clock.Now(), Candidates: plan, Exchange: chatOf("m")})
	if out.StatusCode != 400 || out.Relay != ctxLen || out.ErrorType != ErrorTypeContextLength {
		t.Fatalf("outcome %d %s relay %v, want 400 context_length_exceeded relaying the provider's answer", out.StatusCode, out.ErrorType, out.Relay)
	}
	if up.tries["gpt-4o"] != 1 || up.tries["gpt-4o-mini"] != 1 {
		t.Fatalf("tries %v, want one per model (the other key of each skipped)", up.tries)
	}
}
