package api

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/candidates"
	"github.com/llmgw/gateway/internal/routes"
	"github.com/llmgw/gateway/internal/tracing"
	"github.com/llmgw/gateway/internal/upstream"
	"github.com/llmgw/gateway/internal/watchdog"
)

// shortStream is a stream of five chunks and [DONE], as the load benchmark's
// mock sends it.
type shortStream struct{ left int }

func (s *shortStream) Read(p []byte) (int, error) {
	switch {
	case s.left > 0:
		s.left--
		return copy(p, chunkBytes), nil
	case s.left == 0:
		s.left--
		return copy(p, doneBytes), nil
	}
	return 0, io.EOF
}

func (s *shortStream) Close() error { return nil }

// shortStreamSender answers every call with a fresh shortStream.
type shortStreamSender struct{}

func (shortStreamSender) Send(context.Context, *upstream.Call) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: &shortStream{left: 5}, ContentLength: -1}, nil
}

// firstFlushWriter notes when the first flush happened.
type firstFlushWriter struct {
	discardWriter
	first time.Time
}

func (w *firstFlushWriter) Flush() {
	if w.first.IsZero() {
		w.first = time.Now()
	}
}

// BenchmarkChatStreamRequest is the gateway's own work for one whole stream
// request, from the handler's entry to its return: authentication, parsing,
// planning, admission, the watchdog, the relay of five chunks and the
// records handed over (to a recorder that keeps nothing). It reports the time
// from the handler's entry to the first flush as ns-to-first-flush: what the
// first chunk waits on inside the gateway.
func BenchmarkChatStreamRequest(b *testing.B) {
	s := benchServer(b, `health: { failures: 3, cooldown: 5s }`, shortStreamSender{})
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"Say hello"}],"stream":true}`)
	var toFirst time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		w := &firstFlushWriter{discardWriter: discardWriter{h: http.Header{}}}
		start := time.Now()
		s.ServeHTTP(w, r)
		if w.first.IsZero() {
			b.Fatalf("nothing flushed; %d bytes written", w.written)
		}
		toFirst += w.first.Sub(start)
	}
	b.ReportMetric(float64(toFirst.Nanoseconds())/float64(b.N), "ns-to-first-flush")
}

// jsonSender answers every call with one non-stream chat completion with
// usage, as the load benchmark's mock does.
type jsonSender struct{}

var jsonAnswer = []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":20,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":0}}}`)

func (jsonSender) Send(context.Context, *upstream.Call) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(jsonAnswer)), ContentLength: int64(len(jsonAnswer))}, nil
}

// BenchmarkChatRequest is the gateway's own work for one whole non-stream
// request of a priced model, from the handler's entry to its return: the
// open-loop phase of `make bench` without the network.
func BenchmarkChatRequest(b *testing.B) {
	s := benchServer(b, `prices: { m: { input: 2.5, output: 10 } }`, jsonSender{})
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"Say hello"}]}`)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		w := &discardWriter{h: http.Header{}}
		s.ServeHTTP(w, r)
		if w.written != int64(len(jsonAnswer)) {
			b.Fatalf("%d bytes written, want %d", w.written, len(jsonAnswer))
		}
	}
}

// cachedBenchBody is the load benchmark's non-stream request; "#N#" is
// where a miss's distinct number goes.
const cachedBenchBody = `{"model":"m","messages":[{"role":"user","content":"Say hello in one short sentence. #N#"}],"max_tokens":32}`

// BenchmarkChatRequestCacheMiss is BenchmarkChatRequest on a cached model
// with a distinct body each iteration (the cache phase's miss): the key,
// the lookup, the flight, the capture and the store on top of an uncached
// request. Its store is the default in-process one, so it fills and
// evicts as the gateway's does.
func BenchmarkChatRequestCacheMiss(b *testing.B) {
	s := benchServerModel(b, `prices: { m: { input: 2.5, output: 10 } }`, `cache: { ttl: 1h, scope: shared }`, jsonSender{})
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		body := bytes.Replace([]byte(cachedBenchBody), []byte("#N#"), strconv.AppendInt(nil, int64(i), 10), 1)
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		w := &discardWriter{h: http.Header{}}
		s.ServeHTTP(w, r)
		if w.written != int64(len(jsonAnswer)) || w.h.Get(headerCache) != "miss" {
			b.Fatalf("%d bytes written (want %d), x-gateway-cache %q", w.written, len(jsonAnswer), w.h.Get(headerCache))
		}
	}
}

// BenchmarkChatRequestCacheHit is BenchmarkChatRequest on a cached model
// whose answer is stored: the same body every iteration, served from the
// in-process store (the cache phase's hit).
func BenchmarkChatRequestCacheHit(b *testing.B) {
	s := benchServerModel(b, `prices: { m: { input: 2.5, output: 10 } }`, `cache: { ttl: 1h, scope: shared }`, jsonSender{})
	body := []byte(cachedBenchBody)
	serve := func() *discardWriter {
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		w := &discardWriter{h: http.Header{}}
		s.ServeHTTP(w, r)
		return w
	}
	serve() // the miss that stores it
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		w := serve()
		if w.written != int64(len(jsonAnswer)) || w.h.Get(headerCache) != "hit" {
			b.Fatalf("%d bytes written (want %d), x-gateway-cache %q", w.written, len(jsonAnswer), w.h.Get(headerCache))
		}
	}
}

// benchServer is a gateway of one model on provider p (with extra, a
// flow-mapping member list, in its entry) whose upstream is send.
func benchServer(b testing.TB, extra string, send candidates.Sender) *Server {
	b.Helper()
	return benchServerTraced(b, extra, send, nil)
}

// benchServerTraced is benchServer with tr tracing every request; nil:
// tracing off.
func benchServerTraced(b testing.TB, extra string, send candidates.Sender, tr *tracing.Tracer) *Server {
	b.Helper()
	return benchServerOf(b, extra, "", send, tr)
}

// benchServerModel is benchServer with model, flow-mapping members, in
// the model's entry.
func benchServerModel(b testing.TB, extra, model string, send candidates.Sender) *Server {
	b.Helper()
	return benchServerOf(b, extra, model, send, nil)
}

func benchServerOf(b testing.TB, extra, model string, send candidates.Sender, tr *tracing.Tracer) *Server {
	b.Helper()
	if model != "" {
		model += ", "
	}
	routes, err := routes.Parse([]byte(`
providers:
  - { name: p, base_url: "http://p.example/v1", api_keys: [k], max_concurrency: 64, `+extra+` }
models:
  - { name: m, `+model+`candidates: [ { provider: p } ] }
`), func(string) (string, bool) { return "", false })
	if err != nil {
		b.Fatal(err)
	}
	planner, err := candidates.NewPlanner(routes, candidates.PlannerOptions{DefaultFirstByte: time.Minute, DefaultQueueBudget: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	sched := admission.New(admission.Config{GlobalLimit: 64})
	b.Cleanup(func() { _ = sched.Close(context.Background()) })
	runner := &candidates.Runner{Admit: sched, Record: nopRecorder{}, HoldMode: watchdog.HoldFirstBody,
		Upstreams: map[string]candidates.Sender{"p": send}}
	if tr != nil {
		runner.Trace = tr
	}
	s := New(Options{Planner: planner, Runner: runner, MaxRequestBytes: 1 << 20, StreamWriteTimeout: 30 * time.Second, Tracer: tr})
	b.Cleanup(s.Close)
	return s
}
