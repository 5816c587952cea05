package candidates

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/report"
	"github.com/llmgw/gateway/internal/upstream"
)

// slowStream answers with a stream whose first event comes after delay
// or, when gate is set, once gate is closed, unless the request is cancelled
// first; it counts cancellations. A gate never closed is a primary that
// answers only by being cancelled.
type slowStream struct {
	delay     time.Duration
	gate      chan struct{}
	fail      error
	cancelled atomic.Int32
	reading   chan struct{} // if set, closed when the body's first read begins
}

func (s *slowStream) Send(ctx context.Context, _ *upstream.Call) (*http.Response, error) {
	if s.fail != nil {
		return nil, s.fail
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: &ctxBody{ctx: ctx, s: s, chunks: []string{ev1, "data: [DONE]\n\n"}}, ContentLength: -1}, nil
}

type ctxBody struct {
	ctx     context.Context
	s       *slowStream
	chunks  []string
	started bool
}

func (b *ctxBody) Read(p []byte) (int, error) {
	if !b.started {
		b.started = true
		if b.s.reading != nil {
			close(b.s.reading)
		}
		var after <-chan time.Time // nil, so never, when the gate decides
		if b.s.gate == nil {
			after = time.After(b.s.delay)
		}
		select {
		case <-after:
		case <-b.s.gate:
		case <-b.ctx.Done():
			b.s.cancelled.Add(1)
			return 0, b.ctx.Err()
		}
	}
	if err := b.ctx.Err(); err != nil {
		return 0, err // as a real transport's body does once its request is cancelled
	}
	if len(b.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, b.chunks[0])
	b.chunks = b.chunks[1:]
	return n, nil
}

func (b *ctxBody) Close() error { return nil }

const hedgeRoutes = `
providers:
  - { name: a, base_url: "http://a.example/v1", api_keys: [ka], max_concurrency: 4 }
  - { name: b, base_url: "http://b.example/v1", api_keys: [kb], max_concurrency: 4 }
models:
  - name: m
    hedge: { after: 50ms }
    candidates: [ { provider: a, priority: 0 }, { provider: b, priority: 1 } ]
`

// newHedgeRig is a healthRig whose runner runs on a stepClock: the hedge
// timer and the attempts' deadlines fire only when the test moves the clock.
func newHedgeRig(t *testing.T, src string) (*healthRig, *stepClock) {
	t.Helper()
	h := newHealthRig(t, src)
	c := newStepClock()
	h.run.Clock = c
	return h, c
}

// hedgeCall is one streaming request with the route's hedging, run on its
// own goroutine.
type hedgeCall struct {
	h    *healthRig
	l    *ledger
	plan []Candidate
	done chan *Attempt // Run's winner, nil if none

	finished bool // finish took Run's answer
}

func startHedged(t *testing.T, h *healthRig, a, b Sender) *hedgeCall {
	t.Helper()
	h.run.Upstreams = map[string]Sender{"a": a, "b": b}
	pol, plan, err := h.plan.PlanPolicy("m")
	if err != nil {
		t.Fatal(err)
	}
	c := &hedgeCall{h: h, l: &ledger{cands: map[int]report.Candidate{}}, plan: plan, done: make(chan *Attempt, 1)}
	h.run.Record = c.l
	req := &Request{ID: uuid.New(), Model: "m", Stream: true, Priority: admission.Interactive,
		Received: h.run.Clock.Now(), Candidates: plan, Exchange: chatOf("m"), Hedge: pol.Hedge}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		att, _ := h.run.Run(ctx, req)
		c.done <- att
	}()
	// A test that fails half-way lets its request go, so that the rig's
	// scheduler (closed by an earlier cleanup, so after this one) is not
	// left waiting for slots nobody releases.
	t.Cleanup(func() {
		cancel()
		if c.finished {
			return
		}
		select {
		case att := <-c.done:
			if att != nil {
				att.Abort()
			}
		case <-time.After(5 * time.Second):
		}
		settled(t, h)
	})
	return c
}

