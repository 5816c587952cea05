package api

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/llmgw/gateway/internal/tracing"
)

// chatRequestAllocsBefore is BenchmarkChatRequest's allocs/op on main
// before tracing existed (commit 2977893): tracing off must not add one.
// A change that lowers the count should lower this too.
const chatRequestAllocsBefore = 53

// TestTracingOffAllocs: with no exporter configured a request allocates
// no more than before tracing existed: no span objects, no context
// values, no trace id strings.
func TestTracingOffAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts under the race detector are its own")
	}
	s := benchServer(t, `prices: { m: { input: 2.5, output: 10 } }`, jsonSender{})
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"Say hello"}]}`)
	got := testing.AllocsPerRun(500, func() { serveChat(t, s, body) })
	if got > chatRequestAllocsBefore {
		t.Errorf("%v allocs per request with tracing off, want at most %d", got, chatRequestAllocsBefore)
	}
}

func serveChat(tb testing.TB, s *Server, body []byte) {
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := &discardWriter{h: http.Header{}}
	s.ServeHTTP(w, r)
	if w.written != int64(len(jsonAnswer)) {
		tb.Fatalf("%d bytes written, want %d", w.written, len(jsonAnswer))
	}
}

// discardExporter takes spans and keeps nothing.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// BenchmarkChatRequestTraced is BenchmarkChatRequest with every request
// traced (sampled, exported to an exporter that keeps nothing): what a
// traced request costs the gateway, beside the untraced one.
func BenchmarkChatRequestTraced(b *testing.B) {
	tr, err := tracing.WithExporter(tracing.Config{Sampler: "always_on"}, discardExporter{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	s := benchServerTraced(b, `prices: { m: { input: 2.5, output: 10 } }`, jsonSender{}, tr)
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"Say hello"}]}`)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		serveChat(b, s, body)
	}
}
