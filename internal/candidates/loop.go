package candidates

import (
	"context"
	"errors"
	"net/http"
	"os"
	"time"

	"github.com/google/uuid"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/report"
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

// Executor performs one admitted attempt: it calls the provider and, once the
// provider has really started, writes the response to the client. It must set
// Attempt.Committed before the first byte goes to the client and never write
// anything for an attempt that fails before that. It returns nil for a
// relayed success and otherwise an error the Runner classifies. It never
// writes an error to the client itself: the Runner decides the outcome first,
// and the caller speaks (DESIGN habit: decide, then speak).
type Executor interface {
	Execute(ctx context.Context, a *Attempt) error
}

// Attempt is one candidate's try, shared between the Runner and the Executor.
type Attempt struct {
	Candidate *Candidate
	Lease     *admission.Lease
	Stream    bool

	// Set by the Executor.
	Committed bool          // bytes (at least headers) reached the client
	Status    int           // upstream status of a success
	FirstByte time.Duration // admission to first forwarded event (stream) or response headers
	Usage     upstream.Usage
	HasUsage  bool

	// Sent is called by the Executor once, right after the attempt's first
	// bytes were written to the client: a stream's first event, or the start
	// of a non-streaming body.
	Sent func()
}

// ClientWriteError is a failed write to the client: the client went away or
// stopped reading. It is never the provider's fault.
type ClientWriteError struct{ Err error }

func (e *ClientWriteError) Error() string { return "write to client: " + e.Err.Error() }
func (e *ClientWriteError) Unwrap() error { return e.Err }

// ErrShutdown is the cancellation cause when the shutdown grace ended.
var ErrShutdown = errors.New("gateway shutting down")

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
	WatchdogFired(c *Candidate, kind string) // first_byte, idle, total
	RequestDone(route, status string, code int, d time.Duration)
	Enqueued(d time.Duration) // time to hand the final request record to the recorder
}

// Runner is the attempt loop.
type Runner struct {
	Admit   Admitter
	Record  Recorder
	Observe Observer // optional
	Now     func() time.Time
}

// walk is the state of one Run.
type walk struct {
	r          *Runner
	req        *Request
	rows       []report.Candidate // current record of each candidate
	retryable  bool               // every failure so far was admission or 429
	timedOut   bool               // the last failure was a timeout (not admission)
	failed     int
	retryAfter time.Duration
	current    int                    // candidate being attempted, -1 before the first
	dims       [1]admission.Dimension // the attempt's quota dimensions, reused across attempts
	out        Outcome                // how the request ended, once it did
	admitStart time.Time              // when the attempt in flight asked for its slots
	sent       time.Time              // when the first byte went to the client
	tried      int
}

// Run walks the candidates in order until one settles the request.
//
// Run, run and attempt stay on the goroutine's stack for as long as a stream
// is relayed, so they are kept thin: records, classification and outcomes
// are built in helpers that have returned by then. With their frames small
// the handler's stack fits in 8 KiB instead of 16 KiB, which is most of the
// gateway's memory per open stream (docs/benchmarks.md).
func (r *Runner) Run(ctx context.Context, req *Request, exec Executor) *Outcome {
	w := &walk{r: r, req: req, retryable: true, current: -1}
	w.recordPlanned()
	defer w.recordPanic()
	w.run(ctx, exec)
	w.finishRequest()
	return &w.out
}

// recordPlanned writes the pending request and its available candidates.
func (w *walk) recordPlanned() {
	req := w.req
	w.r.Record.RecordRequest(report.Request{
		ID: req.ID, ClientRequestID: req.ClientRequestID, CreatedAt: req.Received,
		Model: req.Model, Stream: req.Stream, Client: req.Client, Priority: req.Priority.String(),
		Status: report.RequestPending, CandidateCount: len(req.Candidates),
	})
	w.rows = make([]report.Candidate, len(req.Candidates))
	for i := range req.Candidates {
		c := &req.Candidates[i]
		w.rows[i] = report.Candidate{
			RequestID: req.ID, Index: c.Index, Provider: c.Target.Provider.Name,
			Endpoint: c.Target.Provider.Origin, KeyID: c.Target.KeyID, Model: c.Model,
			Status: report.CandidateAvailable, CreatedAt: req.Received,
		}
		w.r.Record.RecordCandidate(w.rows[i])
	}
}

