package candidates

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/report"
	"github.com/llmgw/gateway/internal/upstream"
)

// Fault tests of the attempt race: hedged flights on their goroutines, the
// hold of a stream_commit with within (a read on a goroutine), and the ends
// of a committed attempt. Each one checks what an operator would see: the
// rows, the outcome, the gates back to zero and no goroutine left. A hedge
// loser settles its own row on its goroutine after Run returned the winner,
// so rows and gates are read once the runner has no flight left (settled).

// called wraps a Sender and closes sent at its first call, so a test knows
// the attempt is on its way to the provider.
type called struct {
	Sender
	once sync.Once
	sent chan struct{}
}

func callSignal(s Sender) *called { return &called{Sender: s, sent: make(chan struct{})} }

func (c *called) Send(ctx context.Context, call *upstream.Call) (*http.Response, error) {
	c.once.Do(func() { close(c.sent) })
	return c.Sender.Send(ctx, call)
}

// failAfter fails each call with err after delay, or with the request's
// end when that comes first.
type failAfter struct {
	delay time.Duration
	err   error
}

func (f failAfter) Send(ctx context.Context, _ *upstream.Call) (*http.Response, error) {
	select {
	case <-time.After(f.delay):
		return nil, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// blockingBody yields its chunks, then blocks (closing blocked) until the
// request is cancelled or the body closed, as a real transport's body does.
type blockingBody struct {
	ctx     context.Context
	chunks  []string
	blocked chan struct{}
	once    sync.Once
	closed  chan struct{}
	cOnce   sync.Once
}

func (b *blockingBody) Read(p []byte) (int, error) {
	if len(b.chunks) > 0 {
		n := copy(p, b.chunks[0])
		if b.chunks[0] = b.chunks[0][n:]; b.chunks[0] == "" {
			b.chunks = b.chunks[1:]
		}
		return n, nil
	}
	b.once.Do(func() { close(b.blocked) })
	select {
	case <-b.ctx.Done():
		return 0, b.ctx.Err()
	case <-b.closed:
		return 0, net.ErrClosed
	}
}

func (b *blockingBody) Close() error {
	b.cOnce.Do(func() { close(b.closed) })
	return nil
}

// stalls answers with a stream that sends chunks and then stalls; blocked
// is closed once a read waits on the stall.
type stalls struct {
	chunks  []string
	blocked chan struct{}
}

func newStalls(chunks ...string) *stalls {
	return &stalls{chunks: chunks, blocked: make(chan struct{})}
}

func (s *stalls) Send(ctx context.Context, _ *upstream.Call) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, ContentLength: -1,
		Body: &blockingBody{ctx: ctx, chunks: append([]string(nil), s.chunks...), blocked: s.blocked, closed: make(chan struct{})}}, nil
}

// hedgeTally counts gateway_hedges_total by provider and result; the other
// observations are ignored. It is called from the walk and from flights.
type hedgeTally struct {
	panicObserver
	mu     sync.Mutex
	counts map[string]int
}

func (o *hedgeTally) HedgeDone(c *Candidate, result string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.counts == nil {
		o.counts = map[string]int{}
	}
	o.counts[c.Provider().Name+":"+result]++
}

func (o *hedgeTally) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var s []string
	for k, n := range o.counts {
		s = append(s, k+"="+strconv.Itoa(n))
	}
	sort.Strings(s)
	return strings.Join(s, " ")
}

// raceRun runs one streaming request of model m under ctx, relays a winner
// the way the handler does (Finish with how the relay ended), and returns
// what the client got, the outcome, the rows as provider:status/error_type
// (+/skip_reason), the ledger and how long Run took.
type raceResult struct {
	got  string
	out  *Outcome
	rows string
	l    *ledger
	took time.Duration
}