// returned reports whether Run has returned, without waiting.
func (c *hedgeCall) returned() bool { return len(c.done) > 0 }

// finish waits for Run's answer (the bound only ends a wait that never
// ends), relays the winner and waits for the flights; it returns the
// client's bytes and the candidate rows.
func (c *hedgeCall) finish(t *testing.T) (string, []string) {
	t.Helper()
	var att *Attempt
	select {
	case att = <-c.done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return")
	}
	c.finished = true
	var sb strings.Builder
	if att != nil {
		relayTo(&sb, att)
	}
	settled(t, c.h)
	if !c.h.sched.Idle() {
		t.Fatal("gates not back to zero after the request")
	}
	return sb.String(), candidateRows(c.l, c.plan)
}

const hedgeAfter = 50 * time.Millisecond // hedgeRoutes' delay

// TestHedging: a primary slow to its first event is hedged once the 50ms
// delay has passed, not before; the backup commits first without the
// primary being waited on, the primary's request is cancelled and recorded
// hedge_lost. A primary that answers or fails before the delay is not
// hedged; a percentile delay without samples never hedges. The clock moves
// only when the test moves it.
func TestHedging(t *testing.T) {
	t.Run("hedge wins", func(t *testing.T) {
		h, clock := newHedgeRig(t, hedgeRoutes)
		// never opened: it answers only by being cancelled
		slow := &slowStream{gate: make(chan struct{}), reading: make(chan struct{})}
		fast := callSignal(&slowStream{})
		c := startHedged(t, h, slow, fast)
		clock.waitArmed(t, hedgeAfter)
		select { // the primary waits for its first event before the clock moves
		case <-slow.reading:
		case <-time.After(5 * time.Second):
			t.Fatal("the primary's body was never read")
		}
		clock.advance(hedgeAfter - time.Millisecond)
		if clock.armed(hedgeAfter) != 1 || c.returned() {
			t.Fatalf("before the delay: hedge timer armed %d, Run returned %v; want the hedge still to come",
				clock.armed(hedgeAfter), c.returned())
		}
		select {
		case <-fast.sent:
			t.Fatal("the backup was called before the hedge delay")
		default:
		}
		clock.advance(time.Millisecond)
		got, rows := c.finish(t) // the primary never answers: Run must not wait for it
		if got != ev1+"data: [DONE]\n\n" {
			t.Fatalf("client got %q", got)
		}
		if strings.Join(rows, " ") != "a:cancelled/hedge_lost b:success/" {
			t.Fatalf("rows %v", rows)
		}
		if slow.cancelled.Load() != 1 {
			t.Fatalf("the losing attempt's upstream request was not cancelled: %d", slow.cancelled.Load())
		}
	})
	t.Run("primary wins before the hedge delay", func(t *testing.T) {
		h, clock := newHedgeRig(t, hedgeRoutes)
		b := callSignal(&slowStream{})
		_, rows := startHedged(t, h, &slowStream{}, b).finish(t) // the clock never moves
		if strings.Join(rows, " ") != "a:success/ b:unused/" {
			t.Fatalf("rows %v", rows)
		}
		if !slices.Contains(clock.durations(), hedgeAfter) || clock.armed(hedgeAfter) != 0 {
			t.Fatalf("timers %v, %d hedge timer left armed: want it armed, then stopped with the request",
				clock.durations(), clock.armed(hedgeAfter))
		}
	})
	t.Run("failure fails over", func(t *testing.T) {
		h, _ := newHedgeRig(t, hedgeRoutes)
		down := &slowStream{fail: &upstream.ConnectError{Provider: "a", Err: errors.New("refused")}}
		_, rows := startHedged(t, h, down, &slowStream{}).finish(t)
		if strings.Join(rows, " ") != "a:failed/upstream_connect_error b:success/" {
			t.Fatalf("rows %v", rows)
		}
	})
	t.Run("percentile without samples does not hedge", func(t *testing.T) {
		h, clock := newHedgeRig(t, strings.Replace(hedgeRoutes, "after: 50ms", "after: p95", 1))
		h.run.HedgeMinDelay = hedgeAfter // a hedge, if armed, would fire within the advance below
		gate := make(chan struct{})
		primary, b := callSignal(&slowStream{gate: gate}), callSignal(&slowStream{})
		c := startHedged(t, h, primary, b)
		await(t, primary.sent, "the primary called")
		clock.advance(time.Second) // far past any hedge delay, short of the attempt's own deadlines
		close(gate)
		_, rows := c.finish(t)
		if strings.Join(rows, " ") != "a:success/ b:unused/" {
			t.Fatalf("rows %v", rows)
		}
		for _, d := range clock.durations() {
			if d <= time.Second {
				t.Fatalf("a %v timer was armed (timers %v): a hedge without samples", d, clock.durations())
			}
		}
	})
}

