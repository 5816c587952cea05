package candidates

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/health"
	"github.com/llmgw/gateway/internal/report"
	"github.com/llmgw/gateway/internal/upstream"
)

// The attempt loop, one request top to bottom, before its commit point:
//
//	Runner.Run        the request's deadline; runner.run records it planned
//	walk.run          each candidate in order: skipped if cooling or over the
//	                  retry budget (skips.go), else walk.attempt, retried on
//	                  the same candidate after its backoff (retry.go); with
//	                  no candidate left, the last-resort retry after a
//	                  Retry-After (retry.go)
//	walk.attempt      build (the Exchange's call), admit (slots), begin (the
//	                  row pending), Attempt.open (attempt.go: send, hold to
//	                  the commit point)
//	walk.end          a failure released: Classify, then walk.apply records
//	                  it and fails over or stops (records.go)
//	walk.commit       the committed attempt gets the walk as its settler and
//	                  Run returns it to the relay (committed.go)
//
// A hedged route runs its attempts on flights instead (hedge.go); the
// steps are the same functions.

// walk is the state of one Run.
type walk struct {
	r          *Runner
	req        *Request
	ctx        context.Context       // the request's
	cancel     context.CancelFunc    // releases the deadline's context, if any
	att        Attempt               // the attempt in flight, when attempts run one after another
	winner     *Attempt              // the attempt that committed
	hedge      *hedging              // a hedged walk's flights, for a panic to release
	rows       []report.Candidate    // current record of each candidate
	retryable  bool                  // every failure so far was admission or 429
	timedOut   bool                  // the last failure was a timeout (not admission)
	tooLong    *upstream.StatusError // the last failure was a refusal of the request's size: the client's answer if none is left
	failed     int
	retryAfter time.Duration
	current    int                    // candidate being attempted, -1 before the first
	dims       [2]admission.Dimension // the attempt's quota dimensions, reused across attempts
	out        Outcome                // how the request ended, once it did
	admitStart time.Time              // when the attempt in flight asked for its slots
	sentAt     time.Time              // when the first byte went to the client
	tried      int
	probe      bool             // the attempt in flight holds its target's health probe
	cooled     []time.Time      // per candidate, the cooldown end of a skip not recorded yet
	unrecorded int              // skips in cooled not recorded yet
	retry      []retryNote      // per candidate, for its retries (retry.go); nil until a failure is worth one
	stitch     *upstream.Stitch // a resumable stream's watch (resume.go), reused across attempts; nil without resume, so a walk stays small
	resumes    int              // continuations started so far
	spent      spent            // what the attempts the providers billed cost (cost.go)
	traceID    string           // the request's trace, "" untraced
	notes      []spanNote       // per candidate, for its span (trace.go); nil untraced
}

// Run walks the candidates in order until one commits or the request ends.
// Before the commit point it owns every attempt: admission, the upstream
// call, the watchdog and the first events; every failover happens here. It
// returns either the committed attempt, which the caller relays and ends with
// Attempt.Finish, or the request's outcome when nothing committed (the
// records are settled either way). Run has returned before a single byte is
// relayed, so the frames that live as long as a stream are the caller's.
func (r *Runner) Run(ctx context.Context, req *Request) (*Attempt, *Outcome) {
	if !req.Deadline.IsZero() {
		// Released in finishRequest, when the request ends.
		ctx, cancel := context.WithDeadlineCause(ctx, req.Deadline, ErrDeadline)
		return r.run(ctx, req, cancel)
	}
	return r.run(ctx, req, nil)
}

func (r *Runner) run(ctx context.Context, req *Request, cancel context.CancelFunc) (*Attempt, *Outcome) {
	w := &walk{r: r, req: req, ctx: ctx, cancel: cancel, retryable: true, current: -1}
	w.att.r, w.att.req = r, req
	w.traceStart()
	w.recordPlanned()
	defer w.recordPanic()
	if req.Hedge.On() {
		if w.runHedged(ctx) {
			return w.winner, nil
		}
	} else if w.run(ctx) {
		w.commit(&w.att)
		return w.winner, nil
	}
	w.finishRequest()
	return nil, &w.out
}