func raceRun(t *testing.T, h *healthRig, ctx context.Context, up map[string]Sender, edit func(*Request)) raceResult {
	t.Helper()
	h.run.Upstreams = up
	pol, plan, err := h.plan.PlanPolicy("m")
	if err != nil {
		t.Fatal(err)
	}
	l := &ledger{cands: map[int]report.Candidate{}}
	h.run.Record = l
	req := &Request{ID: uuid.New(), Model: "m", Stream: true, Priority: admission.Interactive,
		Received: time.Now(), Candidates: plan, Exchange: chatOf("m"), Hedge: pol.Hedge}
	if edit != nil {
		edit(req)
	}
	start := time.Now()
	att, out := h.run.Run(ctx, req)
	res := raceResult{l: l, took: time.Since(start)}
	if att != nil {
		var sb strings.Builder
		sb.Write(att.First())
		att.Sent()
		for {
			p, err := att.Next()
			if err != nil {
				out = att.Finish(err)
				break
			}
			sb.Write(p)
		}
		res.got = sb.String()
	}
	res.out = out
	settled(t, h)
	res.rows = rowsOf(l, len(plan))
	return res
}

func rowsOf(l *ledger, n int) string {
	var rows []string
	for i := range n {
		c := l.cands[i]
		s := c.Provider + ":" + c.Status + "/" + c.ErrorType
		if c.SkipReason != "" {
			s += "/" + c.SkipReason
		}
		rows = append(rows, s)
	}
	return strings.Join(rows, " ")
}

// settled waits until every hedged flight of the rig's runner has ended,
// its row recorded and its slots released.
func settled(t *testing.T, h *healthRig) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.run.Wait(ctx); err != nil {
		t.Fatalf("hedged flights still running: %v", err)
	}
}

// idle fails the test unless the rig's gates are back to zero once its
// flights have ended.
func idle(t *testing.T, h *healthRig) {
	t.Helper()
	settled(t, h)
	if !h.sched.Idle() {
		t.Fatalf("gates not back to zero: %+v", h.sched.Stats().Global)
	}
}

// waitsOut waits on its provider until the request ends, then takes lag
// more to let go (a transport still tearing its connection down); it counts
// the requests that ended.
type waitsOut struct {
	lag   time.Duration
	ended atomic.Int32
}

func (w *waitsOut) Send(ctx context.Context, _ *upstream.Call) (*http.Response, error) {
	<-ctx.Done()
	w.ended.Add(1)
	<-time.After(w.lag)
	return nil, ctx.Err()
}

// TestHedgeRequestEndsWithTwoInFlight: when the client leaves or the deadline
// passes while the primary and its hedge both wait on their providers, Run
// returns with the request's end, both upstream requests end, the attempt
// that saw the end first carries it and the other is hedge_lost (as
// docs/architecture.md says), every slot is released and no goroutine is
// left. Here the hedge lets go first; the other order is the bug reported
// with this file.
func TestHedgeRequestEndsWithTwoInFlight(t *testing.T) {
	tests := []struct {
		name     string
		deadline bool
		status   string
		code     int
		ended    string // the error_type of the attempt that saw the end
		endRow   string // its row status
	}{
		{"client gone", false, report.RequestCancelled, 499, report.ErrorTypeClientCancelled, report.CandidateCancelled},
		{"deadline", true, report.RequestFailed, http.StatusGatewayTimeout, report.ErrorTypeDeadline, report.CandidateFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			h := newHealthRig(t, hedgeRoutes)
			a, b := &waitsOut{lag: 100 * time.Millisecond}, &waitsOut{}
			bs := callSignal(b)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if !tt.deadline {
				go func() {
					select {
					case <-bs.sent: // the hedge is on its way: both are in flight
						cancel()
					case <-time.After(5 * time.Second):
					}
				}()
			}
			res := raceRun(t, h, ctx, map[string]Sender{"a": a, "b": bs}, func(r *Request) {
				if tt.deadline {
					r.Deadline = r.Received.Add(300 * time.Millisecond)
				}
			})
			select {
			case <-bs.sent:
			default:
				t.Fatal("the hedge never started")
			}
			if res.out.Status != tt.status || res.out.StatusCode != tt.code || res.out.ErrorType != tt.ended || res.out.Committed {
				t.Fatalf("outcome %+v, want %s %d %s", res.out, tt.status, tt.code, tt.ended)
			}
			if res.took > 3*time.Second {
				t.Fatalf("Run took %s after the request ended", res.took)
			}
			if want := "a:cancelled/hedge_lost b:" + tt.endRow + "/" + tt.ended; res.rows != want {
				t.Fatalf("rows %s, want %s", res.rows, want)
			}
			if n := a.ended.Load() + b.ended.Load(); n != 2 {
				t.Fatalf("%d upstream requests ended, want both", n)
			}
			if res.l.req.Status != tt.status || res.l.req.ErrorType != tt.ended {
				t.Fatalf("request recorded %s/%s", res.l.req.Status, res.l.req.ErrorType)
			}
			idle(t, h)
		})
	}
}