// firstHangs makes its first call a stream that never sends an event (until
// cancelled) and fails every later call at once with a 503.
type firstHangs struct {
	calls  atomic.Int32
	called chan struct{} // closed at the first call
}

func (f *firstHangs) Send(ctx context.Context, call *upstream.Call) (*http.Response, error) {
	if f.calls.Add(1) == 1 {
		close(f.called)
		return (&slowStream{gate: make(chan struct{})}).Send(ctx, call)
	}
	return nil, &upstream.StatusError{Code: 503}
}

// ledgers keeps each request's candidate rows, for requests run at once.
type ledgers struct {
	mu   sync.Mutex
	rows map[uuid.UUID]map[int]report.Candidate
}

func (l *ledgers) RecordRequest(report.Request) {}
func (l *ledgers) RecordCandidate(c report.Candidate) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rows[c.RequestID] == nil {
		l.rows[c.RequestID] = map[int]report.Candidate{}
	}
	l.rows[c.RequestID][c.Index] = c
}

func (l *ledgers) of(id uuid.UUID) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for i := 0; i < len(l.rows[id]); i++ {
		c := l.rows[id][i]
		out = append(out, c.Provider+":"+c.Status+"/"+c.ErrorType)
	}
	return strings.Join(out, " ")
}

// TestWaitingAttemptLeavesACoolingTarget: an attempt waiting for its first
// event on a target that others just found failing gives up at once and
// fails over, instead of waiting out its own first-byte timeout.
func TestWaitingAttemptLeavesACoolingTarget(t *testing.T) {
	// No hedging, and failures: 1 on a, so one 503 cools it.
	h := newHealthRig(t, strings.Replace(strings.Replace(hedgeRoutes, "    hedge: { after: 50ms }\n", "", 1),
		"max_concurrency: 4 }\n  - { name: b", "max_concurrency: 4, health: { failures: 1 } }\n  - { name: b", 1))
	a := &firstHangs{called: make(chan struct{})}
	h.run.Upstreams = map[string]Sender{"a": a, "b": &slowStream{}}
	l := &ledgers{rows: map[uuid.UUID]map[int]report.Candidate{}}
	h.run.Record = l
	run := func(id uuid.UUID) {
		plan, _ := h.plan.Plan("m")
		att, _ := h.run.Run(context.Background(), &Request{ID: id, Model: "m", Stream: true,
			Priority: admission.Interactive, Received: time.Now(), Candidates: plan, Exchange: chatOf("m")})
		if att != nil {
			att.Sent()
			for {
				if _, err := att.Next(); err != nil {
					att.Finish(err)
					return
				}
			}
		}
	}
	first, second := uuid.New(), uuid.New()
	done := make(chan struct{})
	go func() { defer close(done); run(first) }()
	select {
	case <-a.called: // the first request is now waiting on a
	case <-time.After(5 * time.Second):
		t.Fatal("the first request never reached a")
	}
	run(second)
	if got := l.of(second); got != "a:failed/upstream_http_error b:success/" {
		t.Fatalf("second request rows %v", got)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting attempt did not leave the cooling target")
	}
	if got := l.of(first); got != "a:cancelled/cooling_down b:success/" {
		t.Fatalf("waiting request rows %v", got)
	}
	if !h.sched.Idle() {
		t.Fatal("gates not back to zero")
	}
}