// commit makes a the request's winner and hands it the walk as its
// settler: from here on the relay owns it.
func (w *walk) commit(a *Attempt) {
	a.s = w
	w.winner = a
	w.traceCommitted(a.i)
}

// run attempts the candidates in order until one commits (it reports true)
// or the request ends, with its outcome in w.out.
func (w *walk) run(ctx context.Context) (committed bool) {
	for i := range w.req.Candidates {
		if w.rows[i].Status != report.CandidateAvailable {
			continue // skipped by an earlier provider-scoped failure
		}
		if ctx.Err() != nil {
			w.stopGone(ctx, i)
			return false
		}
		if w.cooling(i) || w.overBudget(i) {
			continue
		}
		if w.attempt(ctx, i) || w.retrySame(ctx, i) {
			return w.att.state.committed()
		}
	}
	// Health never fails a request without an attempt: when every
	// candidate was cooling, the one closest to healthy is tried anyway.
	if i := w.coolest(); i >= 0 {
		if ctx.Err() != nil {
			w.stopGone(ctx, i)
			return false
		}
		w.probe = w.req.Candidates[i].Health.Force()
		if w.attempt(ctx, i) {
			return w.att.state.committed()
		}
	}
	if w.lastResort(ctx) {
		return w.att.state.committed()
	}
	w.exhausted()
	return false
}

// stopGone settles a request whose context ended before candidate i.
func (w *walk) stopGone(ctx context.Context, i int) { w.stop(i, w.clientGone(ctx)) }

// attempt tries candidate i up to the commit point and reports whether the
// request is settled: committed, or ended without a commit.
func (w *walk) attempt(ctx context.Context, i int) (done bool) {
	if err := w.build(&w.att, i); err != nil {
		// Refused before any slot is taken: the client's fault.
		w.current = i
		return w.apply(i, Classify(err, false, nil), false)
	}
	lease, done := w.admit(ctx, i)
	if lease == nil {
		return done
	}
	a := w.begin(i, lease)
	err := a.open(ctx)
	if err == nil {
		return true
	}
	a.close()
	done = w.end(a, err, false)
	a.to(stClosed)
	return done
}

// build has the request's exchange address a's call to candidate i; a
// refused translation is returned as a *RefusedError.
func (w *walk) build(a *Attempt, i int) error {
	c := &w.req.Candidates[i]
	if err := w.req.Exchange.Build(c.Target.Provider.Endpoint, c.Model, &a.call); err != nil {
		var re *upstream.RequestError
		if !errors.As(err, &re) {
			re = &upstream.RequestError{Message: err.Error()}
		}
		return &RefusedError{Err: re, Reply: w.req.Exchange.Refusal(re)}
	}
	return nil
}

// admit acquires candidate i's slots. Without a lease, done reports whether
// the admission failure settled the request.
func (w *walk) admit(ctx context.Context, i int) (lease *admission.Lease, done bool) {
	c := &w.req.Candidates[i]
	w.starting(i)
	start := w.r.now()
	lease, err := w.r.Admit.Acquire(ctx, w.admission(i, &w.dims))
	if err != nil {
		if w.r.Observe != nil {
			w.r.Observe.AdmissionWait(c, w.r.now().Sub(start), err)
		}
		return nil, w.admissionFailed(ctx, i, start, err)
	}
	// A granted wait is observed in begin, once the attempt holds the
	// lease: nothing between the grant and that may panic.
	w.admitStart = start
	return lease, false
}

// starting notes that candidate i gets an attempt: the first of the request
// counts for the retry budget, and cooling skips noted so far are recorded.
func (w *walk) starting(i int) {
	w.current = i
	if w.tried == 0 {
		w.r.Budget.First(w.r.now())
	}
	w.tried++
	if w.unrecorded > 0 {
		w.recordSkips()
	}
}