// TestHedgeEveryAttemptFails: the primary and its hedge both fail, in
// either order; the one still waiting is not cancelled by the other's
// failure, both are recorded with their own error, the request is
// exhausted (502) and the hedge counts as failed.
func TestHedgeEveryAttemptFails(t *testing.T) {
	boom := &upstream.StatusError{Code: 500}
	tests := []struct {
		name string
		a, b time.Duration // each attempt's time to fail; b starts at 50ms
	}{
		{"hedge fails first", 200 * time.Millisecond, 10 * time.Millisecond},
		{"primary fails first", 250 * time.Millisecond, 400 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			h := newHealthRig(t, hedgeRoutes)
			tally := &hedgeTally{}
			h.run.Observe = tally
			res := raceRun(t, h, context.Background(),
				map[string]Sender{"a": failAfter{tt.a, boom}, "b": failAfter{tt.b, boom}}, nil)
			if res.rows != "a:failed/upstream_http_error b:failed/upstream_http_error" {
				t.Fatalf("rows %s", res.rows)
			}
			if res.out.StatusCode != http.StatusBadGateway || res.out.Code != "candidates_exhausted" ||
				res.out.ErrorType != report.ErrorTypeUpstreamHTTP {
				t.Fatalf("outcome %+v", res.out)
			}
			if got := tally.String(); got != "b:failed=1" {
				t.Fatalf("hedges %q, want b:failed=1", got)
			}
			idle(t, h)
		})
	}
}

// TestHedgeFailsWhilePrimaryWaits: a hedge that fails on its own leaves the
// primary running; the primary's answer is relayed whole.
func TestHedgeFailsWhilePrimaryWaits(t *testing.T) {
	defer goleak.VerifyNone(t)
	h := newHealthRig(t, hedgeRoutes)
	tally := &hedgeTally{}
	h.run.Observe = tally
	primary := &slowStream{delay: 250 * time.Millisecond}
	down := &slowStream{fail: &upstream.ConnectError{Provider: "b", Err: errors.New("refused")}}
	res := raceRun(t, h, context.Background(), map[string]Sender{"a": primary, "b": down}, nil)
	if res.got != ev1+"data: [DONE]\n\n" || res.out.Status != report.RequestSuccess {
		t.Fatalf("client got %q, outcome %+v", res.got, res.out)
	}
	if res.rows != "a:success/ b:failed/upstream_connect_error" {
		t.Fatalf("rows %s", res.rows)
	}
	if primary.cancelled.Load() != 0 {
		t.Fatal("the hedge's failure cancelled the primary")
	}
	if got := tally.String(); got != "b:failed=1" {
		t.Fatalf("hedges %q", got)
	}
	idle(t, h)
}

// hogTarget takes candidate b's only target slot, so that a hedge on it
// queues; release gives it back.
func hogTarget(t *testing.T, h *healthRig) (release func()) {
	t.Helper()
	var b *Provider
	for _, p := range h.plan.Providers() {
		if p.Name == "b" {
			b = p
		}
	}
	l, err := h.sched.Acquire(context.Background(), admission.Request{Priority: admission.Interactive, Budget: time.Second,
		Dimensions: []admission.Dimension{{Gate: admission.TargetGate, ID: b.Targets[0].ID, Label: "b", Limit: b.MaxConcurrency}}})
	if err != nil {
		t.Fatal(err)
	}
	return l.Release
}

