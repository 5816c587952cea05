package candidates

import (
	"context"
	"errors"
	"net/http"

	"github.com/llmgw/gateway/internal/health"
	"github.com/llmgw/gateway/internal/report"
	"github.com/llmgw/gateway/internal/upstream"
)

// Resuming a stream cut after its commit point (docs/architecture.md,
// "Resuming a cut stream"). On a route with resume, a committed stream's
// attempt carries a Stitch (upstream/resume.go) that watches what the client
// got. When the stream is cut (Attempt.nextEvent) the attempt asks its
// settler to resume: the walk settles the cut candidate as it would have
// (failed, stream_interrupted), then turns the same Attempt into an attempt
// on the next candidate that takes a prefill, with admission, its own row
// (resumed_from) and its own watchdog, and the relay reads on without
// knowing: the continuation's first client bytes are Next's next answer. A
// continuation refused (any failure before its first text) or repeating
// the relayed text ends the stream as the cut would have, the outcome
// settled right here.

// resumeResult is what became of a cut stream the attempt asked to resume.
type resumeResult uint8

const (
	resumeDeclined resumeResult = iota // not resumable: nothing changed, the cut ends the stream as always
	resumeFailed                       // tried and failed: the outcome is settled, the attempt closed
	resumeOK                           // the attempt continues on the next candidate
)

// resumed is nextEvent's step for a cut (err) of a stream with a Stitch:
// ok with the continuation's first bytes, failed (the outcome settled) or
// declined.
func (a *Attempt) resumed(err error) ([]byte, resumeResult) {
	return a.s.resume(a, err)
}

// resume implements settler: it continues a's cut stream on the next
// candidate that can take a prefill, if the route and the stream allow it.
func (w *walk) resume(a *Attempt, err error) ([]byte, resumeResult) {
	st := a.st
	if w.resumes >= w.req.Resume || !st.Resumable() || w.ctx.Err() != nil {
		return nil, resumeDeclined
	}
	cut := Classify(err, true, nil)
	if cut.ErrorType != report.ErrorTypeStreamInterrupted {
		return nil, resumeDeclined
	}
	j := w.continuer(a.i, st)
	if j < 0 {
		return nil, resumeDeclined
	}
	c := &w.req.Candidates[j]
	probe := w.probe // j's health probe, if cooling handed one out
	w.probe = false
	// The cut attempt's call went out long ago: its buffer is free for the
	// continuation's, built before anything changes so that a refusal
	// leaves the cut as it was.
	if w.req.Exchange.BuildPrefill(c.Target.Provider.Endpoint, c.Model, st.Text(), &a.call) != nil {
		w.probe = probe
		w.healthDone(j, health.Verdict{})
		return nil, resumeDeclined
	}
	w.resumes++
	from := a.i
	prior, has := a.rd.Usage()
	a.close()
	w.settleCut(a, cut)
	a.to(stClosed)
	st.Continue(c.Target.Provider.Endpoint, prior, has)
	w.probe = probe

	w.starting(j)
	start := w.r.now()
	lease, aerr := w.r.Admit.Acquire(w.ctx, w.admission(j, &w.dims))
	if aerr != nil {
		if w.r.Observe != nil {
			w.r.Observe.AdmissionWait(c, w.r.now().Sub(start), aerr)
		}
		row := &w.rows[j]
		now := w.r.now()
		row.StartedAt, row.FinishedAt, row.Latency = start, now, now.Sub(start)
		row.Resumed, row.ResumedFrom = true, w.req.Candidates[from].Index
		w.failResumed(a, j, Classify(&AdmissionError{Err: aerr}, false, nil), cut)
		return nil, resumeFailed
	}
	s := a.s
	a.reset(j, lease, w.r.now())
	a.s, a.st = s, st
	a.probe, w.probe = w.probe, false
	row := &w.rows[j]
	row.Resumed, row.ResumedFrom = true, w.req.Candidates[from].Index
	w.begun(a, start)
	if oerr := a.open(w.ctx); oerr != nil {
		a.close()
		f := Classify(oerr, false, nil)
		if errors.Is(oerr, upstream.ErrRepeats) {
			f.ErrorType, f.Message = report.ErrorTypeUpstreamProtocol, upstream.ErrRepeats.Error()
		}
		w.failResumed(a, j, f, cut)
		return nil, resumeFailed
	}
	a.Sent()
	a.moved = true
	return a.first, resumeOK
}

// continuer is the next candidate after the cut one that has not been
// tried and can continue st's stream, or -1. As in the walk, a cooling
// target is skipped (or probed) and the retry budget may refuse one; those
// skips are recorded as the walk's are.
func (w *walk) continuer(cut int, st *upstream.Stitch) int {
	for j := cut + 1; j < len(w.req.Candidates); j++ {
		if w.rows[j].Status != report.CandidateAvailable || !st.CanContinue(w.req.Candidates[j].Target.Provider.Endpoint) {
			continue
		}
		if w.cooling(j) || w.overBudget(j) {
			continue
		}
		return j
	}
	return -1
}

// settleCut records the released attempt a, cut after its commit point,
// as its end would have: failed, with the cut's classification.
func (w *walk) settleCut(a *Attempt, f Failure) {
	i := a.i
	w.finished(a)
	if f.Watchdog != "" {
		w.watchdogFired(i, f.Watchdog)
	}
	w.probe, a.probe = a.probe, false
	w.costCut(a, true)
	w.settle(i, f.Status, f.Code, f.ErrorType, f.Message)
	w.healthDone(i, f.Verdict())
}

// failResumed settles a continuation that failed before its first text:
// candidate j's row with its own failure f, and the request as the cut
// would have ended it; a is closed with that outcome, which Finish returns.
func (w *walk) failResumed(a *Attempt, j int, f, cut Failure) {
	if a.state == stReleased {
		row := &w.rows[j]
		now := w.r.now()
		row.FinishedAt, row.Latency, row.FirstByte = now, now.Sub(row.StartedAt), a.fb
		a.to(stClosed)
	}
	if w.ctx.Err() != nil {
		// The request ended meanwhile: that is how it ends.
		ended := context.Cause(w.ctx)
		f = Classify(ended, true, ended)
		cut = f
	}
	w.probe, a.probe = w.probe || a.probe, false
	w.settle(j, f.Status, f.Code, f.ErrorType, f.Message)
	w.healthDone(j, f.Verdict())
	code := cut.RequestCode
	if code == 0 {
		code = http.StatusBadGateway
	}
	w.stop(j+1, Outcome{Status: cut.RequestStatus, StatusCode: code, ErrorType: cut.ErrorType, Code: cut.ReplyCode,
		Message: cut.Reply, Committed: true})
	w.finishRequest()
	a.outcome = &w.out
}
