package api

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/llmgw/gateway/internal/report"
	"github.com/llmgw/gateway/internal/tracing"
)

// traced gives every API request (the client routes of apiPaths) its
// server span, continuing the client's W3C trace context; other paths
// (health, metrics, admin) are not traced. It is installed only when
// tracing is on, so a gateway without it pays nothing here.
func traced(t *tracing.Tracer) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			route := apiRoute(r)
			if route == "" {
				next.ServeHTTP(w, r)
				return
			}
			ctx, span := t.StartRequest(r, route, requestID(r.Context()).String())
			sw := &statusWriter{ResponseWriter: w}
			done := false
			defer func() {
				// A handler that panicked (http.ErrAbortHandler included)
				// never set done: its span still ends, as aborted.
				span.End(sw.code, !done)
			}()
			next.ServeHTTP(sw, r.WithContext(ctx))
			done = true
		})
	}
}

// apiRoute is r's client route path, "" when r is not an API request.
func apiRoute(r *http.Request) string {
	if r.Method != http.MethodPost {
		return ""
	}
	for _, p := range apiPaths {
		if r.URL.Path == p {
			return p
		}
	}
	return ""
}

// statusWriter remembers the status code answered, for the server span.
// Unwrap keeps http.ResponseController (flushes, write deadlines) working.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.code == 0 && code >= 200 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// FlushError passes a flush on, as trackingWriter (inside this one) asks
// for it by type rather than through Unwrap.
func (s *statusWriter) FlushError() error {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return http.NewResponseController(s.ResponseWriter).Flush()
}

// Flush implements http.Flusher.
func (s *statusWriter) Flush() { _ = s.FlushError() }

// timelineAnswer is GET /admin/requests/{id}: the timeline and, with
// GATEWAY_TRACE_URL set and a trace on record, the link to the trace.
type timelineAnswer struct {
	report.Timeline
	TraceURL string `json:"trace_url,omitempty"`
}

// traceURL is the trace viewer's page of a trace id, "" without either.
func (s *Server) traceURL(id *string) string {
	if s.opts.TraceURL == "" || id == nil || *id == "" {
		return ""
	}
	return strings.ReplaceAll(s.opts.TraceURL, "{trace_id}", url.PathEscape(*id))
}

// traceID is the trace of a request's context, "" with tracing off (and
// then without looking).
func (s *Server) traceID(ctx context.Context) string {
	if s.opts.Tracer == nil {
		return ""
	}
	return s.opts.Tracer.TraceID(ctx)
}