// TestHedgeAdmission: a hedge that cannot get its slot in its queue budget
// fails as an admission timeout while the primary goes on; a hedge still
// queued when the primary commits leaves the queue and is hedge_lost. Both
// ways every slot comes back.
func TestHedgeAdmission(t *testing.T) {
	routes := strings.Replace(hedgeRoutes, `api_keys: [kb], max_concurrency: 4 }`,
		`api_keys: [kb], max_concurrency: 1, queue_budget: QB }`, 1)
	tests := []struct {
		name, budget string
		rows         string
	}{
		{"queue budget runs out", "30ms", "a:success/ b:failed/gateway_admission_timeout"},
		{"still queued at the commit", "10s", "a:success/ b:cancelled/hedge_lost"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			h := newHealthRig(t, strings.Replace(routes, "QB", tt.budget, 1))
			release := hogTarget(t, h)
			primary := &slowStream{delay: 300 * time.Millisecond}
			res := raceRun(t, h, context.Background(), map[string]Sender{"a": primary, "b": &slowStream{}}, nil)
			if res.rows != tt.rows || res.out.Status != report.RequestSuccess || res.got != ev1+"data: [DONE]\n\n" {
				t.Fatalf("rows %s, outcome %+v, client got %q", res.rows, res.out, res.got)
			}
			if st := h.sched.Stats(); st.Global.Active != 1 || st.Global.Pending != 0 {
				t.Fatalf("after the request, global %+v; want only the hog's slot", st.Global)
			}
			release()
			idle(t, h)
		})
	}
}

// TestHedgeRefusedByRetryBudget: with a budget of 0 and 0, the hedge timer
// starts nothing: the hedge is skipped/retry_budget, and a primary that then
// fails leaves the request exhausted with its error.
func TestHedgeRefusedByRetryBudget(t *testing.T) {
	tests := []struct {
		name    string
		primary Sender
		rows    string
		status  string
	}{
		{"primary succeeds", &slowStream{delay: 300 * time.Millisecond}, "a:success/ b:skipped//retry_budget", report.RequestSuccess},
		{"primary fails", failAfter{300 * time.Millisecond, &upstream.StatusError{Code: 500}},
			"a:failed/upstream_http_error b:skipped//retry_budget", report.RequestFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			h := newHealthRig(t, hedgeRoutes)
			h.run.Budget = NewRetryBudget(0, 0)
			b := callSignal(&slowStream{})
			res := raceRun(t, h, context.Background(), map[string]Sender{"a": tt.primary, "b": b}, nil)
			if res.rows != tt.rows || res.out.Status != tt.status {
				t.Fatalf("rows %s, outcome %+v", res.rows, res.out)
			}
			if tt.status == report.RequestFailed && res.out.ErrorType != report.ErrorTypeUpstreamHTTP {
				t.Fatalf("exhausted with %q, want the primary's error", res.out.ErrorType)
			}
			select {
			case <-b.sent:
				t.Fatal("the refused hedge reached its provider")
			default:
			}
			idle(t, h)
		})
	}
}

