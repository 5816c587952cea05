package api

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/candidates"
	"github.com/llmgw/gateway/internal/quota"
	"github.com/llmgw/gateway/internal/report"
	"github.com/llmgw/gateway/internal/routes"
	"github.com/llmgw/gateway/internal/upstream"
	"github.com/llmgw/gateway/internal/watchdog"
)

// committedStream plans a stream request for one provider whose answer is
// src, runs it to its commit point and returns the attempt to relay. The
// client asks for usage, so the provider's chunks reach it as they are.
func committedStream(tb testing.TB, src io.Reader) *candidates.Attempt {
	tb.Helper()
	return committedStreamOf(tb, src, `{"model":"m","messages":[],"stream":true,"stream_options":{"include_usage":true}}`)
}

// committedStreamOf is committedStream for the client's body clientBody.
func committedStreamOf(tb testing.TB, src io.Reader, clientBody string) *candidates.Attempt {
	tb.Helper()
	routes, err := routes.Parse([]byte(`
providers:
  - { name: p, base_url: "http://p.example/v1", api_keys: [k], max_concurrency: 1 }
models:
  - { name: m, candidates: [ { provider: p } ] }
`), func(string) (string, bool) { return "", false })
	if err != nil {
		tb.Fatal(err)
	}
	planner, err := candidates.NewPlanner(routes, candidates.PlannerOptions{DefaultFirstByte: time.Minute, DefaultQueueBudget: time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	sched := admission.New(admission.Config{GlobalLimit: 1})
	tb.Cleanup(func() { _ = sched.Close(context.Background()) })
	chat, err := upstream.ParseChatRequest([]byte(clientBody))
	if err != nil {
		tb.Fatal(err)
	}
	plan, _ := planner.Plan("m")
	runner := &candidates.Runner{Admit: sched, Record: nopRecorder{}, HoldMode: watchdog.HoldFirstBody,
		Upstreams: map[string]candidates.Sender{"p": streamSender{src}}}
	a, out := runner.Run(context.Background(), &candidates.Request{ID: uuid.New(), Model: "m", Stream: true,
		Priority: admission.Interactive, Received: time.Now(), Candidates: plan, Exchange: chat})
	if a == nil {
		tb.Fatalf("nothing committed: %+v", out)
	}
	return a
}

// flushWriter is a client that records what each flush delivered.
type flushWriter struct {
	h       http.Header
	mu      sync.Mutex
	buf     bytes.Buffer
	flushed []string      // the bytes each flush delivered
	notify  chan struct{} // a flush happened
}

func newFlushWriter() *flushWriter {
	return &flushWriter{h: http.Header{}, notify: make(chan struct{}, 16)}
}

func (w *flushWriter) Header() http.Header { return w.h }
func (w *flushWriter) WriteHeader(int)     {}
func (w *flushWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *flushWriter) Flush() {
	w.mu.Lock()
	w.flushed = append(w.flushed, w.buf.String())
	w.buf.Reset()
	w.mu.Unlock()
	w.notify <- struct{}{}
}

func (w *flushWriter) SetWriteDeadline(time.Time) error { return nil }

// delivered is what the flushes delivered, and what was written and not
// flushed.
func (w *flushWriter) delivered() ([]string, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.flushed...), w.buf.String()
}

const (
	eventA   = "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"
	eventB   = "data: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\n"
	eventC   = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2,\"total_tokens\":3}}\n\n"
	eventEnd = "data: [DONE]\n\n"
)

// A provider's events that arrive in one read reach the client in one
// flush, except the first, which is always flushed alone.
func TestRelayFlushesBackToBackEventsTogether(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		flush []string
	}{
		{"one read", eventA + eventB + eventC + eventEnd, []string{eventA, eventB + eventC + eventEnd}},
		{"comment between", eventA + eventB + ": keep-alive\n\n" + eventEnd,
			[]string{eventA, eventB + ": keep-alive\n\n" + eventEnd}},
		// Blank lines before an event are not part of it: the event
		// reader skips them.
		{"blank lines", eventA + "\n\n" + eventB + "\r\n" + eventEnd, []string{eventA, eventB + eventEnd}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := committedStream(t, bytes.NewReader([]byte(tt.body)))
			w := newFlushWriter()
			s := &Server{opts: Options{StreamWriteTimeout: 30 * time.Second}}
			out := s.relay(w, a, nil, false)
			if out.Status != report.RequestSuccess {
				t.Fatalf("outcome %+v", out)
			}
			flushed, pending := w.delivered()
			if pending != "" {
				t.Fatalf("left unflushed: %q", pending)
			}
			if len(flushed) != len(tt.flush) {
				t.Fatalf("flushes %q, want %q", flushed, tt.flush)
			}
			for i := range flushed {
				if flushed[i] != tt.flush[i] {
					t.Errorf("flush %d = %q, want %q", i, flushed[i], tt.flush[i])
				}
			}
		})
	}
}

