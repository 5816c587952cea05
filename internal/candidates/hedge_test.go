package candidates

import (
	"context"
	"errors"
	"io"
	"net/http"
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

// slowStream answers with a stream whose first event comes after delay,
// unless the request is cancelled first; it counts cancellations.
type slowStream struct {
	delay     time.Duration
	fail      error
	cancelled atomic.Int32
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
		select {
		case <-time.After(b.s.delay):
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

// hedgeRun runs one streaming request with the route's hedging and relays
// the winner; it returns the client's bytes, the time to the commit and the
// candidate rows.
func hedgeRun(t *testing.T, h *healthRig, a, b Sender) (string, time.Duration, []string) {
	t.Helper()
	h.run.Upstreams = map[string]Sender{"a": a, "b": b}
	pol, plan, err := h.plan.PlanPolicy("m")
	if err != nil {
		t.Fatal(err)
	}
	l := &ledger{cands: map[int]report.Candidate{}}
	h.run.Record = l
	start := time.Now()
	att, _ := h.run.Run(context.Background(), &Request{ID: uuid.New(), Model: "m", Stream: true,
		Priority: admission.Interactive, Received: start, Candidates: plan, Exchange: chatOf("m"), Hedge: pol.Hedge})
	took := time.Since(start)
	var sb strings.Builder
	if att != nil {
		relayTo(&sb, att)
	}
	settled(t, h)
	rows := candidateRows(l, plan)
	if !h.sched.Idle() {
		t.Fatal("gates not back to zero after the request")
	}
	return sb.String(), took, rows
}

// TestHedging: a primary slow to its first event is hedged after 50ms; the
// backup commits first, the primary's request is cancelled and recorded
// hedge_lost. A primary that fails before the hedge delay fails over as
// usual; with hedging off nothing runs concurrently.
func TestHedging(t *testing.T) {
	t.Run("hedge wins", func(t *testing.T) {
		h := newHealthRig(t, hedgeRoutes)
		slow, fast := &slowStream{delay: 3 * time.Second}, &slowStream{}
		got, took, rows := hedgeRun(t, h, slow, fast)
		if got != ev1+"data: [DONE]\n\n" || took > time.Second {
			t.Fatalf("client got %q after %s", got, took)
		}
		if strings.Join(rows, " ") != "a:cancelled/hedge_lost b:success/" {
			t.Fatalf("rows %v", rows)
		}
		if slow.cancelled.Load() != 1 {
			t.Fatal("the losing attempt's upstream request was not cancelled")
		}
	})
	t.Run("primary wins before the hedge delay", func(t *testing.T) {
		h := newHealthRig(t, hedgeRoutes)
		_, _, rows := hedgeRun(t, h, &slowStream{}, &slowStream{})
		if strings.Join(rows, " ") != "a:success/ b:unused/" {
			t.Fatalf("rows %v", rows)
		}
	})
	t.Run("failure fails over", func(t *testing.T) {
		h := newHealthRig(t, hedgeRoutes)
		down := &slowStream{fail: &upstream.ConnectError{Provider: "a", Err: errors.New("refused")}}
		_, _, rows := hedgeRun(t, h, down, &slowStream{})
		if strings.Join(rows, " ") != "a:failed/upstream_connect_error b:success/" {
			t.Fatalf("rows %v", rows)
		}
	})
	t.Run("percentile without samples does not hedge", func(t *testing.T) {
		h := newHealthRig(t, strings.Replace(hedgeRoutes, "after: 50ms", "after: p95", 1))
		_, took, rows := hedgeRun(t, h, &slowStream{delay: 200 * time.Millisecond}, &slowStream{})
		if strings.Join(rows, " ") != "a:success/ b:unused/" || took < 200*time.Millisecond {
			t.Fatalf("rows %v after %s", rows, took)
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
		return (&slowStream{delay: time.Hour}).Send(ctx, call)
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