// TestHedgedFlightPanics: a panic on a flight's goroutine reaches the
// caller of Run from the request's goroutine; the other flight is cancelled
// and hedge_lost, the panicking candidate is failed with
// gateway_internal_error, the request 500, and no slot is kept.
func TestHedgedFlightPanics(t *testing.T) {
	tests := []struct {
		name string
		at   int32 // which provider call panics
		rows string
	}{
		{"primary", 1, "a:failed/gateway_internal_error b:unused/"},
		{"hedge", 2, "a:cancelled/hedge_lost b:failed/gateway_internal_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			h := newHealthRig(t, hedgeRoutes)
			var calls atomic.Int32
			h.run.TestHook = func(string) {
				if calls.Add(1) == tt.at {
					panic("flight panic")
				}
			}
			a := &slowStream{delay: time.Hour}
			l := &ledger{cands: map[int]report.Candidate{}}
			func() {
				defer func() {
					if v := recover(); v != "flight panic" {
						t.Fatalf("recovered %v, want the flight's panic", v)
					}
				}()
				h.run.Record = l
				h.run.Upstreams = map[string]Sender{"a": a, "b": &slowStream{delay: time.Hour}}
				pol, plan, _ := h.plan.PlanPolicy("m")
				h.run.Run(context.Background(), &Request{ID: uuid.New(), Model: "m", Stream: true, Priority: admission.Interactive,
					Received: time.Now(), Candidates: plan, Exchange: chatOf("m"), Hedge: pol.Hedge})
			}()
			settled(t, h)
			if got := rowsOf(l, 2); got != tt.rows {
				t.Fatalf("rows %s, want %s", got, tt.rows)
			}
			if l.req.Status != report.RequestFailed || l.req.StatusCode != 500 || l.req.ErrorType != report.ErrorTypeInternal {
				t.Fatalf("request recorded %+v", l.req)
			}
			if tt.at == 2 && a.cancelled.Load() != 1 {
				t.Fatal("the primary's upstream request outlived the panic")
			}
			idle(t, h)
		})
	}
}

// withinRoutes holds a's stream for three events or 150ms after the first.
var withinRoutes = strings.Replace(commitRoutes, "stream_commit: { events: 3 }", "stream_commit: { events: 3, within: 150ms }", 1)

// TestHoldWithinClientGone: the client leaves while the hold's read
// goroutine waits on a silent upstream; the request ends cancelled without
// waiting out within, the read goroutine ends, nothing is relayed and no
// slot is kept.
func TestHoldWithinClientGone(t *testing.T) {
	defer goleak.VerifyNone(t)
	h := newHealthRig(t, strings.Replace(withinRoutes, "within: 150ms", "within: 10s", 1))
	a := newStalls(ev1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-a.blocked: // the first event is held; the next read waits
			cancel()
		case <-time.After(5 * time.Second):
		}
	}()
	res := raceRun(t, h, ctx, map[string]Sender{"a": a, "b": &slowStream{}}, nil)
	if res.got != "" || res.out.Status != report.RequestCancelled || res.out.ErrorType != report.ErrorTypeClientCancelled {
		t.Fatalf("client got %q, outcome %+v", res.got, res.out)
	}
	if res.rows != "a:cancelled/client_cancelled b:unused/" {
		t.Fatalf("rows %s", res.rows)
	}
	if res.took > 3*time.Second {
		t.Fatalf("Run took %s: the hold waited out within", res.took)
	}
	idle(t, h)
}

// TestHoldWithinCommittedThenEnded: within passes with a read in flight, so
// the attempt commits holding that read; however the relay then ends (the
// client gone before Next, a panic in the relay, Finish twice, Abort after
// Finish) the read goroutine is collected, the outcome is settled once and
// every slot comes back.
func TestHoldWithinCommittedThenEnded(t *testing.T) {
	gone := &ClientWriteError{Err: io.ErrClosedPipe}
	tests := []struct {
		name string
		end  func(a *Attempt) *Outcome
		req  string // the request's recorded status
		row  string
	}{
		{"client gone before the next read", func(a *Attempt) *Outcome { return a.Finish(gone) },
			report.RequestCancelled, "a:cancelled/client_cancelled b:unused/"},
		{"relay panics", func(a *Attempt) *Outcome {
			func() {
				defer func() {
					if recover() != nil {
						a.Abort()
					}
				}()
				panic("relay")
			}()
			return nil
		}, report.RequestFailed, "a:failed/gateway_internal_error b:unused/"},
		{"Finish twice then Abort", func(a *Attempt) *Outcome {
			first := *a.Finish(gone)
			if again := a.Finish(nil); *again != first {
				panic("a second Finish changed the outcome")
			}
			a.Abort()
			return &first
		}, report.RequestCancelled, "a:cancelled/client_cancelled b:unused/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			h := newHealthRig(t, withinRoutes)
			a := newStalls(ev1)
			h.run.Upstreams = map[string]Sender{"a": a, "b": &slowStream{}}
			l := &ledger{cands: map[int]report.Candidate{}}
			h.run.Record = l
			plan, _ := h.plan.Plan("m")
			att, out := h.run.Run(context.Background(), &Request{ID: uuid.New(), Model: "m", Stream: true,
				Priority: admission.Interactive, Received: time.Now(), Candidates: plan, Exchange: chatOf("m")})
			if att == nil || string(att.First()) != ev1 {
				t.Fatalf("nothing committed at within: %+v", out)
			}
			att.Sent()
			tt.end(att)
			if got := rowsOf(l, 2); got != tt.row || l.req.Status != tt.req {
				t.Fatalf("rows %s, request %s; want %s, %s", got, l.req.Status, tt.row, tt.req)
			}
			idle(t, h)
		})
	}
}