// An event is never held back for one the provider has not sent: each
// event that arrives alone is flushed before the next is read. The
// provider here sends its next event only once the client has the last.
func TestRelayNeverHoldsAnEventForTheNext(t *testing.T) {
	pr, pw := io.Pipe()
	defer pr.Close()
	w := newFlushWriter()
	events := []string{eventA, eventB, eventC, eventEnd}
	provider := make(chan error, 1)
	go func() {
		for i, ev := range events {
			if _, err := io.WriteString(pw, ev); err != nil {
				provider <- err
				return
			}
			if i == 0 {
				continue // the relay starts after the commit point
			}
			select {
			case <-w.notify:
			case <-time.After(5 * time.Second):
				flushed, pending := w.delivered()
				provider <- &timeoutError{flushed, pending}
				_ = pw.CloseWithError(io.ErrClosedPipe)
				return
			}
		}
		provider <- pw.Close()
	}()
	a := committedStream(t, pr)
	// The first event's flush: the provider waits for no flush after it.
	s := &Server{opts: Options{StreamWriteTimeout: 30 * time.Second}}
	out := s.relay(w, a, nil, false)
	if err := <-provider; err != nil {
		t.Fatal(err)
	}
	if out.Status != report.RequestSuccess {
		t.Fatalf("outcome %+v", out)
	}
	flushed, pending := w.delivered()
	if len(flushed) != len(events) || pending != "" {
		t.Fatalf("flushes %q, unflushed %q: want one flush per event", flushed, pending)
	}
	for i, ev := range events {
		if flushed[i] != ev {
			t.Errorf("flush %d = %q, want %q", i, flushed[i], ev)
		}
	}
}

type timeoutError struct {
	flushed []string
	pending string
}

func (e *timeoutError) Error() string {
	return "the client never got the event: flushed " + strings.Join(e.flushed, "") + ", held " + e.pending
}

// A stream that breaks behind held events still delivers them: the events
// before the provider's error event, and the error event itself, are
// flushed before the outcome is settled. The provider sent more behind its
// error event, so the relay was holding the error event when it stopped.
func TestRelayFlushesHeldEventsWhenTheStreamBreaks(t *testing.T) {
	errEvent := "data: {\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\"}}\n\n"
	a := committedStream(t, bytes.NewReader([]byte(eventA+eventB+errEvent+eventEnd)))
	w := newFlushWriter()
	s := &Server{opts: Options{StreamWriteTimeout: 30 * time.Second}}
	out := s.relay(w, a, nil, false)
	if out.Status == report.RequestSuccess {
		t.Fatalf("a stream ended by an error event succeeded: %+v", out)
	}
	flushed, pending := w.delivered()
	if pending != "" {
		t.Fatalf("left unflushed when the stream broke: %q", pending)
	}
	if got, want := strings.Join(flushed, ""), eventA+eventB+errEvent; got != want {
		t.Fatalf("client got %q, want %q", got, want)
	}
}

// deadlineWriter is a client that records the write deadlines set on it.
type deadlineWriter struct {
	discardWriter
	deadlines []time.Time
}

func (w *deadlineWriter) SetWriteDeadline(t time.Time) error {
	w.deadlines = append(w.deadlines, t)
	return nil
}