// recordPanic keeps the ledger true when the attempt loop or an executor
// panics: the candidate in flight fails with gateway_internal_error, the rest
// are unused and the request fails with 500. Slots are released by the
// attempt's own deferred Release. The panic continues to the HTTP layer,
// which answers 500 or aborts the connection.
func (w *walk) recordPanic() {
	v := recover()
	if v == nil {
		return
	}
	if w.current >= 0 {
		switch w.rows[w.current].Status {
		case report.CandidatePending, report.CandidateStreaming, report.CandidateAvailable:
			w.settle(w.current, report.CandidateFailed, http.StatusInternalServerError, report.ErrorTypeInternal, "gateway panic")
		}
	}
	w.stop(0, Outcome{Status: report.RequestFailed, StatusCode: http.StatusInternalServerError,
		ErrorType: report.ErrorTypeInternal})
	w.finishRequest()
	panic(v)
}

// run attempts the candidates in order until one settles the request, and
// leaves the outcome in w.out.
func (w *walk) run(ctx context.Context, exec Executor) {
	for i := range w.req.Candidates {
		if w.rows[i].Status != report.CandidateAvailable {
			continue // skipped by an earlier provider-scoped failure
		}
		if ctx.Err() != nil {
			w.stopGone(ctx, i)
			return
		}
		if w.attempt(ctx, i, exec) {
			return
		}
	}
	w.exhausted()
}

// stopGone settles a request whose context ended before candidate i. Not
// inlined: its Outcome temporaries would otherwise sit in run's frame for
// the whole stream.
//
//go:noinline
func (w *walk) stopGone(ctx context.Context, i int) { w.stop(i, w.clientGone(ctx)) }

// attempt runs candidate i and reports whether the request is settled.
func (w *walk) attempt(ctx context.Context, i int, exec Executor) (done bool) {
	lease, done := w.admit(ctx, i)
	if lease == nil {
		return done
	}
	defer w.release(lease)
	a := w.begin(i, lease)
	err := exec.Execute(ctx, a)
	return w.end(ctx, i, a, err)
}

// admit acquires candidate i's slots. Without a lease, done reports whether
// the admission failure settled the request.
func (w *walk) admit(ctx context.Context, i int) (lease *admission.Lease, done bool) {
	c := &w.req.Candidates[i]
	prov := c.Target.Provider
	w.current = i
	w.tried++
	start := w.r.Now()
	w.dims[0] = admission.Dimension{Gate: admission.TargetGate, ID: c.Target.ID, Label: prov.Name, Limit: prov.MaxConcurrency}
	lease, err := w.r.Admit.Acquire(ctx, admission.Request{Priority: w.req.Priority, Budget: prov.QueueBudget, Dimensions: w.dims[:]})
	if err != nil {
		if w.r.Observe != nil {
			w.r.Observe.AdmissionWait(c, w.r.Now().Sub(start), err)
		}
		return nil, w.admissionFailed(ctx, i, start, err)
	}
	// A granted wait is observed in begin, once attempt has deferred the
	// lease's release: nothing between the grant and that defer may panic.
	w.admitStart = start
	return lease, false
}

func (w *walk) release(lease *admission.Lease) {
	lease.Release()
	if w.r.Observe != nil {
		w.r.Observe.GlobalHeld(lease.GlobalHeld())
	}
}

// begin records candidate i as pending and hands out its Attempt.
func (w *walk) begin(i int, lease *admission.Lease) *Attempt {
	row := &w.rows[i]
	admitted := w.r.Now()
	if w.r.Observe != nil {
		w.r.Observe.AdmissionWait(&w.req.Candidates[i], admitted.Sub(w.admitStart), nil)
	}
	row.Status, row.StartedAt = report.CandidatePending, admitted
	w.r.Record.RecordCandidate(*row)
	a := &Attempt{Candidate: &w.req.Candidates[i], Lease: lease, Stream: w.req.Stream}
	a.Sent = func() {
		w.sent = w.r.Now()
		if a.Stream {
			row.Status = report.CandidateStreaming
			row.FirstByte = a.FirstByte
			w.r.Record.RecordCandidate(*row)
		}
	}
	return a
}