// admission is candidate i's admission request; dims is where its quota
// dimensions live.
func (w *walk) admission(i int, dims *[2]admission.Dimension) admission.Request {
	c := &w.req.Candidates[i]
	prov := c.Target.Provider
	dims[0] = admission.Dimension{Gate: admission.TargetGate, ID: c.Target.ID, Label: prov.Name,
		Limit: prov.MaxConcurrency, Version: prov.Generation}
	n := 1
	if w.req.ClientConcurrency > 0 {
		// The client's limit came from the same routes file as the plan.
		dims[1] = admission.Dimension{Gate: admission.ClientGate, ID: w.req.Client, Label: w.req.Client,
			Limit: w.req.ClientConcurrency, Version: prov.Generation}
		n = 2
	}
	return admission.Request{Priority: w.req.Priority, Budget: prov.QueueBudget, Dimensions: dims[:n]}
}

// begin hands candidate i's slots to the attempt and records it pending.
func (w *walk) begin(i int, lease *admission.Lease) *Attempt {
	w.att.reset(i, lease, w.r.now())
	w.att.probe, w.probe = w.probe, false
	if w.req.Resume > 0 {
		if w.stitch == nil {
			w.stitch = new(upstream.Stitch)
		}
		w.att.st = w.req.Exchange.Stitch(w.req.Candidates[i].Target.Provider.Endpoint, w.stitch)
	}
	w.begun(&w.att, w.admitStart)
	return &w.att
}

// begun observes an attempt's granted admission wait and records its
// candidate pending.
func (w *walk) begun(a *Attempt, queued time.Time) {
	if w.r.Observe != nil {
		w.r.Observe.AdmissionWait(&w.req.Candidates[a.i], a.admitted.Sub(queued), nil)
	}
	row := &w.rows[a.i]
	row.Status, row.StartedAt = report.CandidatePending, a.admitted
	w.r.Record.RecordCandidate(*row)
	w.traceQueued(a.i, queued, false)
}

// finished stamps the released attempt a's row with its end and first
// byte, and observes the first byte.
func (w *walk) finished(a *Attempt) {
	row := &w.rows[a.i]
	now := w.r.now()
	row.FinishedAt, row.Latency, row.FirstByte = now, now.Sub(row.StartedAt), a.fb
	w.traceFinished(a)
	if a.fb > 0 && w.r.Observe != nil {
		w.r.Observe.FirstByte(&w.req.Candidates[a.i], a.fb)
	}
}

// end records how the released attempt a ended and reports whether the
// request is settled. err nil is a relayed success; committed says whether
// a passed its commit point (only Finish ends a committed one).
func (w *walk) end(a *Attempt, err error, committed bool) (done bool) {
	i := a.i
	w.finished(a)
	if err == nil {
		if a.probe { // Sent gives it back; an answer relayed without Sent still heals
			a.verdict(health.Verdict{Success: true})
		}
		// A success whose usage cannot be true stays a success, its tokens
		// unknown; both rows say why (upstream.UsageError).
		errType, msg := "", ""
		if a.usageErr != nil {
			errType, msg = report.ErrorTypeUpstreamProtocol, a.usageErr.Error()
		}
		w.costRow(i, a.usage, a.hasUsage, false)
		w.settle(i, report.CandidateSuccess, a.resp.StatusCode, errType, msg)
		usage, has := a.usage, a.hasUsage
		if a.st != nil {
			usage, has = a.st.Sum(usage, has) // a resumed stream's parts
		}
		return w.stop(i+1, Outcome{Status: report.RequestSuccess, StatusCode: http.StatusOK, Committed: true,
			Usage: usage, HasUsage: has, ErrorType: errType})
	}
	var ended error
	if w.ctx.Err() != nil {
		ended = context.Cause(w.ctx)
	}
	w.probe, a.probe = a.probe, false // apply gives it back with the verdict
	w.costCut(a, committed)           // the provider billed what it sent before the cut, if anything
	return w.apply(i, Classify(err, committed, ended), committed)
}

