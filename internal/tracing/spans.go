package tracing

import (
	"context"
	"encoding/binary"
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/llmgw/gateway/internal/report"
)

// Tracer makes the gateway's spans. A nil *Tracer is never handed to the
// hooks: callers hold a nil interface instead, so tracing off costs a nil
// check.
type Tracer struct {
	tp   *sdktrace.TracerProvider
	tr   trace.Tracer
	prop propagation.TraceContext
}

// RequestSpan is one API request's server span. Its attributes are held
// here and given to the span once, when it ends: the SDK copies what it is
// given at start and again at every SetAttributes, and a traced request
// paid for both. No sampler of the gateway's reads attributes at start
// (samplerOf), so nothing decides on them before they are set.
type RequestSpan struct {
	span  trace.Span
	attrs [9]attribute.KeyValue
	n     int
}

// StartRequest continues the inbound W3C trace context of r, if any, with
// the server span of one API request; route is the API path template.
// The caller ends the span with End.
func (t *Tracer) StartRequest(r *http.Request, route, requestID string) (context.Context, *RequestSpan) {
	ctx := t.prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	rs := &RequestSpan{}
	rs.attrs[0] = attribute.String("http.request.method", r.Method)
	rs.attrs[1] = attribute.String("http.route", route)
	rs.attrs[2] = attribute.String("url.path", r.URL.Path)
	rs.attrs[3] = attribute.String("url.scheme", scheme(r))
	rs.attrs[4] = attribute.String("server.address", r.Host)
	rs.attrs[5] = attribute.String("network.protocol.version", protoVersion(r))
	rs.attrs[6] = attribute.String("llmgw.request_id", requestID)
	rs.n = 7
	ctx, rs.span = t.tr.Start(ctx, r.Method+" "+route, trace.WithSpanKind(trace.SpanKindServer))
	return ctx, rs
}

func protoVersion(r *http.Request) string {
	switch {
	case r.ProtoMajor == 1 && r.ProtoMinor == 1:
		return "1.1"
	case r.ProtoMajor == 2 && r.ProtoMinor == 0:
		return "2"
	}
	return strconv.Itoa(r.ProtoMajor) + "." + strconv.Itoa(r.ProtoMinor)
}

func scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// End ends a request's server span with the status code it answered;
// aborted means the handler broke the response off (a cut stream, a
// panic), which is an error whatever the code said.
func (rs *RequestSpan) End(code int, aborted bool) {
	if code != 0 {
		rs.attrs[rs.n] = attribute.Int("http.response.status_code", code)
		rs.n++
	}
	switch {
	case aborted:
		rs.attrs[rs.n] = attribute.String("error.type", "aborted")
		rs.n++
		rs.span.SetStatus(codes.Error, "response aborted")
	case code >= 500:
		rs.attrs[rs.n] = attribute.String("error.type", strconv.Itoa(code))
		rs.n++
		rs.span.SetStatus(codes.Error, "")
	}
	rs.span.SetAttributes(rs.attrs[:rs.n]...)
	rs.span.End()
}

// TraceID is the trace of ctx's span as 32 hex digits, "" without one.
func (t *Tracer) TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return sc.TraceID().String()
}

// Attempt is one attempt's settled record and what the record leaves
// out, for its span.
type Attempt struct {
	Row         *report.Candidate
	Operation   string // gen_ai.operation.name: chat, embeddings
	Format      string // the provider's wire format (ProviderName)
	MaxTokens   int64  // the client's max_tokens; 0: unset
	Hedge       bool   // started by the hedge timer, not as the first try
	Queued      time.Time
	Committed   time.Time // when it passed its commit point; zero: never
	Temperature float64
	HasTemp     bool
	// FinishReasons is why the answer ended (OpenAI finish_reason
	// values), when it said.
	FinishReasons []string
}