// TestHedgeRacesAHold: the primary holds its stream for three events and
// waits on its read goroutine when the hedge commits; the primary's read
// ends with its cancelled request, it is hedge_lost, and the client sees
// only the hedge's stream.
func TestHedgeRacesAHold(t *testing.T) {
	defer goleak.VerifyNone(t)
	routes := strings.Replace(withinRoutes, "within: 150ms", "within: 10s", 1)
	routes = strings.Replace(routes, "  - name: m\n", "  - name: m\n    hedge: { after: 50ms }\n", 1)
	h := newHealthRig(t, routes)
	a := newStalls(ev1)
	tally := &hedgeTally{}
	h.run.Observe = tally
	res := raceRun(t, h, context.Background(), map[string]Sender{"a": a, "b": &slowStream{}}, nil)
	if res.got != ev1+"data: [DONE]\n\n" || res.rows != "a:cancelled/hedge_lost b:success/" {
		t.Fatalf("client got %q, rows %s", res.got, res.rows)
	}
	if res.took > 3*time.Second {
		t.Fatalf("Run took %s: the loser's hold was waited out", res.took)
	}
	if got := tally.String(); got != "b:won=1" {
		t.Fatalf("hedges %q", got)
	}
	idle(t, h)
}

// TestHedgeWinnerFinish: the hedge that won may be finished twice and
// aborted after; the request's record stays the success and the gates
// return to zero.
func TestHedgeWinnerFinish(t *testing.T) {
	defer goleak.VerifyNone(t)
	h := newHealthRig(t, hedgeRoutes)
	h.run.Upstreams = map[string]Sender{"a": &slowStream{delay: time.Hour}, "b": &slowStream{}}
	l := &ledger{cands: map[int]report.Candidate{}}
	h.run.Record = l
	pol, plan, _ := h.plan.PlanPolicy("m")
	att, out := h.run.Run(context.Background(), &Request{ID: uuid.New(), Model: "m", Stream: true,
		Priority: admission.Interactive, Received: time.Now(), Candidates: plan, Exchange: chatOf("m"), Hedge: pol.Hedge})
	if att == nil {
		t.Fatalf("nothing committed: %+v", out)
	}
	att.Sent()
	for {
		if _, err := att.Next(); err != nil {
			break
		}
	}
	first := *att.Finish(io.EOF)
	if again := att.Finish(errors.New("late")); *again != first || first.Status != report.RequestSuccess {
		t.Fatalf("outcomes %+v then %+v", first, *again)
	}
	att.Abort()
	settled(t, h)
	if got := rowsOf(l, 2); got != "a:cancelled/hedge_lost b:success/" || l.req.Status != report.RequestSuccess {
		t.Fatalf("rows %s, request %s", got, l.req.Status)
	}
	idle(t, h)
}

