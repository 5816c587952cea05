package candidates

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/report"
	"github.com/llmgw/gateway/internal/upstream"
)

// TestRetryBudget: attempts beyond a request's first fit under percent of
// the first attempts of the last 10 s plus the per-second floor; the window
// slides; 0 and 0 allow none.
func TestRetryBudget(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	allowed := func(b *RetryBudget, n int) (got int) {
		for range n {
			if b.Allow(now) {
				got++
			}
		}
		return got
	}
	tests := []struct {
		name            string
		percent, minSec int
		firsts          int
		want            int
	}{
		{"20% of 100 firsts", 20, 0, 100, 20},
		{"floor alone", 0, 1, 0, 10},
		{"percent plus floor", 20, 1, 50, 20},
		{"0 and 0", 0, 0, 1000, 0},
		{"nothing yet", 20, 0, 0, 0},
	}
	for _, tt := range tests {
		b := NewRetryBudget(tt.percent, tt.minSec)
		for range tt.firsts {
			b.First(now)
		}
		if got := allowed(b, 1000); got != tt.want {
			t.Errorf("%s: %d retries allowed, want %d", tt.name, got, tt.want)
		}
	}

	// The window slides: firsts older than 10 s no longer pay for retries,
	// and retries older than 10 s no longer count against the budget.
	b := NewRetryBudget(50, 0)
	for range 10 {
		b.First(now)
	}
	if got := allowed(b, 10); got != 5 {
		t.Fatalf("%d allowed, want 5", got)
	}
	now = now.Add(5 * time.Second)
	for range 10 {
		b.First(now)
	}
	if got := allowed(b, 10); got != 5 {
		t.Fatalf("after 5 s: %d allowed, want 5 (20 firsts, 5 retries in the window)", got)
	}
	now = now.Add(6 * time.Second)
	for range 10 {
		b.First(now)
	}
	if got := allowed(b, 10); got != 5 {
		t.Fatalf("after 11 s: %d allowed, want 5 (the first second's 10 firsts and 5 retries left the window)", got)
	}
	var nilBudget *RetryBudget
	nilBudget.First(now)
	if !nilBudget.Allow(now) {
		t.Fatal("no budget must allow every attempt")
	}
}

// TestLoopRetryBudget: a failover the budget refuses is recorded skipped
// with retry_budget, and the request ends with the last failure's error.
func TestLoopRetryBudget(t *testing.T) {
	h := newHealthRig(t, healthRoutes)
	h.run.Budget = NewRetryBudget(0, 0)
	ex := &scripted{fail: map[string]error{"a": &upstream.StatusError{Code: 503}}, tries: map[string]int{}}
	wantRowsEq(t, "no budget", h.do(t, ex), "a:failed", "b:skipped/retry_budget")
	if ex.tries["b"] != 0 {
		t.Fatalf("b tried %d times", ex.tries["b"])
	}
	if l := h.run.Record.(*ledger); l.req.Status != report.RequestFailed || l.req.StatusCode != 502 {
		t.Fatalf("request %s/%d, want failed/502", l.req.Status, l.req.StatusCode)
	}
	h.run.Budget = NewRetryBudget(0, 1)
	wantRowsEq(t, "floor", h.do(t, ex), "a:failed", "b:success")
}

// TestRetryBudgetOnTheLoopsClock: the budget's window runs on the loop's
// clock, the one that stamps the records, so a fake clock moves both: once
// the floor is spent, moving the runner's clock past the window gives it
// back.
func TestRetryBudgetOnTheLoopsClock(t *testing.T) {
	// No health rules: a's failures must not cool it; no retry: each
	// request spends one failover.
	h := newHealthRig(t, strings.Replace(strings.Replace(hedgeRoutes, "    hedge: { after: 50ms }\n", "", 1),
		"api_keys: [ka], max_concurrency: 4 }", "api_keys: [ka], max_concurrency: 4, health: { failures: 1000 }, retry: { attempts: 0 } }", 1))
	h.run.Budget = NewRetryBudget(0, 1)
	ex := &scripted{fail: map[string]error{"a": &upstream.StatusError{Code: 503}}, tries: map[string]int{}}
	for i := range 10 { // the floor: 1 a second over the 10 s window
		wantRowsEq(t, "within the floor "+strconv.Itoa(i), h.do(t, ex), "a:failed", "b:success")
		h.clock.advance(time.Millisecond)
	}
	wantRowsEq(t, "floor spent", h.do(t, ex), "a:failed", "b:skipped/retry_budget")
	h.clock.advance(11 * time.Second)
	wantRowsEq(t, "window slid on the loop's clock", h.do(t, ex), "a:failed", "b:success")
}

// TestRetryAfterDateOnTheLoopsClock: a provider's Retry-After given as a
// date is measured on the loop's clock, the one the request was received
// and recorded on, so the client's Retry-After agrees with the records.
func TestRetryAfterDateOnTheLoopsClock(t *testing.T) {
	var rig *healthRig
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", rig.clock.Now().Add(30*time.Second).UTC().Format(http.TimeFormat))
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	rig = newHealthRig(t, `
providers:
  - { name: a, base_url: "`+srv.URL+`/v1", api_keys: [ka], max_concurrency: 4 }
models:
  - name: m
    candidates: [ { provider: a } ]
`)
	client := upstream.NewClient(upstream.ClientOptions{Provider: "a"})
	defer client.CloseIdle()
	rig.run.Upstreams = map[string]Sender{"a": client}
	plan, err := rig.plan.Plan("m")
	if err != nil {
		t.Fatal(err)
	}
	out := runAll(rig.run, &Request{ID: uuid.New(), Model: "m", Priority: admission.Interactive,
		Received: rig.clock.Now(), Candidates: plan, Exchange: chatOf("m")})
	if out.StatusCode != http.StatusTooManyRequests || out.RetryAfter != 30*time.Second {
		t.Fatalf("outcome %d, Retry-After %s; want 429 and 30s", out.StatusCode, out.RetryAfter)
	}
}