// end records how candidate i's attempt ended and reports whether the
// request is settled.
func (w *walk) end(ctx context.Context, i int, a *Attempt, err error) (done bool) {
	row := &w.rows[i]
	now := w.r.Now()
	row.FinishedAt, row.Latency, row.FirstByte = now, now.Sub(row.StartedAt), a.FirstByte
	if a.FirstByte > 0 && w.r.Observe != nil {
		w.r.Observe.FirstByte(a.Candidate, a.FirstByte)
	}
	if err == nil {
		w.settle(i, report.CandidateSuccess, a.Status, "", "")
		return w.stop(i+1, Outcome{Status: report.RequestSuccess, StatusCode: http.StatusOK, Committed: true,
			Usage: a.Usage, HasUsage: a.HasUsage})
	}
	return w.classify(ctx, i, a, err)
}

func (w *walk) admissionFailed(ctx context.Context, i int, start time.Time, err error) (done bool) {
	if ctx.Err() != nil {
		return w.stop(i, w.clientGone(ctx))
	}
	var te *admission.TimeoutError
	switch {
	case errors.As(err, &te):
		w.fail(i, http.StatusTooManyRequests, report.ErrorTypeAdmissionTimeout, err.Error(), start)
		w.noteRetryAfter(te.Budget)
		return false
	case errors.Is(err, admission.ErrQueueFull):
		w.fail(i, http.StatusTooManyRequests, report.ErrorTypeQueueFull, err.Error(), start)
		w.noteRetryAfter(time.Second)
		return false
	case errors.Is(err, admission.ErrClosed):
		w.fail(i, http.StatusServiceUnavailable, report.ErrorTypeShutdown, err.Error(), start)
		return w.stop(i+1, Outcome{Status: report.RequestFailed, StatusCode: http.StatusServiceUnavailable,
			ErrorType: report.ErrorTypeShutdown, Message: "the gateway is shutting down"})
	default:
		w.fail(i, http.StatusInternalServerError, report.ErrorTypeInternal, err.Error(), start)
		w.retryable = false
		return false
	}
}

