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

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/candidates"
	"github.com/llmgw/gateway/internal/report"
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
	routes, err := candidates.ParseRoutes([]byte(`
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
			out := s.relay(w, a, nil)
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
	out := s.relay(w, a, nil)
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
	out := s.relay(w, a, nil)
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
