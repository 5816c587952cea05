package tracing

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Config is the standard OpenTelemetry variables the gateway reads; the
// config package parses them with the gateway's own. Tracing is on only
// when an endpoint is set (docs/tracing.md).
type Config struct {
	// Endpoint is the collector's base URL; the traces path is added
	// for http/protobuf (/v1/traces).
	Endpoint string `env:"OTEL_EXPORTER_OTLP_ENDPOINT"`
	// TracesEndpoint, when set, is the full URL of the traces endpoint
	// and wins over Endpoint.
	TracesEndpoint string `env:"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"`
	// Protocol is grpc or http/protobuf (the default, as the spec says).
	Protocol       string `env:"OTEL_EXPORTER_OTLP_PROTOCOL"`
	TracesProtocol string `env:"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"`
	// Headers go on every export: k=v pairs, comma separated,
	// URL-encoded values (an API key of a hosted collector).
	Headers string `env:"OTEL_EXPORTER_OTLP_HEADERS"`
	// Exporter "none" turns tracing off even with an endpoint set.
	Exporter    string `env:"OTEL_TRACES_EXPORTER"`
	ServiceName string `env:"OTEL_SERVICE_NAME" envDefault:"llmgw"`
	// Sampler and SamplerArg as the spec names them; the default is
	// parentbased_always_on.
	Sampler    string `env:"OTEL_TRACES_SAMPLER"`
	SamplerArg string `env:"OTEL_TRACES_SAMPLER_ARG"`
	// ResourceAttributes are k=v pairs added to the resource.
	ResourceAttributes string `env:"OTEL_RESOURCE_ATTRIBUTES"`
	// QueueSize bounds the spans waiting for export; past it spans are
	// dropped and counted (gateway_trace_spans_dropped_total).
	QueueSize int `env:"OTEL_BSP_MAX_QUEUE_SIZE" envDefault:"2048"`
	// BatchSize is the most spans one export carries.
	BatchSize int `env:"OTEL_BSP_MAX_EXPORT_BATCH_SIZE" envDefault:"512"`
	// DelayMS is the longest a span waits for a batch to fill, in
	// milliseconds as the spec has it.
	DelayMS int `env:"OTEL_BSP_SCHEDULE_DELAY" envDefault:"1000"`
	// TimeoutMS bounds one export, in milliseconds; an export that fails
	// or times out drops its spans (counted) rather than retry and fall
	// behind.
	TimeoutMS int `env:"OTEL_EXPORTER_OTLP_TIMEOUT" envDefault:"10000"`
}

// On reports whether c configures an exporter.
func (c Config) On() bool {
	return c.Exporter != "none" && (c.Endpoint != "" || c.TracesEndpoint != "")
}

// ConfigError is a tracing variable that cannot be used.
type ConfigError struct {
	Variable string
	Err      error
}

func (e *ConfigError) Error() string { return e.Variable + ": " + e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// Setup builds the tracer from c, or returns nil when c configures no
// exporter. dropped counts the spans the export queue let go; it may be
// nil. The caller ends the tracer with Shutdown.
func Setup(c Config, dropped func(n int)) (*Tracer, error) {
	if !c.On() {
		return nil, nil
	}
	exp, err := exporter(c)
	if err != nil {
		return nil, err
	}
	return WithExporter(c, exp, dropped)
}

// WithExporter is Setup with exp in place of the OTLP exporter c names
// (benchmarks, tests); the rest of c applies as in Setup.
func WithExporter(c Config, exp sdktrace.SpanExporter, dropped func(n int)) (*Tracer, error) {
	sampler, err := samplerOf(c.Sampler, c.SamplerArg)
	if err != nil {
		return nil, err
	}
	attrs, err := pairs(c.ResourceAttributes, "OTEL_RESOURCE_ATTRIBUTES")
	if err != nil {
		return nil, err
	}
	kvs := make([]attribute.KeyValue, 0, len(attrs)+1)
	for k, v := range attrs {
		kvs = append(kvs, attribute.String(k, v))
	}
	name := c.ServiceName
	if name == "" {
		name = "llmgw"
	}
	kvs = append(kvs, attribute.String("service.name", name)) // the variable wins over the attributes, as the spec says
	res := resource.NewWithAttributes("", kvs...)
	q := newQueue(exp, c.QueueSize, c.BatchSize, ms(c.DelayMS), ms(c.TimeoutMS), dropped)
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSampler(sampler),
		sdktrace.WithSpanProcessor(q), sdktrace.WithIDGenerator(presetIDs{}))
	return &Tracer{tp: tp, tr: tp.Tracer("github.com/llmgw/gateway"), prop: propagation.TraceContext{}}, nil
}

