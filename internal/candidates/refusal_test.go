package candidates

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/report"
	"github.com/llmgw/gateway/internal/upstream"
)

// neverCalled fails the test if the loop sends anything to its provider.
type neverCalled struct{ t *testing.T }

func (n neverCalled) Send(context.Context, *upstream.Call) (*http.Response, error) {
	n.t.Error("a provider was called with a request its format cannot express")
	return nil, &upstream.ConnectError{Provider: "b"}
}

// TestRefusedTranslationEndsTheRequest: a candidate whose format cannot
// express the request (n: 2 to an anthropic provider) ends it with the
// client-shaped 400, without calling the provider and without failover, in
// a sequential walk and when a hedge reaches it while another attempt runs.
func TestRefusedTranslationEndsTheRequest(t *testing.T) {
	for _, tt := range []struct {
		name   string
		routes string
		a      func() Sender
		want   string
	}{
		{"after a failure", `
providers:
  - { name: a, base_url: "http://a.example/v1", api_keys: [ka], max_concurrency: 4 }
  - { name: b, format: anthropic, base_url: "http://b.example/v1", api_keys: [kb], max_concurrency: 4 }
models:
  - name: m
    candidates: [ { provider: a, priority: 0 }, { provider: b, priority: 1 } ]
`, func() Sender { return &slowStream{fail: &upstream.StatusError{Code: 500, Header: http.Header{}}} },
			"a:failed/upstream_http_error b:failed/translation_refused"},
		{"hedged", `
providers:
  - { name: a, base_url: "http://a.example/v1", api_keys: [ka], max_concurrency: 4 }
  - { name: b, format: anthropic, base_url: "http://b.example/v1", api_keys: [kb], max_concurrency: 4 }
models:
  - name: m
    hedge: { after: 20ms }
    candidates: [ { provider: a, priority: 0 }, { provider: b, priority: 1 } ]
`, func() Sender { return &slowStream{delay: 5 * time.Second} },
			"a:cancelled/hedge_lost b:failed/translation_refused"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHealthRig(t, tt.routes)
			h.run.Upstreams = map[string]Sender{"a": tt.a(), "b": neverCalled{t}}
			pol, plan, err := h.plan.PlanPolicy("m")
			if err != nil {
				t.Fatal(err)
			}
			l := &ledger{cands: map[int]report.Candidate{}}
			h.run.Record = l
			chat, err := upstream.ParseChatRequest([]byte(`{"model":"m","n":2,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
			if err != nil {
				t.Fatal(err)
			}
			att, out := h.run.Run(context.Background(), &Request{ID: uuid.New(), Model: "m", Stream: true,
				Priority: admission.Interactive, Received: time.Now(), Candidates: plan, Exchange: chat, Hedge: pol.Hedge})
			if att != nil {
				t.Fatal("a refused request committed")
			}
			if out.Relay == nil || out.Relay.Code != 400 || !strings.Contains(string(out.Relay.Body), `"param":"n"`) ||
				out.StatusCode != 400 || out.Status != report.RequestFailed {
				t.Fatalf("outcome %+v", out)
			}
			settled(t, h) // a hedge loser records itself on its own goroutine
			if got := strings.Join(candidateRows(l, plan), " "); got != tt.want {
				t.Fatalf("rows %s, want %s", got, tt.want)
			}
			if !h.sched.Idle() {
				t.Fatal("gates not back to zero")
			}
		})
	}
}
