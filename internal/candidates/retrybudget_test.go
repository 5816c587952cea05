package candidates

import (
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/report"
	"github.com/llmgw/gateway/internal/upstream"
)

// TestRetryBudget: attempts beyond a request's first fit under percent of
// the first attempts of the last 10 s plus the per-second floor; the window
// slides; 0 and 0 allow none.
func TestRetryBudget(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	allowed := func(b *RetryBudget, n int) (got int) {
		for range n {
			if b.Allow() {
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
		b := NewRetryBudget(tt.percent, tt.minSec, clock)
		for range tt.firsts {
			b.First()
		}
		if got := allowed(b, 1000); got != tt.want {
			t.Errorf("%s: %d retries allowed, want %d", tt.name, got, tt.want)
		}
	}

	// The window slides: firsts older than 10 s no longer pay for retries,
	// and retries older than 10 s no longer count against the budget.
	b := NewRetryBudget(50, 0, clock)
	for range 10 {
		b.First()
	}
	if got := allowed(b, 10); got != 5 {
		t.Fatalf("%d allowed, want 5", got)
	}
	now = now.Add(5 * time.Second)
	for range 10 {
		b.First()
	}
	if got := allowed(b, 10); got != 5 {
		t.Fatalf("after 5 s: %d allowed, want 5 (20 firsts, 5 retries in the window)", got)
	}
	now = now.Add(6 * time.Second)
	for range 10 {
		b.First()
	}
	if got := allowed(b, 10); got != 5 {
		t.Fatalf("after 11 s: %d allowed, want 5 (the first second's 10 firsts and 5 retries left the window)", got)
	}
	var nilBudget *RetryBudget
	nilBudget.First()
	if !nilBudget.Allow() {
		t.Fatal("no budget must allow every attempt")
	}
}

// TestLoopRetryBudget: a failover the budget refuses is recorded skipped
// with retry_budget, and the request ends with the last failure's error.
func TestLoopRetryBudget(t *testing.T) {
	h := newHealthRig(t, healthRoutes)
	h.run.Budget = NewRetryBudget(0, 0, h.clock.Now)
	ex := &scripted{fail: map[string]error{"a": &upstream.StatusError{Code: 503}}, tries: map[string]int{}}
	wantRowsEq(t, "no budget", h.do(t, ex), "a:failed", "b:skipped/retry_budget")
	if ex.tries["b"] != 0 {
		t.Fatalf("b tried %d times", ex.tries["b"])
	}
	if l := h.run.Record.(*ledger); l.req.Status != report.RequestFailed || l.req.StatusCode != 502 {
		t.Fatalf("request %s/%d, want failed/502", l.req.Status, l.req.StatusCode)
	}
	h.run.Budget = NewRetryBudget(0, 1, h.clock.Now)
	wantRowsEq(t, "floor", h.do(t, ex), "a:failed", "b:success")
}
