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
	"github.com/llmgw/gateway/internal/report"
	"github.com/llmgw/gateway/internal/secret"
	"github.com/llmgw/gateway/internal/upstream"
	"github.com/llmgw/gateway/internal/watchdog"
)

// The loop's types: the Runner and what it is given (Request, Exchange) and
// gives back (Outcome), the interfaces it consumes, and its clock. The loop
// itself is in loop.go.

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
	Team            string // the client's team, for records and budgets; "" for none
	// CostInUsage puts the request's cost in the usage object the client
	// receives (the relay does; docs/cost.md).
	CostInUsage bool
	Priority    admission.Priority
	Received    time.Time
	Candidates  []Candidate
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
	// Resume is how many continuations a text stream cut after its commit
	// point may start on the next candidates (resume.go); 0: off. Not
	// with Hedge.
	Resume int
	// Cache is what the route's response cache did with the request, for
	// its row (report.CacheMiss, CacheBypass); "" on a route without one.
	Cache string
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
	// Stitch readies s to watch a stream on ep for a resume, or returns
	// nil when such a stream cannot be resumed.
	Stitch(ep *upstream.Endpoint, s *upstream.Stitch) *upstream.Stitch
	// BuildPrefill is Build for a continuation: text, what the client
	// has, goes last as an assistant message.
	BuildPrefill(ep *upstream.Endpoint, model, text string, call *upstream.Call) error
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
	// Cost is the request's cost in USD: every attempt its providers
	// billed, from their usage and prices (docs/cost.md). HasCost is false
	// when one of them is unpriced or its usage unknown.
	Cost    float64
	HasCost bool
	// UsageEstimated: some attempt's usage is the gateway's estimate (a
	// cut attempt, a stream without its usage), as the request row says.
	UsageEstimated bool
	Tried          int // attempts made (admission included), same-candidate retries too
	// TraceID is the request's trace (32 hex digits), "" untraced.
	TraceID string
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
	// Billed counts an attempt the provider billed: its usage and, when
	// priced, its cost in USD; team is the client's ("" for none).
	Billed(c *Candidate, team string, u upstream.Usage, usd float64, priced bool)
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
	// Trace puts attempts on the requests' traces; nil: tracing off.
	Trace Tracer
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