// exporter is the OTLP exporter c names. Retries are off: an export that
// fails drops its batch, counted, so that a collector that is down never
// holds spans back behind it.
func exporter(c Config) (sdktrace.SpanExporter, error) {
	proto := c.TracesProtocol
	if proto == "" {
		proto = c.Protocol
	}
	headers, err := pairs(c.Headers, "OTEL_EXPORTER_OTLP_HEADERS")
	if err != nil {
		return nil, err
	}
	endpoint := c.TracesEndpoint
	switch proto {
	case "", "http/protobuf":
		if endpoint == "" {
			endpoint = strings.TrimSuffix(c.Endpoint, "/") + "/v1/traces"
		}
		if _, err := url.Parse(endpoint); err != nil {
			return nil, &ConfigError{"OTEL_EXPORTER_OTLP_ENDPOINT", err}
		}
		return otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(endpoint),
			otlptracehttp.WithHeaders(headers), otlptracehttp.WithTimeout(ms(c.TimeoutMS)),
			otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
	case "grpc":
		if endpoint == "" {
			endpoint = c.Endpoint
		}
		if _, err := url.Parse(endpoint); err != nil {
			return nil, &ConfigError{"OTEL_EXPORTER_OTLP_ENDPOINT", err}
		}
		// New does not dial: the connection is made on the first export.
		return otlptracegrpc.New(context.Background(), otlptracegrpc.WithEndpointURL(endpoint),
			otlptracegrpc.WithHeaders(headers), otlptracegrpc.WithTimeout(ms(c.TimeoutMS)),
			otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}))
	}
	return nil, &ConfigError{"OTEL_EXPORTER_OTLP_PROTOCOL", fmt.Errorf("%q is not grpc or http/protobuf", proto)}
}

// samplerOf is the spec's OTEL_TRACES_SAMPLER.
func samplerOf(name, arg string) (sdktrace.Sampler, error) {
	ratio := func() (float64, error) {
		if arg == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return 0, &ConfigError{"OTEL_TRACES_SAMPLER_ARG", fmt.Errorf("%q is not a ratio in [0, 1]", arg)}
		}
		return r, nil
	}
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio", "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		if name == "traceidratio" {
			return sdktrace.TraceIDRatioBased(r), nil
		}
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), nil
	}
	return nil, &ConfigError{"OTEL_TRACES_SAMPLER", fmt.Errorf("unknown sampler %q", name)}
}

// pairs parses the spec's k=v,k2=v2 lists (values URL-encoded).
func pairs(s, variable string) (map[string]string, error) {
	m := map[string]string{}
	for _, p := range strings.Split(s, ",") {
		if strings.TrimSpace(p) == "" {
			continue
		}
		k, v, ok := strings.Cut(p, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, &ConfigError{variable, fmt.Errorf("%q is not key=value", k)}
		}
		dv, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, &ConfigError{variable, err}
		}
		m[k] = dv
	}
	return m, nil
}

// Shutdown exports the spans still queued, within ctx, and stops the
// export queue's goroutine. Nil is a valid *Tracer.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.Shutdown(ctx)
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }
