package candidates

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/health"
	"github.com/llmgw/gateway/internal/report"
	"github.com/llmgw/gateway/internal/secret"
	"github.com/llmgw/gateway/internal/upstream"
	"github.com/llmgw/gateway/internal/watchdog"
)

// Admitter grants the slots of one attempt (implemented by admission.Scheduler).
type Admitter interface {
	Acquire(ctx context.Context, req admission.Request) (*admission.Lease, error)
}

// Recorder persists request and candidate records without blocking
// (implemented by report.Writer).
type Recorder interface {
	RecordRequest(report.Request)
	RecordCandidate(report.Candidate)
}

// ClientWriteError is a failed write to the client: the client went away or
// stopped reading. It is never the provider's fault.
type ClientWriteError struct{ Err error }

func (e *ClientWriteError) Error() string { return "write to client: " + e.Err.Error() }
func (e *ClientWriteError) Unwrap() error { return e.Err }

// ErrShutdown is the cancellation cause when the shutdown grace ended.
var ErrShutdown = errors.New("gateway shutting down")

// ErrDeadline is the cancellation cause when a request's deadline passed.
var ErrDeadline = errors.New("request deadline exceeded")

// Request is one inbound request, planned.
type Request struct {
	ID              uuid.UUID
	ClientRequestID string
	Model           string
	Stream          bool
	Client          string
	Priority        admission.Priority
	Received        time.Time
	Candidates      []Candidate
	// Route is the client API the request came in on (chat, messages,
	// embeddings, responses), for records and metrics.
	Route upstream.Route
	// Exchange builds each attempt's body for its provider and reads its
	// answer; the loop learns no wire format.
	Exchange Exchange
	Header   http.Header // the client's request headers (filtered by upstream.Send)
	// Deadline, when set, bounds every attempt, queue wait and the relay:
	// past it the request ends with deadline_exceeded.
	Deadline time.Time
	// Hedge is the route's hedging; the zero value is off.
	Hedge Hedge
	// ClientConcurrency is the client's max_concurrency: every attempt
	// also takes a slot of the client's gate. Zero: no client gate.
	ClientConcurrency int
}

// Exchange is a request's wire format as the loop sees it (implemented by
// *upstream.ChatRequest): the body of each attempt, addressed to the
// candidate's provider and model, and how to read its answer.
type Exchange interface {
	// Build sets call's URL and Body for an attempt on ep with the upstream
	// model. A *upstream.RequestError means the request cannot be
	// expressed in ep's format: the client's fault, which ends the request
	// with 400 (no failover).
	Build(ep *upstream.Endpoint, model string, call *upstream.Call) error
	// Reader reads the answer of an attempt on ep; pass is the attempt's
	// own pass-through reader, so the common path allocates nothing.
	Reader(ep *upstream.Endpoint, pass *upstream.PassReader) upstream.Reader
	// Refusal is the client's 400 answer to a refused Build.
	Refusal(re *upstream.RequestError) *upstream.StatusError
	// Relayed rewrites a provider's client-fault answer into the client's
	// format before it is relayed.
	Relayed(ep *upstream.Endpoint, se *upstream.StatusError)
}

// Outcome is how a request ended. When Committed is false the caller writes
// the response: Relay when set, else the error described here.
type Outcome struct {
	Status     string // report.Request* status
	StatusCode int
	ErrorType  string // the record's error_type
	Code       string // the client-facing error code, when the caller writes an error
	Message    string
	Committed  bool
	// ErrorSent: the stream ended with the provider's own error event,
	// relayed to the client; no error frame of the gateway's follows it.
	ErrorSent  bool
	Relay      *upstream.StatusError
	RetryAfter time.Duration

	FirstByte time.Duration // receipt of the request to its first byte sent to the client
	Usage     upstream.Usage
	HasUsage  bool
	Tried     int // candidates that were attempted (admission included)
}

// Observer receives the loop's measurements (implemented by the metrics
// package). Calls must not block.
type Observer interface {
	AdmissionWait(c *Candidate, waited time.Duration, err error)
	CandidateDone(c *Candidate, status, errorType string, d time.Duration)
	FirstByte(c *Candidate, d time.Duration)
	GlobalHeld(d time.Duration)
	WatchdogFired(c *Candidate, kind string)                            // first_byte, idle, total
	RequestDone(model, route, status string, code int, d time.Duration) // route: the client route (chat, messages, ...)
	Enqueued(d time.Duration)                                           // time to hand the final request record to the recorder
	RetryBudgetExhausted(c *Candidate)
	HedgeDone(c *Candidate, result string) // a hedge attempt won, lost or failed
}

// Runner is the attempt loop.
type Runner struct {
	Admit     Admitter
	Record    Recorder
	Observe   Observer          // optional
	Upstreams map[string]Sender // by provider name, for providers without a Sender
	HoldMode  watchdog.HoldMode // when a stream's execution slot is released
	// Clock stamps the records and arms the attempts' deadlines and hedge
	// timers; nil is the process clock.
	Clock  Clock
	Budget *RetryBudget // bounds attempts beyond a request's first; nil: unbounded
	// HedgeMinDelay floors a hedge delay taken from a latency percentile.
	HedgeMinDelay time.Duration
	// Redact holds the secrets the gateway knows. A provider's error event
	// relayed to the client after the commit point is cleaned of them: a
	// provider that echoes the key it was sent must not hand it to the
	// client. Only error events pay for the scan. Nil: relayed as sent.
	Redact *secret.Redactor
	// TestHook, when set, is called with "attempt" before each provider
	// call. Fault tests use it to inject panics.
	TestHook func(point string)
	// Log receives what no caller is left to handle: a panic while a lost
	// hedge attempt settles itself. nil is slog.Default().
	Log *slog.Logger

	// flights counts the goroutines of hedged attempts, which outlive Run
	// when they lose: each settles its own row and slots once cancelled.
	flights flightGroup
}

// Wait blocks until every hedged attempt started so far has ended, its
// slots released and its row recorded, or until ctx ends. The server calls
// it at shutdown before it closes the recorder.
func (r *Runner) Wait(ctx context.Context) error { return r.flights.wait(ctx) }

// flightGroup counts running goroutines like a sync.WaitGroup, but may be
// waited on while new ones start: after a hard shutdown cut, handlers still
// running may start a hedge while the server waits.
type flightGroup struct {
	mu   sync.Mutex
	n    int
	zero chan struct{} // closed when n drops to 0; made by a waiter
}

// Go runs f on a goroutine of its own, counted until f returns.
func (g *flightGroup) Go(f func()) {
	g.mu.Lock()
	g.n++
	g.mu.Unlock()
	go func() {
		defer g.done()
		f()
	}()
}

func (g *flightGroup) done() {
	g.mu.Lock()
	if g.n--; g.n == 0 && g.zero != nil {
		close(g.zero)
		g.zero = nil
	}
	g.mu.Unlock()
}

func (g *flightGroup) wait(ctx context.Context) error {
	g.mu.Lock()
	if g.n == 0 {
		g.mu.Unlock()
		return nil
	}
	if g.zero == nil {
		g.zero = make(chan struct{})
	}
	zero := g.zero
	g.mu.Unlock()
	select {
	case <-zero:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Clock is the loop's one clock. The process clock's readings are
// monotonic, so a wall-clock jump never stretches a wait or a timeout.
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) watchdog.Timer
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) AfterFunc(d time.Duration, f func()) watchdog.Timer { return time.AfterFunc(d, f) }

func (r *Runner) clock() Clock {
	if r.Clock == nil {
		return systemClock{}
	}
	return r.Clock
}

func (r *Runner) now() time.Time { return r.clock().Now() }

// Now reads the loop's clock. The handler stamps a request's receipt with
// it, so the receipt, the records, the deadlines and the retry budget of one
// request are all on one clock.
func (r *Runner) Now() time.Time { return r.clock().Now() }

func (r *Runner) log() *slog.Logger {
	if r.Log == nil {
		return slog.Default()
	}
	return r.Log
}

// walk is the state of one Run.
type walk struct {
	r          *Runner
	req        *Request
	ctx        context.Context    // the request's
	cancel     context.CancelFunc // releases the deadline's context, if any
	att        Attempt            // the attempt in flight, when attempts run one after another
	winner     *Attempt           // the attempt that committed
	hedge      *hedging           // a hedged walk's flights, for a panic to release
	rows       []report.Candidate // current record of each candidate
	retryable  bool               // every failure so far was admission or 429
	timedOut   bool               // the last failure was a timeout (not admission)
	failed     int
	retryAfter time.Duration
	current    int                    // candidate being attempted, -1 before the first
	dims       [2]admission.Dimension // the attempt's quota dimensions, reused across attempts
	out        Outcome                // how the request ended, once it did
	admitStart time.Time              // when the attempt in flight asked for its slots
	sentAt     time.Time              // when the first byte went to the client
	tried      int
	probe      bool        // the attempt in flight holds its target's health probe
	cooled     []time.Time // per candidate, the cooldown end of a skip not recorded yet
	unrecorded int         // skips in cooled not recorded yet
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
		if w.attempt(ctx, i) {
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
		w.probe = w.req.Candidates[i].Target.Health.Force()
		if w.attempt(ctx, i) {
			return w.att.state.committed()
		}
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

// release gives back an attempt's slots.
func (r *Runner) release(lease *admission.Lease) {
	lease.Release()
	if r.Observe != nil {
		r.Observe.GlobalHeld(lease.GlobalHeld())
	}
}

// begin hands candidate i's slots to the attempt and records it pending.
func (w *walk) begin(i int, lease *admission.Lease) *Attempt {
	w.att.reset(i, lease, w.r.now())
	w.att.probe, w.probe = w.probe, false
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
}

// end records how the released attempt a ended and reports whether the
// request is settled. err nil is a relayed success; committed says whether
// a passed its commit point (only Finish ends a committed one).
func (w *walk) end(a *Attempt, err error, committed bool) (done bool) {
	i := a.i
	row := &w.rows[i]
	now := w.r.now()
	row.FinishedAt, row.Latency, row.FirstByte = now, now.Sub(row.StartedAt), a.fb
	if a.fb > 0 && w.r.Observe != nil {
		w.r.Observe.FirstByte(&w.req.Candidates[i], a.fb)
	}
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
		w.settle(i, report.CandidateSuccess, a.resp.StatusCode, errType, msg)
		return w.stop(i+1, Outcome{Status: report.RequestSuccess, StatusCode: http.StatusOK, Committed: true,
			Usage: a.usage, HasUsage: a.hasUsage, ErrorType: errType})
	}
	var ended error
	if w.ctx.Err() != nil {
		ended = context.Cause(w.ctx)
	}
	w.probe, a.probe = a.probe, false // apply gives it back with the verdict
	return w.apply(i, Classify(err, committed, ended), committed)
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

// apply records candidate i's failure and acts on it: the request ends, or
// the walk moves on with what the failure says about the provider.
func (w *walk) apply(i int, f Failure, committed bool) (done bool) {
	if f.Watchdog != "" {
		w.watchdogFired(i, f.Watchdog)
	}
	w.settle(i, f.Status, f.Code, f.ErrorType, f.Message)
	w.healthDone(i, f.Verdict())
	if !f.Failover {
		return w.stop(i+1, Outcome{Status: f.RequestStatus, StatusCode: f.RequestCode, ErrorType: f.ErrorType,
			Code: f.ReplyCode, Message: f.Reply, Committed: committed, Relay: f.Relay, RetryAfter: f.RetryAfter})
	}
	w.timedOut = f.Timeout
	if f.Capacity {
		w.noteRetryAfter(f.RetryAfter)
	} else {
		w.retryable = false
	}
	if f.Scope == ScopeProvider {
		w.skipProvider(i)
	}
	return false
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
