package api

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/report"
	"github.com/llmgw/gateway/internal/upstream"
)

// chunkEvent is a typical chat completion chunk as OpenAI sends it.
const chunkEvent = `data: {"id":"chatcmpl-9x","object":"chat.completion.chunk","created":1732900000,"model":"gpt-4o-mini","system_fingerprint":"fp_0","choices":[{"index":0,"delta":{"content":" hello"},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n"

var (
	chunkBytes = []byte(chunkEvent)
	doneBytes  = []byte("data: [DONE]\n\n")
)

// eventSource yields n copies of an event, then [DONE], without holding the
// whole stream in memory.
type eventSource struct {
	n   int
	cur []byte
}

func (s *eventSource) Read(p []byte) (int, error) {
	if len(s.cur) == 0 {
		switch {
		case s.n > 0:
			s.n--
			s.cur = chunkBytes
		case s.n == 0:
			s.n--
			s.cur = doneBytes
		default:
			return 0, io.EOF
		}
	}
	n := copy(p, s.cur)
	s.cur = s.cur[n:]
	return n, nil
}

// discardWriter is a client that reads everything at once: what is left is
// the gateway's own cost per event (split, usage check, write, flush).
type discardWriter struct {
	h       http.Header
	written int64
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Write(p []byte) (int, error) { w.written += int64(len(p)); return len(p), nil }
func (w *discardWriter) Flush()                      {}

// SetWriteDeadline is there because net/http's writer has it: without it the
// ResponseController would allocate an ErrNotSupported per event.
func (w *discardWriter) SetWriteDeadline(time.Time) error { return nil }

// streamSender answers every call with one stream from src.
type streamSender struct{ src io.Reader }

func (f streamSender) Send(context.Context, *upstream.Call) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: io.NopCloser(f.src), ContentLength: -1}, nil
}

type nopRecorder struct{}

func (nopRecorder) RecordRequest(report.Request)     {}
func (nopRecorder) RecordCandidate(report.Candidate) {}

// BenchmarkRelayStreamEvent is the per-event cost of forwarding SSE: one op is
// one event through relay, from the upstream body to a flushed write.
func BenchmarkRelayStreamEvent(b *testing.B) {
	a := committedStream(b, &eventSource{n: b.N})
	s := &Server{opts: Options{StreamWriteTimeout: 30 * time.Second}}
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	b.SetBytes(int64(len(chunkEvent)))
	b.ResetTimer()
	out := s.relay(w, a, nil, false)
	b.StopTimer()
	if out.Status != report.RequestSuccess {
		b.Fatalf("outcome %+v", out)
	}
	if want := int64(b.N*len(chunkEvent) + len("data: [DONE]\n\n")); w.written != want {
		b.Fatalf("relayed %d bytes, want %d", w.written, want)
	}
	if w.h.Get("Cache-Control") != "no-cache" {
		b.Fatal("stream headers not committed")
	}
}

// BenchmarkRelayStreamEventHiddenUsage is BenchmarkRelayStreamEvent for a
// client that did not ask for usage: the gateway asked for it, and each
// chunk's "usage":null is cut out before it is relayed.
func BenchmarkRelayStreamEventHiddenUsage(b *testing.B) {
	a := committedStreamOf(b, &eventSource{n: b.N}, `{"model":"m","messages":[],"stream":true}`)
	s := &Server{opts: Options{StreamWriteTimeout: 30 * time.Second}}
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	b.SetBytes(int64(len(chunkEvent)))
	b.ResetTimer()
	out := s.relay(w, a, nil, false)
	b.StopTimer()
	if out.Status != report.RequestSuccess {
		b.Fatalf("outcome %+v", out)
	}
	if want := int64(b.N*(len(chunkEvent)-len(`,"usage":null`)) + len("data: [DONE]\n\n")); w.written != want {
		b.Fatalf("relayed %d bytes, want %d", w.written, want)
	}
}
