package candidates

import (
	"time"

	"github.com/llmgw/gateway/internal/health"
	"github.com/llmgw/gateway/internal/report"
)

// The walk's policy skips: candidates not tried because their target is
// cooling down (provider health) or the retry budget is spent, and the
// health verdicts attempts hand back.

// cooling reports whether candidate i's target is cooling down (or another
// request holds its probe), so the walk skips it. The skip is recorded once
// an attempt starts or the walk ends: until then the candidate may still be
// the one tried when every candidate is cooling.
func (w *walk) cooling(i int) bool {
	h := w.req.Candidates[i].Health
	if h == nil {
		return false
	}
	ok, probe, until := h.Check()
	if ok {
		w.probe = probe
		return false
	}
	if w.cooled == nil {
		w.cooled = make([]time.Time, len(w.rows))
	}
	w.rows[i].Status, w.rows[i].SkipReason = report.CandidateSkipped, report.SkipCoolingDown
	w.cooled[i] = until
	w.unrecorded++
	return true
}

// coolest picks the candidate to try when every candidate was skipped for
// cooling: the one whose cooldown ends first. It returns -1 when some
// candidate was tried or none was cooling. Either way the other skips are
// recorded.
func (w *walk) coolest() int {
	best := -1
	if w.tried == 0 {
		for j, until := range w.cooled {
			if !until.IsZero() && (best < 0 || until.Before(w.cooled[best])) {
				best = j
			}
		}
	}
	if best >= 0 {
		w.rows[best].Status, w.rows[best].SkipReason = report.CandidateAvailable, ""
		w.cooled[best] = time.Time{}
		w.unrecorded--
	}
	w.recordSkips()
	return best
}

// recordSkips records the cooling skips noted so far.
func (w *walk) recordSkips() {
	for j := 0; w.unrecorded > 0 && j < len(w.cooled); j++ {
		if !w.cooled[j].IsZero() {
			w.cooled[j] = time.Time{}
			w.unrecorded--
			w.r.Record.RecordCandidate(w.rows[j])
			w.traceSkip(&w.rows[j])
			w.observeUntried(j)
		}
	}
}

// healthDone tells candidate i's target how its attempt went, giving back
// the probe the attempt held, if any.
func (w *walk) healthDone(i int, v health.Verdict) {
	probe := w.probe
	w.probe = false
	if h := w.req.Candidates[i].Health; h != nil {
		h.Done(v, probe)
	}
}

// overBudget reports whether candidate i, an attempt beyond the request's
// first, is refused by the retry budget; it is then recorded skipped.
func (w *walk) overBudget(i int) bool {
	if w.tried == 0 || w.r.Budget.Allow(w.r.now()) {
		return false
	}
	w.healthDone(i, health.Verdict{}) // a probe Check just handed out goes back
	w.rows[i].Status, w.rows[i].SkipReason = report.CandidateSkipped, report.SkipRetryBudget
	w.r.Record.RecordCandidate(w.rows[i])
	w.observeUntried(i)
	if w.r.Observe != nil {
		w.r.Observe.RetryBudgetExhausted(&w.req.Candidates[i])
	}
	return true
}