// TestWriteDeadline protects both halves of the write bound: a write never
// runs past the attempt's end (a client that stops reading frees the slots
// when the attempt would have ended anyway), and the deadline moves only
// when under half the timeout is left (moving it per event cost 3% CPU).
func TestWriteDeadline(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name  string
		d     time.Duration
		end   time.Duration // from now; 0: none
		left  time.Duration // the deadline set on the connection before the write, from now; 0: none yet
		moves bool          // the write sets a new deadline
		want  time.Duration // that deadline, from now (about)
		final bool          // the deadline is the attempt's end and never moves again
	}{
		{name: "first write", d: 30 * time.Second, moves: true, want: 30 * time.Second},
		{name: "over half left", d: 30 * time.Second, left: 20 * time.Second},
		{name: "under half left", d: 30 * time.Second, left: 10 * time.Second, moves: true, want: 30 * time.Second},
		{name: "end before the timeout", d: 30 * time.Second, end: 5 * time.Second, moves: true, want: 5 * time.Second, final: true},
		{name: "end after the timeout", d: 30 * time.Second, end: time.Minute, moves: true, want: 30 * time.Second},
		{name: "moved up to the end", d: 30 * time.Second, end: 25 * time.Second, left: 10 * time.Second,
			moves: true, want: 25 * time.Second, final: true},
		{name: "no timeout, an end", end: 5 * time.Second, moves: true, want: 5 * time.Second, final: true},
		{name: "nothing bounds", final: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &deadlineWriter{discardWriter: discardWriter{h: http.Header{}}}
			dl := writeDeadline{rc: http.NewResponseController(w), d: tt.d}
			if tt.end > 0 {
				dl.end = now.Add(tt.end)
			}
			if tt.left > 0 {
				dl.set = now.Add(tt.left)
			}
			dl.extend()
			if !tt.moves {
				if len(w.deadlines) != 0 {
					t.Fatalf("deadline moved to %v", w.deadlines)
				}
			} else {
				if len(w.deadlines) != 1 {
					t.Fatalf("deadlines set %v, want one", w.deadlines)
				}
				if got := w.deadlines[0].Sub(now); got < tt.want || got > tt.want+time.Second {
					t.Fatalf("deadline in %v, want %v", got, tt.want)
				}
				if tt.end > 0 && w.deadlines[0].After(dl.end) {
					t.Fatalf("deadline %v past the attempt's end %v", w.deadlines[0], dl.end)
				}
			}
			if dl.final != tt.final {
				t.Fatalf("final = %v, want %v", dl.final, tt.final)
			}
			if tt.final {
				// However close the deadline, it never moves again.
				n := len(w.deadlines)
				dl.set = now
				dl.extend()
				if len(w.deadlines) != n {
					t.Fatalf("a final deadline moved: %v", w.deadlines)
				}
			}
		})
	}
}

// committedBody is committedStream for a non-streaming answer read from src.
func committedBody(tb testing.TB, src io.Reader) *candidates.Attempt {
	tb.Helper()
	routes, err := routes.Parse([]byte(`
providers:
  - { name: p, base_url: "http://p.example/v1", api_keys: [k], max_concurrency: 1 }
models:
  - { name: m, candidates: [ { provider: p } ] }
`), func(string) (string, bool) { return "", false })
	if err != nil {
		tb.Fatal(err)
	}
	planner, err := candidates.NewPlanner(routes, candidates.PlannerOptions{DefaultFirstByte: time.Minute, DefaultQueueBudget: time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	sched := admission.New(admission.Config{GlobalLimit: 1})
	tb.Cleanup(func() { _ = sched.Close(context.Background()) })
	chat, err := upstream.ParseChatRequest([]byte(`{"model":"m","messages":[]}`))
	if err != nil {
		tb.Fatal(err)
	}
	plan, _ := planner.Plan("m")
	runner := &candidates.Runner{Admit: sched, Record: nopRecorder{}, HoldMode: watchdog.HoldFirstBody,
		Upstreams: map[string]candidates.Sender{"p": bodySender{src}}}
	a, out := runner.Run(context.Background(), &candidates.Request{ID: uuid.New(), Model: "m",
		Priority: admission.Interactive, Received: time.Now(), Candidates: plan, Exchange: chat})
	if a == nil {
		tb.Fatalf("nothing committed: %+v", out)
	}
	return a
}

// bodySender answers every call with a JSON body read from src.
type bodySender struct{ src io.Reader }

func (f bodySender) Send(context.Context, *upstream.Call) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(f.src), ContentLength: -1}, nil
}

// countingRates records how much of the answer the client had when its
// tokens were counted.
type countingRates struct {
	w       *flushWriter
	counted int // tokens added
	had     string
}

func (r *countingRates) Admit(context.Context, string, quota.Limits) quota.RateState {
	return quota.RateState{Allowed: true}
}

func (r *countingRates) AddTokens(_ context.Context, _ string, _ quota.Limits, n int) error {
	flushed, pending := r.w.delivered()
	r.counted, r.had = n, strings.Join(flushed, "")+pending
	return nil
}

