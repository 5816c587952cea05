package candidates

import (
	"context"
	"net/http"
	"time"

	"github.com/llmgw/gateway/internal/health"
	"github.com/llmgw/gateway/internal/report"
)

// The last-resort retry of the same candidate (a provider's retry block in
// the routes file), on unhedged walks only:
//
//   - soon: a 5xx (504 aside) or a broken connection or answer is retried on
//     the same candidate after the provider's backoff, before the walk fails
//     over (walk.retrySame, after each attempt of walk.run);
//   - later: a 429 or 503 whose Retry-After is at most max_wait is retried
//     once it has passed, but only when the walk has no candidate left to
//     try (walk.lastResort, before the walk gives up as exhausted).
//
// Each retry is an attempt like any other, recorded as its own row (the
// same candidate_index, the next retry_index): health must let it through
// when its wait ends, the retry budget must allow it, it is admitted, and it
// counts for health. No wait holds a slot (the failed attempt released its
// slots before it was classified), none passes the request's deadline, and
// each ends early when the request does. A hedged walk never retries: its
// hedges already race the slow and the failing.

// Retry is a provider's retry block, resolved.
type Retry struct {
	Attempts int           // retries of one candidate per request; 0: off
	Backoff  time.Duration // the wait before a soon retry
	MaxWait  time.Duration // the longest Retry-After a later retry waits out
}

// retryNote is what the walk keeps of one candidate's last failure for its
// retries.
type retryNote struct {
	made int       // retries started
	soon bool      // the last failure is retried after the backoff
	due  time.Time // when set, the last failure may be retried from then, as a last resort
}

// retryKind says whether a failure is worth a retry of the same candidate
// under rt: soon (after the backoff) or later (after its Retry-After, when
// no other candidate is left). It reads only what Classify decided: a
// timeout, an auth failure, a client fault, an admission failure or the
// request's own end is never retried.
func retryKind(f Failure, rt Retry) (soon, later bool) {
	if rt.Attempts <= 0 || !f.Failover || f.Timeout || f.Auth || f.Status != report.CandidateFailed {
		return false, false
	}
	switch f.ErrorType {
	case report.ErrorTypeUpstreamConnect, report.ErrorTypeUpstreamProtocol:
		return true, false
	case report.ErrorTypeStreamInterrupted:
		return f.Watchdog == "", false // broken before its commit point; one gone idle timed out
	case report.ErrorTypeUpstreamHTTP:
	default:
		return false, false
	}
	switch {
	case f.Code == http.StatusTooManyRequests || f.Code == http.StatusServiceUnavailable && f.RetryAfter > 0:
		// The provider said when to come back: never sooner.
		return false, f.RetryAfter > 0 && f.RetryAfter <= rt.MaxWait
	case f.Code >= 500: // 504 is a timeout, excluded above
		return true, false
	}
	return false, false
}

// noteRetry keeps what candidate i's failure f means for its retries. The
// walk calls it once health has been told of f (walk.apply), so a later
// retry's wait ends no sooner than the cooldown f's Retry-After started.
func (w *walk) noteRetry(i int, f Failure) {
	if w.req.Hedge.On() {
		return
	}
	soon, later := retryKind(f, w.req.Candidates[i].Target.Provider.Retry)
	if w.retry == nil {
		if !soon && !later {
			return
		}
		w.retry = make([]retryNote, len(w.rows))
	}
	n := &w.retry[i]
	n.soon, n.due = soon, time.Time{}
	if later {
		n.due = w.r.now().Add(f.RetryAfter)
	}
}

// retrySame retries candidate i after its backoff while its last failure
// is worth it and retries are left. It reports whether the request is
// settled; false: the walk fails over.
func (w *walk) retrySame(ctx context.Context, i int) (done bool) {
	rt := w.req.Candidates[i].Target.Provider.Retry
	for w.retry != nil && w.retry[i].soon && w.retry[i].made < rt.Attempts {
		tried, done := w.retryAt(ctx, i, w.r.now().Add(rt.Backoff))
		if done || !tried {
			return done
		}
	}
	return false
}