// Attempt puts one settled attempt on the trace of ctx, as a child of
// its request span: started when it asked for its slots (or, without a
// queue, when its row started), ended when its row settled. Its span id
// is the one a provider that propagates the trace was sent (SpanID).
func (t *Tracer) Attempt(ctx context.Context, at *Attempt) {
	if !trace.SpanContextFromContext(ctx).IsSampled() {
		return
	}
	row := at.Row
	now := time.Now()
	start, end := at.Queued, row.FinishedAt
	if start.IsZero() {
		start = row.StartedAt
	}
	if start.IsZero() {
		start = now
	}
	if end.IsZero() {
		end = now
	}
	if end.Before(start) {
		end = start
	}
	ctx = context.WithValue(ctx, presetKey{}, SpanID(row.RequestID, row.Index, row.StartedAt))
	// The span copies its attributes (SetAttributes below); the buffer
	// they are gathered in goes back to the pool.
	buf := attrPool.Get().(*[]attribute.KeyValue)
	defer func() {
		clear(*buf)
		attrPool.Put(buf)
	}()
	attrs := (*buf)[:0]
	attrs = append(attrs,
		attribute.String("gen_ai.operation.name", at.Operation),
		attribute.String("gen_ai.provider.name", ProviderName(at.Format)),
		attribute.String("gen_ai.request.model", row.Model),
		attribute.String("llmgw.provider", row.Provider),
		attribute.Int("llmgw.candidate.index", row.Index),
		attribute.String("llmgw.candidate.status", row.Status),
		attribute.Bool("llmgw.hedge", at.Hedge),
	)
	if host, port := endpointAddress(row.Endpoint); host != "" {
		attrs = append(attrs, attribute.String("server.address", host))
		if port > 0 {
			attrs = append(attrs, attribute.Int("server.port", port))
		}
	}
	if row.RetryIndex > 0 {
		attrs = append(attrs, attribute.Int("llmgw.candidate.retry", row.RetryIndex))
	}
	if at.MaxTokens > 0 {
		attrs = append(attrs, attribute.Int64("gen_ai.request.max_tokens", at.MaxTokens))
	}
	if at.HasTemp {
		attrs = append(attrs, attribute.Float64("gen_ai.request.temperature", at.Temperature))
	}
	if row.Status == report.CandidateSuccess {
		// The answer came from the upstream model the row names.
		attrs = append(attrs, attribute.String("gen_ai.response.model", row.Model))
	}
	if row.HasUsage {
		attrs = append(attrs, attribute.Int64("gen_ai.usage.input_tokens", row.PromptTokens),
			attribute.Int64("gen_ai.usage.output_tokens", row.CompletionTokens))
		if row.UsageEstimated {
			attrs = append(attrs, attribute.Bool("llmgw.usage.estimated", true))
		}
	}
	if len(at.FinishReasons) > 0 {
		attrs = append(attrs, attribute.StringSlice("gen_ai.response.finish_reasons", at.FinishReasons))
	}
	if row.HasCost {
		attrs = append(attrs, attribute.Float64("llmgw.cost_usd", row.CostUSD))
	}
	if row.StatusCode != 0 {
		attrs = append(attrs, attribute.Int("http.response.status_code", row.StatusCode))
	}
	if row.ErrorType != "" {
		attrs = append(attrs, attribute.String("llmgw.error_type", row.ErrorType))
	}
	admitted := !at.Queued.IsZero() && !row.StartedAt.IsZero()
	if admitted {
		attrs = append(attrs, attribute.Float64("llmgw.admission.wait_ms", millis(row.StartedAt.Sub(at.Queued))))
	}
	if row.Status == report.CandidateFailed {
		// The error type only: a provider's message may echo the prompt.
		attrs = append(attrs, attribute.String("error.type", row.ErrorType))
	}
	// The attributes are set once, after Start: given to Start they were
	// copied twice (RequestSpan says why that is safe).
	_, span := t.tr.Start(ctx, at.Operation+" "+row.Model, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithTimestamp(start))
	span.SetAttributes(attrs...)
	if admitted {
		span.AddEvent("admitted", trace.WithTimestamp(row.StartedAt))
	}
	if row.FirstByte > 0 && !row.StartedAt.IsZero() {
		span.AddEvent("first_byte", trace.WithTimestamp(row.StartedAt.Add(row.FirstByte)))
	}
	if !at.Committed.IsZero() {
		span.AddEvent("committed", trace.WithTimestamp(at.Committed))
	}
	if row.Status == report.CandidateFailed {
		span.SetStatus(codes.Error, row.ErrorType)
	}
	span.End(trace.WithTimestamp(end))
	*buf = attrs
}

