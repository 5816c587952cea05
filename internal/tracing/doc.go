// Package tracing owns the gateway's OpenTelemetry traces: the tracer
// provider and its exporter set up from the standard OTEL_* variables
// (config.go), the bounded export queue that drops rather than slow a
// request and counts what it drops (queue.go), and the spans themselves
// (spans.go): one server span per API request and one span per attempt,
// built from the attempt's settled record with the GenAI semantic
// conventions. No prompt or completion text is ever put on a span.
//
// With no exporter configured Setup returns a nil *Tracer: callers keep a
// nil interface and pay one nil check per hook, with no span objects and
// no allocations. What an attempt is and when it settles is
// internal/candidates'; the HTTP side of a request is internal/api's.
package tracing
