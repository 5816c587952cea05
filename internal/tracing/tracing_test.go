package tracing

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestOff: without an endpoint, or with OTEL_TRACES_EXPORTER=none, Setup
// gives no tracer and starts nothing.
func TestOff(t *testing.T) {
	for _, c := range []Config{{}, {Endpoint: "http://127.0.0.1:4318", Exporter: "none"}} {
		tr, err := Setup(c, nil)
		if tr != nil || err != nil {
			t.Errorf("Setup(%+v) = %v, %v; want nil, nil", c, tr, err)
		}
	}
}

// TestConfigErrors: a variable that cannot be used names itself.
func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{Endpoint: "http://x", Protocol: "http/json"}, "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{Config{Endpoint: "http://x", Sampler: "sometimes"}, "OTEL_TRACES_SAMPLER"},
		{Config{Endpoint: "http://x", Sampler: "traceidratio", SamplerArg: "2"}, "OTEL_TRACES_SAMPLER_ARG"},
		{Config{Endpoint: "http://x", Headers: "novalue"}, "OTEL_EXPORTER_OTLP_HEADERS"},
		{Config{Endpoint: "http://x", ResourceAttributes: "=v"}, "OTEL_RESOURCE_ATTRIBUTES"},
	} {
		_, err := Setup(tc.c, nil)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Variable != tc.want {
			t.Errorf("Setup(%+v) = %v, want a *ConfigError for %s", tc.c, err, tc.want)
		}
	}
}

// TestPairs: the spec's key=value lists, values URL-decoded.
func TestPairs(t *testing.T) {
	m, err := pairs(" a=1, b = x%20y ,,", "V")
	if err != nil || len(m) != 2 || m["a"] != "1" || m["b"] != "x y" {
		t.Fatalf("pairs = %v, %v", m, err)
	}
}

// blockingExporter holds every export until release closes; it counts
// the spans it was given.
type blockingExporter struct {
	release chan struct{}
	got     atomic.Int64
	fail    bool
}

func (e *blockingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	select {
	case <-e.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	e.got.Add(int64(len(spans)))
	if e.fail {
		return errors.New("collector refused")
	}
	return nil
}

func (e *blockingExporter) Shutdown(context.Context) error { return nil }

// TestQueueDropsWhenFull: with the exporter stuck, ending spans never
// blocks, and every span is either exported or counted dropped.
func TestQueueDropsWhenFull(t *testing.T) {
	exp := &blockingExporter{release: make(chan struct{})}
	var dropped atomic.Int64
	tr, err := WithExporter(Config{QueueSize: 4, BatchSize: 2, DelayMS: 5, TimeoutMS: 5000}, exp,
		func(n int) { dropped.Add(int64(n)) })
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	begin := time.Now()
	for range n {
		_, span := tr.tr.Start(context.Background(), "s")
		span.End()
	}
	if took := time.Since(begin); took > time.Second {
		t.Errorf("ending %d spans took %v with the exporter stuck", n, took)
	}
	close(exp.release)
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := dropped.Load(); d == 0 || d+exp.got.Load() != n {
		t.Errorf("dropped %d + exported %d, want some dropped and %d in all", d, exp.got.Load(), n)
	}
}

// TestQueueExportsFullBatch: ended spans wait for the export tick (an
// hour here), except that a full batch wakes the exporter, which then
// takes whatever has ended by then; shutdown exports the rest.
func TestQueueExportsFullBatch(t *testing.T) {
	exp := &blockingExporter{release: make(chan struct{})}
	close(exp.release)
	tr, err := WithExporter(Config{QueueSize: 64, BatchSize: 8, DelayMS: 3_600_000}, exp, nil)
	if err != nil {
		t.Fatal(err)
	}
	end := func(n int) {
		for range n {
			_, span := tr.tr.Start(context.Background(), "s")
			span.End()
		}
	}
	end(8 + 3)
	deadline := time.Now().Add(5 * time.Second)
	for exp.got.Load() < 8 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := exp.got.Load(); got < 8 {
		t.Fatalf("exported %d spans 5 s after a full batch of 8 ended, want it exported without the tick", got)
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := exp.got.Load(); got != 11 {
		t.Errorf("exported %d spans after shutdown, want 11", got)
	}
}

// TestQueueCountsFailedExports: an export that fails drops its batch,
// counted.
func TestQueueCountsFailedExports(t *testing.T) {
	exp := &blockingExporter{release: make(chan struct{}), fail: true}
	close(exp.release)
	var dropped atomic.Int64
	tr, err := WithExporter(Config{QueueSize: 64, DelayMS: 5}, exp, func(n int) { dropped.Add(int64(n)) })
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		_, span := tr.tr.Start(context.Background(), "s")
		span.End()
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := dropped.Load(); d != 10 {
		t.Errorf("dropped %d, want the 10 spans of failed exports", d)
	}
}

// TestSpanIDStable: the id sent to a provider before the attempt is the
// id its span gets once settled, and attempts differ.
func TestSpanIDStable(t *testing.T) {
	at := time.Unix(100, 5)
	a, b := SpanID([16]byte{1}, 0, at), SpanID([16]byte{1}, 0, at)
	if a != b || !a.IsValid() {
		t.Fatalf("SpanID not stable or invalid: %s %s", a, b)
	}
	if SpanID([16]byte{1}, 1, at) == a || SpanID([16]byte{1}, 0, at.Add(1)) == a {
		t.Errorf("different attempts share a span id")
	}
}

// TestProviderName: the GenAI provider names of the wire formats.
func TestProviderName(t *testing.T) {
	for f, want := range map[string]string{"openai": "openai", "anthropic": "anthropic", "gemini": "gcp.gemini",
		"vertex": "gcp.vertex_ai", "bedrock": "aws.bedrock", "azure": "azure.ai.openai"} {
		if got := ProviderName(f); got != want {
			t.Errorf("ProviderName(%q) = %q, want %q", f, got, want)
		}
	}
}