// classify turns a failed attempt into a record and a decision.
func (w *walk) classify(ctx context.Context, i int, a *Attempt, err error) (done bool) {
	// A failed client write is checked before the context: net/http cancels
	// the request context once the connection broke, and a write deadline
	// must still be recorded as client_write_timeout.
	var cwe *ClientWriteError
	if errors.As(err, &cwe) {
		out := Outcome{Status: report.RequestCancelled, StatusCode: 499, ErrorType: report.ErrorTypeClientCancelled, Committed: true}
		status := report.CandidateCancelled
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// A client that stopped reading cut the stream: DESIGN section 7
			// records that as failed, 502, client_write_timeout.
			out.ErrorType, out.Status, out.StatusCode = report.ErrorTypeClientWriteTimeout, report.RequestFailed, http.StatusBadGateway
			status = report.CandidateFailed
		}
		w.settle(i, status, out.StatusCode, out.ErrorType, err.Error())
		return w.stop(i+1, out)
	}
	// What the upstream did decides the outcome. The request context counts
	// only when the attempt ended because the context did: a client that
	// hangs up as soon as it reads a cut stream's error event must not turn
	// the provider's failure into a client cancel.
	if endedByContext(ctx, err) {
		out := w.clientGone(ctx)
		if out.ErrorType == report.ErrorTypeShutdown {
			// DESIGN section 7: a stream cut after bytes were sent is failed
			// with 502; before any byte the client gets 503 shutting_down.
			code := http.StatusServiceUnavailable
			if a.Committed {
				code = http.StatusBadGateway
			}
			w.settle(i, report.CandidateFailed, code, out.ErrorType, "the gateway shut down before the response ended")
		} else {
			w.settle(i, report.CandidateCancelled, out.StatusCode, out.ErrorType, "client went away")
		}
		out.Committed = a.Committed
		return w.stop(i+1, out)
	}
	if a.Committed {
		// Bytes reached the client: no failover is possible any more.
		switch {
		case errors.Is(err, watchdog.ErrIdleTimeout):
			w.watchdogFired(i, "idle")
		case errors.Is(err, upstream.ErrTotalTimeout):
			w.watchdogFired(i, "total")
		}
		et := report.ErrorTypeStreamInterrupted
		w.settle(i, report.CandidateFailed, http.StatusBadGateway, et, err.Error())
		return w.stop(i+1, Outcome{Status: report.RequestFailed, StatusCode: http.StatusBadGateway, ErrorType: et, Committed: true})
	}
	var (
		se *upstream.StatusError
		ce *upstream.ConnectError
	)
	switch {
	case errors.Is(err, watchdog.ErrFirstByteTimeout):
		w.watchdogFired(i, "first_byte")
		w.settle(i, report.CandidateFailed, http.StatusGatewayTimeout, report.ErrorTypeFirstByteTimeout, err.Error())
		w.timedOut, w.retryable = true, false
		w.skipProvider(i)
	case errors.Is(err, upstream.ErrTotalTimeout):
		w.watchdogFired(i, "total")
		w.settle(i, report.CandidateFailed, http.StatusGatewayTimeout, report.ErrorTypeUpstreamTimeout, err.Error())
		w.timedOut, w.retryable = true, false
		w.skipProvider(i)
	case errors.As(err, &se):
		if se.ClientFault() {
			w.settle(i, report.CandidateFailed, se.Code, report.ErrorTypeUpstreamHTTP, string(se.Body))
			return w.stop(i+1, Outcome{Status: report.RequestFailed, StatusCode: se.Code,
				ErrorType: report.ErrorTypeUpstreamHTTP, Relay: se})
		}
		w.settle(i, report.CandidateFailed, se.Code, report.ErrorTypeUpstreamHTTP, string(se.Body))
		w.timedOut = se.Code == http.StatusRequestTimeout || se.Code == http.StatusGatewayTimeout
		if se.Code == http.StatusTooManyRequests {
			w.noteRetryAfter(se.RetryAfter)
		} else {
			w.retryable = false
		}
		if !se.KeyScoped() {
			w.skipProvider(i)
		}
	case errors.As(err, &ce):
		w.settle(i, report.CandidateFailed, http.StatusBadGateway, report.ErrorTypeUpstreamConnect, err.Error())
		w.timedOut, w.retryable = false, false
		w.skipProvider(i)
	default: // *upstream.ProtocolError, and anything unforeseen from a provider
		w.settle(i, report.CandidateFailed, http.StatusBadGateway, report.ErrorTypeUpstreamProtocol, err.Error())
		w.timedOut, w.retryable = false, false
		w.skipProvider(i)
	}
	return false
}

// endedByContext reports whether an attempt's error is the request context
// ending (the client left, or the shutdown grace ran out) rather than
// something the upstream did. The executor turns errors caused by a
// cancelled context into that context's cause.
func endedByContext(ctx context.Context, err error) bool {
	return ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, ErrShutdown))
}

func (w *walk) watchdogFired(i int, kind string) {
	if w.r.Observe != nil {
		w.r.Observe.WatchdogFired(&w.req.Candidates[i], kind)
	}
}

// clientGone describes a request whose context ended: the client left, or
// the shutdown grace ran out.
func (w *walk) clientGone(ctx context.Context) Outcome {
	if errors.Is(context.Cause(ctx), ErrShutdown) {
		return Outcome{Status: report.RequestFailed, StatusCode: http.StatusServiceUnavailable,
			ErrorType: report.ErrorTypeShutdown, Message: "the gateway is shutting down"}
	}
	return Outcome{Status: report.RequestCancelled, StatusCode: 499, ErrorType: report.ErrorTypeClientCancelled,
		Message: "client closed the request"}
}

// finishRequest writes the request's final record.
func (w *walk) finishRequest() {
	out := &w.out
	now := w.r.Now()
	out.Tried = w.tried
	if !w.sent.IsZero() {
		out.FirstByte = w.sent.Sub(w.req.Received)
	}
	rec := report.Request{
		ID: w.req.ID, ClientRequestID: w.req.ClientRequestID, CreatedAt: w.req.Received,
		Model: w.req.Model, Stream: w.req.Stream, Client: w.req.Client, Priority: w.req.Priority.String(),
		Status: out.Status, StatusCode: out.StatusCode, ErrorType: out.ErrorType,
		Latency: now.Sub(w.req.Received), FirstByte: out.FirstByte, CandidateCount: len(w.req.Candidates),
		FinishedAt: now,
	}
	if out.HasUsage {
		rec.HasUsage = true
		rec.PromptTokens, rec.CompletionTokens, rec.TotalTokens = out.Usage.PromptTokens, out.Usage.CompletionTokens, out.Usage.TotalTokens
	}
	w.r.Record.RecordRequest(rec)
	if w.r.Observe != nil {
		w.r.Observe.Enqueued(w.r.Now().Sub(now))
		w.r.Observe.RequestDone(w.req.Model, out.Status, out.StatusCode, rec.Latency)
	}
}