// apply records candidate i's failure and acts on it: the request ends, or
// the walk moves on with what the failure says about the provider.
func (w *walk) apply(i int, f Failure, committed bool) (done bool) {
	if f.Watchdog != "" {
		w.watchdogFired(i, f.Watchdog)
	}
	w.settle(i, f.Status, f.Code, f.ErrorType, f.Message)
	w.healthDone(i, f.Verdict())
	w.noteRetry(i, f)
	if !f.Failover {
		return w.stop(i+1, Outcome{Status: f.RequestStatus, StatusCode: f.RequestCode, ErrorType: f.ErrorType,
			Code: f.ReplyCode, Message: f.Reply, Committed: committed, Relay: f.Relay, RetryAfter: f.RetryAfter})
	}
	w.timedOut = f.Timeout
	w.tooLong = nil
	if f.ErrorType == ErrorTypeContextLength {
		w.tooLong = f.Relay
	}
	if f.Capacity {
		w.noteRetryAfter(f.RetryAfter)
	} else {
		w.retryable = false
	}
	w.skipScope(i, f.Scope)
	return false
}

func (w *walk) admissionFailed(ctx context.Context, i int, start time.Time, err error) (done bool) {
	if ctx.Err() != nil {
		w.healthDone(i, health.Verdict{})
		if errors.Is(context.Cause(ctx), ErrDeadline) {
			// The deadline ended the queue wait: on record as this
			// candidate's failure.
			row := &w.rows[i]
			now := w.r.now()
			row.StartedAt, row.FinishedAt, row.Latency = start, now, now.Sub(start)
			return w.apply(i, Classify(&AdmissionError{Err: err}, false, ErrDeadline), false)
		}
		return w.stop(i, w.clientGone(ctx))
	}
	row := &w.rows[i]
	now := w.r.now()
	row.StartedAt, row.FinishedAt, row.Latency = start, now, now.Sub(start)
	return w.apply(i, Classify(&AdmissionError{Err: err}, false, nil), false)
}

func (w *walk) watchdogFired(i int, kind string) {
	if w.r.Observe != nil {
		w.r.Observe.WatchdogFired(&w.req.Candidates[i], kind)
	}
}

// clientGone describes a request whose context ended before its next
// attempt: the client left, or the shutdown grace ran out.
func (w *walk) clientGone(ctx context.Context) Outcome {
	f := contextEnded(context.Cause(ctx), false)
	return Outcome{Status: f.RequestStatus, StatusCode: f.RequestCode, ErrorType: f.ErrorType, Code: f.ReplyCode, Message: f.Reply}
}

func (w *walk) noteRetryAfter(d time.Duration) {
	if d > w.retryAfter {
		w.retryAfter = d
	}
}

// recordPanic keeps the ledger true when the loop panics before a commit:
// the attempt in flight lets go of its slots, its candidate fails with
// gateway_internal_error, the rest are unused and the request fails with
// 500. The panic continues to the HTTP layer, which answers 500.
func (w *walk) recordPanic() {
	v := recover()
	if v == nil {
		return
	}
	w.att.abort()
	if w.hedge != nil {
		w.hedge.abort()
	}
	w.panicked()
	w.att.settledAfterPanic()
	if w.hedge != nil {
		w.hedge.settledAfterPanic()
	}
	panic(v)
}

// panicked settles a request whose handling panicked.
func (w *walk) panicked() {
	if w.current >= 0 {
		w.healthDone(w.current, health.Verdict{})
		switch w.rows[w.current].Status {
		case report.CandidatePending, report.CandidateStreaming, report.CandidateAvailable:
			w.settle(w.current, report.CandidateFailed, http.StatusInternalServerError, report.ErrorTypeInternal, "gateway panic")
		}
	}
	w.stop(0, Outcome{Status: report.RequestFailed, StatusCode: http.StatusInternalServerError,
		ErrorType: report.ErrorTypeInternal})
	w.finishRequest()
}

// release gives back an attempt's slots.
func (r *Runner) release(lease *admission.Lease) {
	lease.Release()
	if r.Observe != nil {
		r.Observe.GlobalHeld(lease.GlobalHeld())
	}
}