// TestHedgedWalkPanicReleasesLeases: a panic on the walk's goroutine while
// it handles a flight's landing (an observer panicking in begun) releases
// the landed attempt's lease and those of flights still running.
func TestHedgedWalkPanicReleasesLeases(t *testing.T) {
	for _, tt := range []struct {
		name string
		a, b Sender
	}{
		{"winner's lease", &slowStream{}, &slowStream{}},
		{"flight still running", &slowStream{delay: 300 * time.Millisecond},
			&slowStream{fail: &upstream.ConnectError{Provider: "b", Err: errors.New("refused")}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHealthRig(t, hedgeRoutes)
			// A scheduler of its own, closed with a bound: the leaked
			// lease would hold the rig's Close forever.
			h.sched = admission.New(admission.Config{GlobalLimit: 8})
			h.run.Admit = h.sched
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				defer cancel()
				_ = h.sched.Close(ctx)
			}()
			h.run.Observe = panicObserver{at: "admission"}
			h.run.Upstreams = map[string]Sender{"a": tt.a, "b": tt.b}
			l := &ledger{cands: map[int]report.Candidate{}}
			h.run.Record = l
			pol, plan, _ := h.plan.PlanPolicy("m")
			func() {
				defer func() {
					if recover() == nil {
						t.Fatal("no panic")
					}
				}()
				h.run.Run(context.Background(), &Request{ID: uuid.New(), Model: "m", Stream: true, Priority: admission.Interactive,
					Received: time.Now(), Candidates: plan, Exchange: chatOf("m"), Hedge: pol.Hedge})
			}()
			settled(t, h)
			if !h.sched.Idle() {
				t.Fatalf("a lease outlived the panic: %+v", h.sched.Stats().Global)
			}
		})
	}
}

// TestHedgeWinnerGivesBackItsProbe: the winner of a hedged request holds its
// target's probe while a loser is cancelled; the winner's success heals the
// target (the loser's verdict must not take the winner's probe), so the next
// request tries it.
func TestHedgeWinnerGivesBackItsProbe(t *testing.T) {
	h := newHealthRig(t, strings.Replace(hedgeRoutes, "api_keys: [ka], max_concurrency: 4 }",
		"api_keys: [ka], max_concurrency: 4, health: { failures: 1, cooldown: 10s } }", 1))
	down := &slowStream{fail: &upstream.ConnectError{Provider: "a", Err: errors.New("refused")}}
	if res := raceRun(t, h, context.Background(), map[string]Sender{"a": down, "b": &slowStream{}}, nil); res.rows != "a:failed/upstream_connect_error b:success/" {
		t.Fatalf("setup rows %s", res.rows)
	}
	h.clock.advance(11 * time.Second) // a is probing: the next request probes it
	res := raceRun(t, h, context.Background(),
		map[string]Sender{"a": &slowStream{delay: 300 * time.Millisecond}, "b": &slowStream{delay: time.Hour}}, nil)
	if res.rows != "a:success/ b:cancelled/hedge_lost" {
		t.Fatalf("probe rows %s", res.rows)
	}
	res = raceRun(t, h, context.Background(), map[string]Sender{"a": &slowStream{}, "b": &slowStream{}}, nil)
	if res.rows != "a:success/ b:unused/" {
		t.Fatalf("after a successful probe: rows %s, want a healed", res.rows)
	}
	idle(t, h)
}

// TestRunningHedgeRecordedLost: when the primary ends the request without
// committing (a relayed 400), the hedge running meanwhile, which did call its
// provider, is hedge_lost, never unused.
func TestRunningHedgeRecordedLost(t *testing.T) {
	h := newHealthRig(t, hedgeRoutes)
	b := callSignal(&slowStream{delay: time.Hour})
	res := raceRun(t, h, context.Background(),
		map[string]Sender{"a": failAfter{300 * time.Millisecond, &upstream.StatusError{Code: 400}}, "b": b}, nil)
	select {
	case <-b.sent:
	default:
		t.Fatal("the hedge never started")
	}
	if res.rows != "a:failed/upstream_http_error b:cancelled/hedge_lost" {
		t.Fatalf("rows %s, want the running hedge hedge_lost", res.rows)
	}
	if res.out.Status != report.RequestFailed || res.out.Relay == nil || res.out.Relay.Code != 400 {
		t.Fatalf("outcome %+v, want the 400 relayed", res.out)
	}
	idle(t, h)
}