// lastResort goes back, once the walk has no candidate left to try, to the
// candidates whose 429 or 503 asked to wait no longer than their max_wait,
// the soonest due first, instead of answering the client 429 or 503. It
// reports whether the request is settled.
func (w *walk) lastResort(ctx context.Context) (done bool) {
	for w.retry != nil {
		best := -1
		for j := range w.retry {
			n := &w.retry[j]
			if !n.due.IsZero() && n.made < w.req.Candidates[j].Target.Provider.Retry.Attempts &&
				(best < 0 || n.due.Before(w.retry[best].due)) {
				best = j
			}
		}
		if best < 0 {
			return false
		}
		tried, done := w.retryAt(ctx, best, w.retry[best].due)
		if done || tried && w.retrySame(ctx, best) {
			return true
		}
	}
	return false
}

// retryAt retries candidate i at the time at: it waits, holding nothing,
// then asks health and the retry budget, and attempts it as its next row.
// tried reports whether the attempt was made; done whether the request is
// settled (the retry committed or ended it, or the request ended during
// the wait).
func (w *walk) retryAt(ctx context.Context, i int, at time.Time) (tried, done bool) {
	n := &w.retry[i]
	n.soon, n.due = false, time.Time{} // taken; the retry's own failure notes anew
	if !w.req.Deadline.IsZero() && !at.Before(w.req.Deadline) {
		return false, false // the wait alone would pass the deadline
	}
	if !w.sleep(ctx, at) {
		return false, w.stop(0, w.clientGone(ctx)) // the client left, or the deadline passed
	}
	if !w.retryHealthy(i) || w.retryOverBudget(i, n.made+1) {
		return false, false
	}
	n.made++
	w.rows[i] = w.retryRow(i, n.made)
	return true, w.attempt(ctx, i)
}

// sleep waits until the time until on the loop's clock, or until ctx ends
// (it then reports false).
func (w *walk) sleep(ctx context.Context, until time.Time) bool {
	if ctx.Err() != nil {
		return false
	}
	d := until.Sub(w.r.now())
	if d <= 0 {
		return true
	}
	woke := make(chan struct{})
	t := w.r.clock().AfterFunc(d, func() { close(woke) })
	select {
	case <-woke:
		return true
	case <-ctx.Done():
		t.Stop()
		return false
	}
}

// retryHealthy asks candidate i's target whether a retry may go now: a
// target still cooling when the wait ends (its failures cooled it, or
// another request holds its probe) is not retried. A probe it hands out is
// the retry's.
func (w *walk) retryHealthy(i int) bool {
	h := w.req.Candidates[i].Health
	if h == nil {
		return true
	}
	ok, probe, _ := h.Check()
	if ok {
		w.probe = probe
	}
	return ok
}

// retryOverBudget reports whether the retry budget refuses candidate i's
// retry number n; the refusal is on record as that row, skipped with
// retry_budget. Candidate i's current row stays its last attempt's.
func (w *walk) retryOverBudget(i, n int) bool {
	if w.r.Budget.Allow(w.r.now()) {
		return false
	}
	w.healthDone(i, health.Verdict{}) // a probe retryHealthy handed out goes back
	row := w.retryRow(i, n)
	row.Status, row.SkipReason = report.CandidateSkipped, report.SkipRetryBudget
	w.r.Record.RecordCandidate(row)
	w.traceSkip(&row)
	if o := w.r.Observe; o != nil {
		c := &w.req.Candidates[i]
		o.CandidateDone(c, row.Status, "", 0)
		o.RetryBudgetExhausted(c)
	}
	return true
}

// retryRow is the fresh row of candidate i's retry number n.
func (w *walk) retryRow(i, n int) report.Candidate {
	p := &w.rows[i]
	return report.Candidate{RequestID: p.RequestID, Index: p.Index, RetryIndex: n, Provider: p.Provider,
		Endpoint: p.Endpoint, KeyID: p.KeyID, Model: p.Model, Status: report.CandidateAvailable, CreatedAt: p.CreatedAt}
}
