package candidates

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/health"
	"github.com/llmgw/gateway/internal/report"
	"github.com/llmgw/gateway/internal/routes"
	"github.com/llmgw/gateway/internal/upstream"
)

// Tests of the last-resort retry (retry.go) against loopback providers. The
// runner and the health tracker share a step clock, so a backoff or a
// Retry-After passes when the test advances it, and the test looks at the
// gates while the walk waits.

// script is a loopback provider answering each call with its next step, the
// last one repeated: "ok", a status ("500", or "429:1" with Retry-After:
// 1), "reset" (the connection closed before any answer) or "stall" (a
// stream that never sends an event).
type script struct {
	srv   *httptest.Server
	mu    sync.Mutex
	steps []string
	calls int
	first chan struct{} // closed at the first call
	quit  chan struct{} // closed before the server closes: a stall ends
}

func newScript(t *testing.T, name string, steps ...string) *script {
	s := &script{steps: steps, first: make(chan struct{}), quit: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		step := s.steps[min(s.calls, len(s.steps)-1)]
		if s.calls++; s.calls == 1 {
			close(s.first)
		}
		s.mu.Unlock()
		// Read whole, so the server notices at once when the gateway hangs up.
		_, _ = io.Copy(io.Discard, r.Body)
		stream := strings.Contains(r.Header.Get("Accept"), "event-stream")
		switch {
		case step == "ok" && stream:
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("data: {\"from\":\"" + name + "\"}\n\ndata: [DONE]\n\n"))
		case step == "ok":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"from":"` + name + `"}`))
		case step == "reset":
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
		case step == "stall":
			w.Header().Set("Content-Type", "text/event-stream")
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-s.quit:
			}
		default:
			code, after, _ := strings.Cut(step, ":")
			if after != "" {
				w.Header().Set("Retry-After", after)
			}
			n, _ := strconv.Atoi(code)
			http.Error(w, `{"error":{"message":"`+step+`"}}`, n)
		}
	}))
	t.Cleanup(s.srv.Close)
	t.Cleanup(func() { close(s.quit) }) // runs first: no handler outlives its test
	return s
}

func (s *script) count() int { s.mu.Lock(); defer s.mu.Unlock(); return s.calls }

// rowLedger keeps the last record of every row, retries included, by
// (candidate_index, retry_index), as the upsert does.
type rowLedger struct {
	mu   sync.Mutex
	req  report.Request
	rows map[[2]int]report.Candidate
}

func (l *rowLedger) RecordRequest(r report.Request) { l.mu.Lock(); l.req = r; l.mu.Unlock() }
func (l *rowLedger) RecordCandidate(c report.Candidate) {
	l.mu.Lock()
	l.rows[[2]int{c.Index, c.RetryIndex}] = c
	l.mu.Unlock()
}

func (l *rowLedger) row(i, retry int) report.Candidate {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rows[[2]int{i, retry}]
}

// String lists the rows in key order as index.retry provider:status/code
// (/skip_reason).
func (l *rowLedger) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	keys := make([][2]int, 0, len(l.rows))
	for k := range l.rows {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool {
		return keys[a][0] < keys[b][0] || keys[a][0] == keys[b][0] && keys[a][1] < keys[b][1]
	})
	var out []string
	for _, k := range keys {
		c := l.rows[k]
		s := fmt.Sprintf("%d.%d %s:%s/%d", k[0], k[1], c.Provider, c.Status, c.StatusCode)
		if c.SkipReason != "" {
			s += "/" + c.SkipReason
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

// retryRig is a planner and runner whose clock and health tracker are one
// step clock, over the providers a and b (a first), each answering from
// its script.
type retryRig struct {
	clock *stepClock
	plan  *Planner
	run   *Runner
	sched *admission.Scheduler
	a, b  *script
}

// newRetryRig builds the rig; aOpts and bOpts are extra provider fields
// (", retry: { attempts: 0 }").
func newRetryRig(t *testing.T, a, b *script, aOpts, bOpts string) *retryRig {
	t.Helper()
	src := `
providers:
  - { name: a, base_url: "` + a.srv.URL + `/v1", api_keys: [ka], max_concurrency: 2` + aOpts + ` }
  - { name: b, base_url: "` + b.srv.URL + `/v1", api_keys: [kb], max_concurrency: 2` + bOpts + ` }
models:
  - name: m
    candidates: [ { provider: a, priority: 0 }, { provider: b, priority: 1 } ]
  - name: hm
    hedge: { after: 50ms }
    candidates: [ { provider: a, priority: 0 }, { provider: b, priority: 1 } ]
`
	r, err := routes.Parse([]byte(src), env(map[string]string{}))
	if err != nil {
		t.Fatal(err)
	}
	clock := newStepClock()
	seed := uint64(1)
	p, err := NewPlanner(r, PlannerOptions{Seed: &seed, Health: health.NewTracker(clock, nil)})
	if err != nil {
		t.Fatal(err)
	}
	sched := admission.New(admission.Config{GlobalLimit: 8})
	t.Cleanup(func() { _ = sched.Close(context.Background()) })
	ca, cb := upstream.NewClient(upstream.ClientOptions{Provider: "a"}), upstream.NewClient(upstream.ClientOptions{Provider: "b"})
	t.Cleanup(ca.CloseIdle)
	t.Cleanup(cb.CloseIdle)
	return &retryRig{clock: clock, plan: p, sched: sched, a: a, b: b,
		run: &Runner{Admit: sched, Clock: clock, Upstreams: map[string]Sender{"a": ca, "b": cb}}}
}

// retryResult is what the client got and what was recorded.
type retryResult struct {
	got string
	out *Outcome
	l   *rowLedger
}

// start runs one request of model on its own goroutine (the step clock's
// waits need the test to move it) and relays a winner as the handler does.
func (h *retryRig) start(t *testing.T, ctx context.Context, model string, stream bool, edit func(*Request)) (<-chan retryResult, *rowLedger) {
	t.Helper()
	pol, plan, err := h.plan.PlanPolicy(model)
	if err != nil {
		t.Fatal(err)
	}
	l := &rowLedger{rows: map[[2]int]report.Candidate{}}
	h.run.Record = l
	req := &Request{ID: uuid.New(), Model: model, Stream: stream, Priority: admission.Interactive,
		Received: h.clock.Now(), Candidates: plan, Exchange: chatOf(model), Hedge: pol.Hedge}
	if edit != nil {
		edit(req)
	}
	done := make(chan retryResult, 1)
	go func() {
		att, out := h.run.Run(ctx, req)
		var sb strings.Builder
		if att != nil {
			out = relayTo(&sb, att)
		}
		done <- retryResult{got: sb.String(), out: out, l: l}
	}()
	return done, l
}

// wait takes the request's result, failing the test if it never comes.
func wait(t *testing.T, done <-chan retryResult) retryResult {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(5 * time.Second): // the bound only ends a wait that never ends
		t.Fatal("the request did not end")
		return retryResult{}
	}
}

// gatesEmpty fails the test unless no gate holds or queues a slot.
func gatesEmpty(t *testing.T, h *retryRig, when string) {
	t.Helper()
	st := h.sched.Stats()
	if st.Global.Active != 0 || st.Pending != 0 {
		t.Fatalf("%s: global gate %d active, %d pending; want 0", when, st.Global.Active, st.Pending)
	}
	for _, g := range st.Targets {
		if g.Active != 0 {
			t.Fatalf("%s: %s gate %s holds %d slots; want 0", when, g.Gate, g.Label, g.Active)
		}
	}
}

const backoff = 250 * time.Millisecond // the default retry.backoff

// TestRetrySameCandidateAfterBackoff: a 500, or a connection closed before
// any answer, is retried on the same candidate after the backoff, holding
// no slot while it waits; the retry serves the client, recorded as the
// candidate's second row, and the fallback is never called.
func TestRetrySameCandidateAfterBackoff(t *testing.T) {
	for _, tt := range []struct {
		first  string
		stream bool
	}{{"500", false}, {"502", false}, {"reset", false}, {"500", true}, {"reset", true}} {
		first := tt.first
		t.Run(first+map[bool]string{true: " stream"}[tt.stream], func(t *testing.T) {
			h := newRetryRig(t, newScript(t, "a", first, "ok"), newScript(t, "b", "ok"), "", "")
			done, l := h.start(t, context.Background(), "m", tt.stream, nil)
			h.clock.waitArmed(t, backoff)
			gatesEmpty(t, h, "during the backoff")
			if n := h.a.count(); n != 1 {
				t.Fatalf("a called %d times before the backoff ended, want 1", n)
			}
			h.clock.advance(backoff)
			res := wait(t, done)
			want := `{"from":"a"}`
			if tt.stream {
				want = "data: " + want + "\n\ndata: [DONE]\n\n"
			}
			if res.out.Status != report.RequestSuccess || res.got != want {
				t.Fatalf("client got %q, outcome %+v; want a's answer", res.got, res.out)
			}
			code := first
			if first == "reset" {
				code = "502"
			}
			if want := "0.0 a:failed/" + code + " 0.1 a:success/200 1.0 b:unused/0"; l.String() != want {
				t.Fatalf("rows %s, want %s", l, want)
			}
			if gap := l.row(0, 1).StartedAt.Sub(l.row(0, 0).FinishedAt); gap < backoff {
				t.Fatalf("the retry started %v after the failure, want at least %v", gap, backoff)
			}
			if h.b.count() != 0 {
				t.Fatal("the fallback was called")
			}
			gatesEmpty(t, h, "after the request")
		})
	}
}

// TestRetryThenFailover: a persistent 503 (no Retry-After) is retried once,
// then the walk fails over to the fallback.
func TestRetryThenFailover(t *testing.T) {
	h := newRetryRig(t, newScript(t, "a", "503"), newScript(t, "b", "ok"), "", "")
	done, l := h.start(t, context.Background(), "m", false, nil)
	h.clock.waitArmed(t, backoff)
	h.clock.advance(backoff)
	res := wait(t, done)
	if res.out.Status != report.RequestSuccess || res.got != `{"from":"b"}` {
		t.Fatalf("client got %q, outcome %+v; want b's answer", res.got, res.out)
	}
	if want := "0.0 a:failed/503 0.1 a:failed/503 1.0 b:success/200"; l.String() != want {
		t.Fatalf("rows %s, want %s", l, want)
	}
	if h.a.count() != 2 || h.b.count() != 1 {
		t.Fatalf("a called %d times, b %d; want 2 and 1", h.a.count(), h.b.count())
	}
}

// TestRetryAfterAsLastResort: a 429 with Retry-After within max_wait is
// waited out and retried only when no other candidate is left (the
// fallback cooling, or failed): the client gets the primary's answer, not
// a 429. With a healthy fallback, or a Retry-After beyond max_wait, there
// is no retry.
func TestRetryAfterAsLastResort(t *testing.T) {
	t.Run("fallback cooling", func(t *testing.T) {
		h := newRetryRig(t, newScript(t, "a", "429:1", "ok"), newScript(t, "b", "ok"), "", ", health: { failures: 1 }")
		plan, _ := h.plan.Plan("m")
		plan[1].Health.Done(health.Verdict{Counts: true, Status: 500}, false)
		done, l := h.start(t, context.Background(), "m", false, nil)
		h.clock.waitArmed(t, time.Second)
		gatesEmpty(t, h, "during the Retry-After")
		h.clock.advance(time.Second)
		res := wait(t, done)
		if res.out.Status != report.RequestSuccess || res.got != `{"from":"a"}` {
			t.Fatalf("client got %q, outcome %+v; want a's answer", res.got, res.out)
		}
		if want := "0.0 a:failed/429 0.1 a:success/200 1.0 b:skipped/0/cooling_down"; l.String() != want {
			t.Fatalf("rows %s, want %s", l, want)
		}
		if gap := l.row(0, 1).StartedAt.Sub(l.row(0, 0).FinishedAt); gap < time.Second {
			t.Fatalf("the retry started %v after the 429, want at least 1s", gap)
		}
	})
	t.Run("fallback failed", func(t *testing.T) {
		h := newRetryRig(t, newScript(t, "a", "429:1", "ok"), newScript(t, "b", "500"), "", ", retry: { attempts: 0 }")
		done, l := h.start(t, context.Background(), "m", false, nil)
		h.clock.waitArmed(t, time.Second)
		h.clock.advance(time.Second)
		res := wait(t, done)
		if res.out.Status != report.RequestSuccess || res.got != `{"from":"a"}` {
			t.Fatalf("client got %q, outcome %+v; want a's answer", res.got, res.out)
		}
		if want := "0.0 a:failed/429 0.1 a:success/200 1.0 b:failed/500"; l.String() != want {
			t.Fatalf("rows %s, want %s", l, want)
		}
	})
	t.Run("fallback healthy", func(t *testing.T) {
		h := newRetryRig(t, newScript(t, "a", "429:1", "ok"), newScript(t, "b", "ok"), "", "")
		done, l := h.start(t, context.Background(), "m", false, nil)
		res := wait(t, done)
		if res.got != `{"from":"b"}` || l.String() != "0.0 a:failed/429 1.0 b:success/200" {
			t.Fatalf("client got %q, rows %s; want b's answer without a retry", res.got, l)
		}
	})
	t.Run("beyond max_wait", func(t *testing.T) {
		h := newRetryRig(t, newScript(t, "a", "429:10", "ok"), newScript(t, "b", "ok"), "", ", health: { failures: 1 }")
		plan, _ := h.plan.Plan("m")
		plan[1].Health.Done(health.Verdict{Counts: true, Status: 500}, false)
		done, l := h.start(t, context.Background(), "m", false, nil)
		res := wait(t, done)
		if res.out.StatusCode != http.StatusTooManyRequests || res.out.RetryAfter != 10*time.Second {
			t.Fatalf("outcome %+v, want 429 with Retry-After 10s", res.out)
		}
		if l.String() != "0.0 a:failed/429 1.0 b:skipped/0/cooling_down" || h.a.count() != 1 {
			t.Fatalf("rows %s, a called %d times; want no retry", l, h.a.count())
		}
	})
}

// TestNoRetry: what is not worth a retry fails over (or ends the request)
// at once: a first-byte timeout, a 504, a 408, an auth failure, a relayed
// client fault, a 404, a 429 without Retry-After; and nothing is retried
// with attempts: 0 or on a hedged route.
func TestNoRetry(t *testing.T) {
	for _, tt := range []struct {
		name, a, aOpts, model string
		stream                bool
		rows                  string
	}{
		{"first-byte timeout", "stall", ", timeouts: { first_byte: 3s }", "m", true, "0.0 a:failed/504 1.0 b:success/200"},
		{"504", "504", "", "m", false, "0.0 a:failed/504 1.0 b:success/200"},
		{"408", "408", "", "m", false, "0.0 a:failed/408 1.0 b:success/200"},
		{"401", "401", "", "m", false, "0.0 a:failed/401 1.0 b:success/200"},
		{"400 relayed", "400", "", "m", false, "0.0 a:failed/400 1.0 b:unused/0"},
		{"404", "404", "", "m", false, "0.0 a:failed/404 1.0 b:success/200"},
		{"429 without Retry-After", "429", "", "m", false, "0.0 a:failed/429 1.0 b:success/200"},
		{"attempts 0", "500", ", retry: { attempts: 0 }", "m", false, "0.0 a:failed/500 1.0 b:success/200"},
		{"hedged route", "500", "", "hm", true, "0.0 a:failed/500 1.0 b:success/200"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newRetryRig(t, newScript(t, "a", tt.a, "ok"), newScript(t, "b", "ok"), tt.aOpts, "")
			done, l := h.start(t, context.Background(), tt.model, tt.stream, nil)
			if tt.a == "stall" {
				await(t, h.a.first, "a called")
				h.clock.waitArmed(t, 3*time.Second)
				h.clock.advance(3 * time.Second)
			}
			wait(t, done)
			if l.String() != tt.rows || h.a.count() != 1 {
				t.Fatalf("rows %s, a called %d times; want %s and 1 call", l, h.a.count(), tt.rows)
			}
			if n := h.clock.armed(backoff); n != 0 {
				t.Fatalf("%d backoff timers armed", n)
			}
		})
	}
}

// TestRetryBoundedByTheRequest: no retry whose wait would pass the
// request's deadline (the walk fails over at once); a client that leaves
// during the backoff ends the wait and the request, leaving no timer and
// no goroutine; a retry the retry budget refuses is on record, skipped.
func TestRetryBoundedByTheRequest(t *testing.T) {
	t.Run("deadline", func(t *testing.T) {
		h := newRetryRig(t, newScript(t, "a", "500", "ok"), newScript(t, "b", "ok"), ", retry: { backoff: 5s }", "")
		// The deadline's context runs on real time: the step clock starts now.
		h.clock.now = time.Now()
		done, l := h.start(t, context.Background(), "m", false, func(r *Request) { r.Deadline = r.Received.Add(2 * time.Second) })
		res := wait(t, done)
		if res.got != `{"from":"b"}` || l.String() != "0.0 a:failed/500 1.0 b:success/200" {
			t.Fatalf("client got %q, rows %s; want b's answer without a retry", res.got, l)
		}
		if n := h.clock.armed(5 * time.Second); n != 0 {
			t.Fatalf("%d backoff timers armed", n)
		}
	})
	t.Run("client leaves", func(t *testing.T) {
		t.Cleanup(func() { goleak.VerifyNone(t) }) // runs last: after the servers and clients closed
		h := newRetryRig(t, newScript(t, "a", "500", "ok"), newScript(t, "b", "ok"), "", "")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done, l := h.start(t, ctx, "m", false, nil)
		h.clock.waitArmed(t, backoff)
		cancel()
		res := wait(t, done)
		if res.out.Status != report.RequestCancelled || res.out.StatusCode != 499 {
			t.Fatalf("outcome %+v, want cancelled/499", res.out)
		}
		if l.String() != "0.0 a:failed/500 1.0 b:unused/0" || h.a.count() != 1 {
			t.Fatalf("rows %s, a called %d times", l, h.a.count())
		}
		if n := h.clock.armed(backoff); n != 0 {
			t.Fatalf("the backoff timer is still armed")
		}
		gatesEmpty(t, h, "after the request")
	})
	t.Run("retry budget", func(t *testing.T) {
		h := newRetryRig(t, newScript(t, "a", "500", "ok"), newScript(t, "b", "ok"), "", "")
		h.run.Budget = NewRetryBudget(0, 0)
		done, l := h.start(t, context.Background(), "m", false, nil)
		h.clock.waitArmed(t, backoff)
		h.clock.advance(backoff)
		res := wait(t, done)
		if res.out.StatusCode != http.StatusBadGateway || h.a.count() != 1 {
			t.Fatalf("outcome %+v, a called %d times; want 502 and no retry", res.out, h.a.count())
		}
		if want := "0.0 a:failed/500 0.1 a:skipped/0/retry_budget 1.0 b:skipped/0/retry_budget"; l.String() != want {
			t.Fatalf("rows %s, want %s", l, want)
		}
	})
}