// A body for a client with a token rate is counted before the client sees
// its end. A body up to 1 MiB is read whole before the commit point (its
// cost goes in the headers), so the client has nothing of it when its
// tokens are counted; a larger one is relayed read by read, each read once
// the next arrived, only the last waiting for the count.
func TestSendCountedHoldsOnlyTheLastRead(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	big := strings.Repeat("a", 1<<20+1000) // past what the attempt holds before its commit point
	for _, tc := range []struct {
		name   string
		pieces []string
		had    func(pieces []string) string // what the client has when the tokens are counted
	}{
		{"held whole", []string{`{"id":"x","choices":[{"message":{"content":"`, strings.Repeat("a", 1000), `"}}],` +
			`"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`}, func([]string) string { return "" }},
		{"larger than held", []string{`{"id":"x","choices":[{"message":{"content":"`, big, `"}}],` +
			`"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`}, func(p []string) string { return p[0] + p[1] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pieces := tc.pieces
			pr, pw := io.Pipe()
			defer pr.Close()
			w := newFlushWriter()
			rates := &countingRates{w: w}
			provider := make(chan error, 1)
			go func() {
				for _, p := range pieces {
					if _, err := io.WriteString(pw, p); err != nil {
						provider <- err
						return
					}
				}
				provider <- pw.Close()
			}()
			a := committedBody(t, pr)
			s := &Server{opts: Options{StreamWriteTimeout: 30 * time.Second, Rates: rates}}
			tcount := &tokenCount{s: s, ctx: context.Background(), client: "c", lim: clientLimits{rates: quota.Limits{TokensPerMinute: 1000}}}
			out := s.relay(w, a, tcount, false)
			if err := <-provider; err != nil {
				t.Fatal(err)
			}
			if out.Status != report.RequestSuccess {
				t.Fatalf("outcome %+v", out)
			}
			if rates.counted != 3 {
				t.Fatalf("counted %d tokens, want 3", rates.counted)
			}
			full := strings.Join(pieces, "")
			if want := tc.had(pieces); len(rates.had) >= len(full) || (want == "" && rates.had != "") {
				t.Fatalf("the client had %d of %d bytes when its tokens were counted, want %d", len(rates.had), len(full), len(want))
			}
			flushed, pending := w.delivered()
			if got := strings.Join(flushed, "") + pending; got != full {
				t.Fatalf("client got %d bytes, want %d", len(got), len(full))
			}
		})
	}
}

// TestWriteDeadlineAfterTheAnswer protects the end of an answer that
// completed just before its attempt's end: what net/http writes after the
// handler (a chunked body's last chunk) gets the write timeout rather than
// the attempt's end, which may pass in between and cut the answer there.
func TestWriteDeadlineAfterTheAnswer(t *testing.T) {
	for _, tt := range []struct {
		name  string
		d     time.Duration
		end   time.Duration // from now; 0: none
		moves bool
		want  time.Duration // the deadline after the answer, from now (about); 0: none
	}{
		{name: "capped at the end", d: 30 * time.Second, end: time.Millisecond, moves: true, want: 30 * time.Second},
		{name: "capped, no timeout", end: time.Millisecond, moves: true},
		{name: "the write timeout's", d: 30 * time.Second, end: time.Minute},
		{name: "nothing bounds"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := &deadlineWriter{discardWriter: discardWriter{h: http.Header{}}}
			dl := writeDeadline{rc: http.NewResponseController(w), d: tt.d}
			if tt.end > 0 {
				dl.end = time.Now().Add(tt.end)
			}
			dl.extend()
			n := len(w.deadlines)
			now := time.Now()
			dl.answered()
			if !tt.moves {
				if len(w.deadlines) != n {
					t.Fatalf("deadline moved after the answer: %v", w.deadlines[n:])
				}
				return
			}
			if len(w.deadlines) != n+1 {
				t.Fatalf("deadlines %v, want one more after the answer", w.deadlines)
			}
			got := w.deadlines[n]
			if tt.want == 0 {
				if !got.IsZero() {
					t.Fatalf("deadline %v after the answer, want none", got)
				}
				return
			}
			if d := got.Sub(now); d < tt.want || d > tt.want+time.Second {
				t.Fatalf("deadline in %v after the answer, want %v", d, tt.want)
			}
		})
	}
}