// attrPool holds the buffers attempt spans gather their attributes in.
var attrPool = sync.Pool{New: func() any {
	b := make([]attribute.KeyValue, 0, 24)
	return &b
}}

// endpointAddress is the host and port (0 when none) of a provider's
// endpoint URL, parsed once per endpoint: the endpoints are the routes
// file's few, and a parse per attempt was a tenth of an attempt span's
// allocations. Past maxEndpoints distinct ones (a routes file reloaded
// many times) they are parsed each time rather than kept.
func endpointAddress(endpoint string) (string, int) {
	if v, ok := endpoints.Load(endpoint); ok {
		a := v.(hostPort)
		return a.host, a.port
	}
	var a hostPort
	if u, err := url.Parse(endpoint); err == nil {
		a.host = u.Hostname()
		a.port, _ = strconv.Atoi(u.Port())
	}
	if endpointCount.Load() < maxEndpoints {
		if _, loaded := endpoints.LoadOrStore(endpoint, a); !loaded {
			endpointCount.Add(1)
		}
	}
	return a.host, a.port
}

type hostPort struct {
	host string
	port int
}

const maxEndpoints = 1024

var (
	endpoints     sync.Map // endpoint URL → hostPort
	endpointCount atomic.Int64
)

func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Skipped puts a candidate that policy skipped on its request's span.
func (t *Tracer) Skipped(ctx context.Context, row *report.Candidate) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.AddEvent("skipped", trace.WithAttributes(
		attribute.Int("llmgw.candidate.index", row.Index),
		attribute.String("llmgw.provider", row.Provider),
		attribute.String("gen_ai.request.model", row.Model),
		attribute.String("llmgw.skip_reason", row.SkipReason),
	))
}

// Traceparent is the W3C trace context a provider is sent for the attempt
// of candidate index that started at started: the attempt span's id
// within the request's trace, so the provider's spans hang under it.
// Empty without a trace.
func (t *Tracer) Traceparent(ctx context.Context, request uuid.UUID, index int, started time.Time) (parent, state string) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return "", ""
	}
	id := SpanID(request, index, started)
	flags := "00"
	if sc.IsSampled() {
		flags = "01"
	}
	return "00-" + sc.TraceID().String() + "-" + id.String() + "-" + flags, sc.TraceState().String()
}

// SpanID is the span id of the attempt of candidate index of request that
// started at started. It is derived rather than drawn so that the header
// sent before the attempt and the span made once it settled agree without
// anything kept in between.
func SpanID(request uuid.UUID, index int, started time.Time) trace.SpanID {
	h := fnv.New64a()
	var b [16 + 8 + 8]byte
	copy(b[:16], request[:])
	binary.BigEndian.PutUint64(b[16:], uint64(index))
	binary.BigEndian.PutUint64(b[24:], uint64(started.UnixNano()))
	_, _ = h.Write(b[:])
	var id trace.SpanID
	binary.BigEndian.PutUint64(id[:], h.Sum64()|1) // never the invalid all-zero id
	return id
}

// ProviderName is gen_ai.provider.name for a provider's wire format.
func ProviderName(format string) string {
	switch format {
	case "gemini":
		return "gcp.gemini"
	case "vertex":
		return "gcp.vertex_ai"
	case "bedrock":
		return "aws.bedrock"
	case "azure":
		return "azure.ai.openai"
	case "":
		return "openai"
	}
	return format // openai, anthropic
}

// presetIDs draws ids as the SDK does, except for an attempt span, whose
// id is derived (SpanID) and passed in its context.
type presetIDs struct{}

type presetKey struct{}

func (presetIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	var tid trace.TraceID
	for !tid.IsValid() {
		binary.BigEndian.PutUint64(tid[:8], rand.Uint64())
		binary.BigEndian.PutUint64(tid[8:], rand.Uint64())
	}
	return tid, presetIDs{}.NewSpanID(ctx, tid)
}

func (presetIDs) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if id, ok := ctx.Value(presetKey{}).(trace.SpanID); ok {
		return id
	}
	var sid trace.SpanID
	for !sid.IsValid() {
		binary.BigEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
}