// fail records a failure of candidate i that happened before admission.
func (w *walk) fail(i, code int, errorType, msg string, start time.Time) {
	row := &w.rows[i]
	now := w.r.Now()
	row.StartedAt, row.FinishedAt, row.Latency = start, now, now.Sub(start)
	w.settle(i, report.CandidateFailed, code, errorType, msg)
	w.timedOut = false
}

func (w *walk) settle(i int, status string, code int, errorType, msg string) {
	row := &w.rows[i]
	row.Status, row.StatusCode, row.ErrorType, row.ErrorMessage = status, code, errorType, msg
	if row.FinishedAt.IsZero() && !row.StartedAt.IsZero() {
		row.FinishedAt = w.r.Now()
		row.Latency = row.FinishedAt.Sub(row.StartedAt)
	}
	if status == report.CandidateFailed {
		w.failed++
	}
	w.r.Record.RecordCandidate(*row)
	if w.r.Observe != nil {
		w.r.Observe.CandidateDone(&w.req.Candidates[i], status, errorType, row.Latency)
	}
}

// skipProvider marks the failed candidate's provider as in trouble for this
// request: its other keys would meet the same outage.
func (w *walk) skipProvider(i int) {
	prov := w.req.Candidates[i].Target.Provider
	for j := i + 1; j < len(w.req.Candidates); j++ {
		if w.req.Candidates[j].Target.Provider == prov && w.rows[j].Status == report.CandidateAvailable {
			w.rows[j].Status, w.rows[j].SkipReason = report.CandidateSkipped, "provider_failed"
			w.r.Record.RecordCandidate(w.rows[j])
			w.observeUntried(j)
		}
	}
}

// observeUntried counts an unused or skipped candidate, so candidate
// outcomes in metrics add up to every planned candidate.
func (w *walk) observeUntried(j int) {
	if w.r.Observe != nil {
		w.r.Observe.CandidateDone(&w.req.Candidates[j], w.rows[j].Status, "", 0)
	}
}

func (w *walk) noteRetryAfter(d time.Duration) {
	if d > w.retryAfter {
		w.retryAfter = d
	}
}

// stop settles the request with out: candidates from index from on that were
// never tried become unused. It returns true, for callers that report done.
func (w *walk) stop(from int, out Outcome) bool {
	for j := from; j < len(w.rows); j++ {
		if w.rows[j].Status == report.CandidateAvailable {
			w.rows[j].Status = report.CandidateUnused
			w.r.Record.RecordCandidate(w.rows[j])
			w.observeUntried(j)
		}
	}
	w.out = out
	return true
}

// exhausted settles a request whose every candidate failed (DESIGN section
// 4): 429 when each failed by admission or an upstream 429, 504 when the last
// failure was a timeout, else 502.
func (w *walk) exhausted() {
	out := Outcome{Status: report.RequestFailed, Code: "candidates_exhausted"}
	switch {
	case w.failed > 0 && w.retryable:
		out.StatusCode = http.StatusTooManyRequests
		out.RetryAfter = w.retryAfter
		out.Message = "every candidate is at capacity or rate limited; retry later"
	case w.timedOut:
		out.StatusCode = http.StatusGatewayTimeout
		out.Message = "every candidate failed; the last one timed out"
	default:
		out.StatusCode = http.StatusBadGateway
		out.Message = "every candidate failed"
	}
	// The request row names the last candidate's error type: it says why the
	// request ended; candidates_exhausted is the client-facing code.
	for j := len(w.rows) - 1; j >= 0; j-- {
		if w.rows[j].Status == report.CandidateFailed {
			out.ErrorType = w.rows[j].ErrorType
			break
		}
	}
	w.out = out
}
