package candidates

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/report"
	"github.com/llmgw/gateway/internal/upstream"
)

// TestResumeStepsOverNoPrefill: a stream cut after commit on a is continued
// on c, the next candidate that takes a prefill; b, between them, takes
// none and is never called, so its row ends unused, not available. The
// client's text is both parts, and the usage read so far (what a client's
// token rate is charged) is both parts' too.
func TestResumeStepsOverNoPrefill(t *testing.T) {
	var bCalls atomic.Int32
	stream := func(body string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte(body))
		}))
	}
	sa := stream(`data: {"id":"c1","model":"m","choices":[{"index":0,"delta":{"content":"Hello"}}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}` + "\n\n")
	sb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bCalls.Add(1)
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	sc := stream(`data: {"id":"c2","model":"m","choices":[{"index":0,"delta":{"content":" world"},"finish_reason":"stop"}]}` + "\n\n" +
		`data: {"id":"c2","model":"m","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}` + "\n\ndata: [DONE]\n\n")
	for _, s := range []*httptest.Server{sa, sb, sc} {
		defer s.Close()
	}
	h := newHealthRig(t, `
providers:
  - { name: a, base_url: "`+sa.URL+`/v1", api_keys: [ka], max_concurrency: 4, retry: { attempts: 0 } }
  - { name: b, base_url: "`+sb.URL+`/v1", api_keys: [kb], max_concurrency: 4 }
  - { name: c, base_url: "`+sc.URL+`/v1", api_keys: [kc], max_concurrency: 4, prefill: true }
models:
  - name: rm
    resume: { attempts: 1 }
    candidates: [ { provider: a }, { provider: b, priority: 1 }, { provider: c, priority: 2 } ]
`)
	clients := map[string]Sender{}
	for _, n := range []string{"a", "b", "c"} {
		c := upstream.NewClient(upstream.ClientOptions{Provider: n})
		defer c.CloseIdle()
		clients[n] = c
	}
	h.run.Upstreams = clients
	pol, plan, err := h.plan.PlanPolicy("rm")
	if err != nil {
		t.Fatal(err)
	}
	l := &ledger{cands: map[int]report.Candidate{}}
	h.run.Record = l
	ex, _ := upstream.ParseChatRequest([]byte(`{"model":"rm","messages":[{"role":"user","content":"hi"}],"stream":true}`))
	att, _ := h.run.Run(context.Background(), &Request{ID: uuid.New(), Model: "rm", Stream: true,
		Priority: admission.Interactive, Received: h.clock.Now(), Candidates: plan, Exchange: ex, Resume: pol.Resume})
	if att == nil {
		t.Fatal("nothing committed")
	}
	var sb2 strings.Builder
	relayTo(&sb2, att)
	u, ok := att.UsageSoFar()
	idle(t, h)
	if got := candidateStatuses(l, plan); got != "a:failed b:unused c:success" {
		t.Fatalf("rows %q, want a:failed b:unused c:success", got)
	}
	if bCalls.Load() != 0 {
		t.Fatal("the candidate without prefill was called")
	}
	if !strings.Contains(sb2.String(), `"Hello"`) || !strings.Contains(sb2.String(), `" world"`) || strings.Count(sb2.String(), `"id":"c1"`) < 2 {
		t.Fatalf("client got %s, want both parts under the first answer's id", sb2.String())
	}
	if !ok || u.PromptTokens != 8 || u.CompletionTokens != 3 || u.TotalTokens != 11 {
		t.Fatalf("usage so far %+v %v, want both parts' (8 + 3 = 11)", u, ok)
	}
}