// TestRunningHedgeRecordedLostClientGone: the same with the client gone,
// when the primary sees it first (the other order is in
// TestHedgeRequestEndsWithTwoInFlight).
func TestRunningHedgeRecordedLostClientGone(t *testing.T) {
	h := newHealthRig(t, hedgeRoutes)
	a, b := &waitsOut{}, &waitsOut{lag: 100 * time.Millisecond}
	bs := callSignal(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-bs.sent:
			cancel()
		case <-time.After(5 * time.Second):
		}
	}()
	res := raceRun(t, h, ctx, map[string]Sender{"a": a, "b": bs}, nil)
	if res.rows != "a:cancelled/client_cancelled b:cancelled/hedge_lost" {
		t.Fatalf("rows %s", res.rows)
	}
	idle(t, h)
}

// TestLosingFlightPanicOnRecord: a panic on the goroutine of a flight that
// lost is on record as its gateway_internal_error, not hidden as hedge_lost,
// while the winner is relayed.
func TestLosingFlightPanicOnRecord(t *testing.T) {
	h := newHealthRig(t, hedgeRoutes)
	won := make(chan struct{})
	h.run.Observe = &wonSignal{won: won}
	var calls atomic.Int32
	h.run.TestHook = func(string) {
		if calls.Add(1) == 1 { // a's flight
			<-won
			panic("loser panic")
		}
	}
	res := raceRun(t, h, context.Background(), map[string]Sender{"a": &slowStream{}, "b": &slowStream{}}, nil)
	if res.rows != "a:failed/gateway_internal_error b:success/" || res.out.Status != report.RequestSuccess {
		t.Fatalf("rows %s, outcome %+v", res.rows, res.out)
	}
	idle(t, h)
}

type wonSignal struct {
	panicObserver
	won chan struct{}
}

func (o *wonSignal) HedgeDone(_ *Candidate, result string) {
	if result == HedgeWon {
		close(o.won)
	}
}

// TestHedgedFlightLeavesACoolingTarget: a hedged request's primary waits on
// a target that another request then finds failing; the waiting flight is
// abandoned at once (cooling_down), the hedge running beside it goes on and
// is relayed, and no slot or watch is left.
func TestHedgedFlightLeavesACoolingTarget(t *testing.T) {
	defer goleak.VerifyNone(t)
	h := newHealthRig(t, strings.Replace(hedgeRoutes,
		"max_concurrency: 4 }\n  - { name: b", "max_concurrency: 4, health: { failures: 1 } }\n  - { name: b", 1))
	a := &firstHangs{called: make(chan struct{})}
	h.run.Upstreams = map[string]Sender{"a": a, "b": &slowStream{delay: 300 * time.Millisecond}}
	l := &ledgers{rows: map[uuid.UUID]map[int]report.Candidate{}}
	h.run.Record = l
	run := func(id uuid.UUID) *Outcome {
		pol, plan, _ := h.plan.PlanPolicy("m")
		att, out := h.run.Run(context.Background(), &Request{ID: id, Model: "m", Stream: true, Priority: admission.Interactive,
			Received: time.Now(), Candidates: plan, Exchange: chatOf("m"), Hedge: pol.Hedge})
		if att == nil {
			return out
		}
		att.Sent()
		for {
			if _, err := att.Next(); err != nil {
				return att.Finish(err)
			}
		}
	}
	first, second := uuid.New(), uuid.New()
	done := make(chan *Outcome, 1)
	go func() { done <- run(first) }()
	select {
	case <-a.called: // the first request now waits on a
	case <-time.After(5 * time.Second):
		t.Fatal("the first request never reached a")
	}
	if out := run(second); out.Status != report.RequestSuccess || l.of(second) != "a:failed/upstream_http_error b:success/" {
		t.Fatalf("second request %s, rows %s", out.Status, l.of(second))
	}
	select {
	case out := <-done:
		if out.Status != report.RequestSuccess {
			t.Fatalf("first request %+v", out)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting flight did not leave the cooling target")
	}
	if got := l.of(first); got != "a:cancelled/cooling_down b:success/" {
		t.Fatalf("first request rows %s", got)
	}
	idle(t, h)
}
