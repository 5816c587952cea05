package candidates

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/health"
	"github.com/llmgw/gateway/internal/upstream"
	"github.com/llmgw/gateway/internal/watchdog"
)

// TestClassify is the failure policy in one table: what each way an attempt
// can fail means for the record, failover, the request's answer and health.
// Columns: candidate status/code/error_type, scope, counts for health, may
// fail over, timeout (504 when exhausted), capacity (429 when exhausted).
func TestClassify(t *testing.T) {
	status := func(code int, retryAfter time.Duration) error {
		return &upstream.StatusError{Code: code, RetryAfter: retryAfter, Body: []byte(`{"error":"x"}`)}
	}
	chosen := func(code int) error {
		return &upstream.StatusError{Code: code, Body: []byte(`{"error":"x"}`), ClientChosen: true}
	}
	cut := &upstream.ProtocolError{Err: io.ErrUnexpectedEOF}
	type want struct {
		row                  string
		scope                Scope
		health, failover     bool
		timeout, capacity    bool
		retryAfter           time.Duration
		watchdog, reqOutcome string
	}
	tests := []struct {
		name      string
		err       error
		committed bool
		ended     error
		want      want
	}{
		{"admission timeout", &AdmissionError{&admission.TimeoutError{Gate: "g", Budget: 250 * time.Millisecond}}, false, nil,
			want{row: "failed/429/gateway_admission_timeout", failover: true, capacity: true, retryAfter: 250 * time.Millisecond}},
		{"queue full", &AdmissionError{admission.ErrQueueFull}, false, nil,
			want{row: "failed/429/gateway_queue_full", failover: true, capacity: true, retryAfter: time.Second}},
		{"scheduler closed", &AdmissionError{admission.ErrClosed}, false, nil,
			want{row: "failed/503/gateway_shutdown", reqOutcome: "failed/503"}},
		{"admission bug", &AdmissionError{fmt.Errorf("x: %w", admission.ErrInvalidRequest)}, false, nil,
			want{row: "failed/500/gateway_internal_error", failover: true}},
		{"first byte timeout", watchdog.ErrFirstByteTimeout, false, nil,
			want{row: "failed/504/stream_first_byte_timeout", scope: ScopeModel, health: true, failover: true, timeout: true, watchdog: "first_byte"}},
		{"total timeout", upstream.ErrTotalTimeout, false, nil,
			want{row: "failed/504/upstream_timeout", scope: ScopeModel, health: true, failover: true, timeout: true, watchdog: "total"}},
		{"provider unreachable", &upstream.ConnectError{Provider: "p", Err: errors.New("refused"), Dial: true}, false, nil,
			want{row: "failed/502/upstream_connect_error", scope: ScopeTransport, health: true, failover: true}},
		{"connect timeout", &upstream.ConnectError{Provider: "p", Err: fmt.Errorf("dial: %w", os.ErrDeadlineExceeded), Dial: true}, false, nil,
			want{row: "failed/502/upstream_connect_error", scope: ScopeTransport, health: true, failover: true, timeout: true}},
		{"connection reset after the dial", &upstream.ConnectError{Provider: "p", Err: errors.New("reset")}, false, nil,
			want{row: "failed/502/upstream_connect_error", scope: ScopeModel, health: true, failover: true}},
		{"no access token", fmt.Errorf("attempt: %w", &upstream.TokenError{Provider: "vx", Err: errors.New("oauth2: cannot fetch token: 500")}), false, nil,
			want{row: "failed/502/upstream_connect_error", scope: ScopeTransport, health: true, failover: true}},
		{"protocol error", cut, false, nil,
			want{row: "failed/502/upstream_protocol_error", scope: ScopeModel, health: true, failover: true}},
		{"500", status(500, 0), false, nil,
			want{row: "failed/500/upstream_http_error", scope: ScopeModel, health: true, failover: true}},
		{"503 with Retry-After", status(503, 2*time.Second), false, nil,
			want{row: "failed/503/upstream_http_error", scope: ScopeModel, health: true, failover: true, retryAfter: 2 * time.Second}},
		{"504", status(504, 0), false, nil,
			want{row: "failed/504/upstream_http_error", scope: ScopeModel, health: true, failover: true, timeout: true}},
		{"408", status(408, 0), false, nil,
			want{row: "failed/408/upstream_http_error", scope: ScopeModel, health: true, failover: true, timeout: true}},
		{"404 model missing there", status(404, 0), false, nil,
			want{row: "failed/404/upstream_http_error", scope: ScopeModel, failover: true}},
		{"429", status(429, 3*time.Second), false, nil,
			want{row: "failed/429/upstream_http_error", scope: ScopeModel, health: true, failover: true, capacity: true, retryAfter: 3 * time.Second}},
		{"429 key-wide", &upstream.StatusError{Code: 429, KeyWide: true}, false, nil,
			want{row: "failed/429/upstream_http_error", scope: ScopeKey, health: true, failover: true, capacity: true}},
		{"529 overloaded", status(529, 0), false, nil,
			want{row: "failed/529/upstream_http_error", scope: ScopeModel, health: true, failover: true}},
		{"OpenAI context length", &upstream.StatusError{Code: 400, Body: []byte(`{"error":{"message":"maximum context length is 8192 tokens","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`)}, false, nil,
			want{row: "failed/400/context_length_exceeded", scope: ScopeModel, failover: true}},
		{"Anthropic prompt too long", &upstream.StatusError{Code: 400, Body: []byte(`{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}`)}, false, nil,
			want{row: "failed/400/context_length_exceeded", scope: ScopeModel, failover: true}},
		{"Anthropic request too large", &upstream.StatusError{Code: 413, Body: []byte(`{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}`)}, false, nil,
			want{row: "failed/413/context_length_exceeded", scope: ScopeModel, failover: true}},
		{"content filter 400 relayed", &upstream.StatusError{Code: 400, Body: []byte(`{"error":{"message":"filtered","type":null,"param":"prompt","code":"content_filter","status":400}}`)}, false, nil,
			want{row: "failed/400/upstream_http_error", reqOutcome: "failed/400"}},
		{"401", status(401, 0), false, nil,
			want{row: "failed/401/upstream_http_error", scope: ScopeKey, health: true, failover: true}},
		{"403", status(403, 0), false, nil,
			want{row: "failed/403/upstream_http_error", scope: ScopeKey, health: true, failover: true}},
		{"402", status(402, 0), false, nil,
			want{row: "failed/402/upstream_http_error", scope: ScopeKey, failover: true}},
		// A refusal of a request that carried a header the client chose
		// fails over as usual but cools no shared key; a provider fault
		// still counts.
		{"401 to a client-chosen header", chosen(401), false, nil,
			want{row: "failed/401/upstream_http_error", scope: ScopeKey, failover: true}},
		{"403 to a client-chosen header", chosen(403), false, nil,
			want{row: "failed/403/upstream_http_error", scope: ScopeKey, failover: true}},
		{"429 to a client-chosen header", chosen(429), false, nil,
			want{row: "failed/429/upstream_http_error", scope: ScopeModel, failover: true, capacity: true}},
		{"500 to a client-chosen header", chosen(500), false, nil,
			want{row: "failed/500/upstream_http_error", scope: ScopeModel, health: true, failover: true}},
		{"400 relayed", status(400, 0), false, nil,
			want{row: "failed/400/upstream_http_error", reqOutcome: "failed/400"}},
		{"413 fails over", status(413, 0), false, nil,
			want{row: "failed/413/context_length_exceeded", scope: ScopeModel, failover: true}},
		{"422 relayed", status(422, 0), false, nil,
			want{row: "failed/422/upstream_http_error", reqOutcome: "failed/422"}},
		{"cut before the commit point", &StreamCutError{Err: io.ErrUnexpectedEOF}, false, nil,
			want{row: "failed/502/stream_interrupted", scope: ScopeModel, health: true, failover: true}},
		{"silent before the commit point", &StreamCutError{Err: watchdog.ErrIdleTimeout}, false, nil,
			want{row: "failed/502/stream_interrupted", scope: ScopeModel, health: true, failover: true, watchdog: "idle"}},
		{"error object before the commit point", &StreamErrorObject{Data: `data: {"error":{"message":"overloaded"}}`}, false, nil,
			want{row: "failed/502/upstream_stream_error", scope: ScopeModel, health: true, failover: true}},
		{"target turned cooling while waiting", health.ErrCooling, false, nil,
			want{row: "cancelled/499/cooling_down", failover: true}},
		{"cut after commit", cut, true, nil,
			want{row: "failed/502/stream_interrupted", reqOutcome: "failed/502"}},
		{"idle after commit", watchdog.ErrIdleTimeout, true, nil,
			want{row: "failed/502/stream_interrupted", watchdog: "idle", reqOutcome: "failed/502"}},
		{"total after commit", upstream.ErrTotalTimeout, true, nil,
			want{row: "failed/502/stream_interrupted", watchdog: "total", reqOutcome: "failed/502"}},
		{"client went away", context.Canceled, false, context.Canceled,
			want{row: "cancelled/499/client_cancelled", reqOutcome: "cancelled/499"}},
		{"client went away mid-stream", context.Canceled, true, context.Canceled,
			want{row: "cancelled/499/client_cancelled", reqOutcome: "cancelled/499"}},
		// The upstream's cut decides even when the client has hung up since.
		{"cut, then the client hung up", cut, true, context.Canceled,
			want{row: "failed/502/stream_interrupted", reqOutcome: "failed/502"}},
		{"first byte timeout as the client left", watchdog.ErrFirstByteTimeout, false, context.Canceled,
			want{row: "failed/504/stream_first_byte_timeout", scope: ScopeModel, health: true, failover: true, timeout: true, watchdog: "first_byte"}},
		{"shutdown before commit", ErrShutdown, false, ErrShutdown,
			want{row: "failed/503/gateway_shutdown", reqOutcome: "failed/503"}},
		{"shutdown after commit", ErrShutdown, true, ErrShutdown,
			want{row: "failed/502/gateway_shutdown", reqOutcome: "failed/503"}},
		{"deadline before commit", ErrDeadline, false, ErrDeadline,
			want{row: "failed/504/deadline_exceeded", reqOutcome: "failed/504"}},
		{"deadline after commit", ErrDeadline, true, ErrDeadline,
			want{row: "failed/504/deadline_exceeded", reqOutcome: "failed/504"}},
		{"deadline ended the queue wait", &AdmissionError{fmt.Errorf("wait: %w", context.DeadlineExceeded)}, false, ErrDeadline,
			want{row: "failed/504/deadline_exceeded", reqOutcome: "failed/504"}},
		// A provider's own timeout keeps its meaning when the deadline
		// passes at the same moment.
		{"first byte timeout as the deadline passed", watchdog.ErrFirstByteTimeout, false, ErrDeadline,
			want{row: "failed/504/stream_first_byte_timeout", scope: ScopeModel, health: true, failover: true, timeout: true, watchdog: "first_byte"}},
		{"client stopped reading", &ClientWriteError{Err: os.ErrDeadlineExceeded}, true, context.Canceled,
			want{row: "failed/502/client_write_timeout", reqOutcome: "failed/502"}},
		{"client write failed", &ClientWriteError{Err: errors.New("broken pipe")}, true, nil,
			want{row: "cancelled/499/client_cancelled", reqOutcome: "cancelled/499"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := Classify(tt.err, tt.committed, tt.ended)
			got := want{row: fmt.Sprintf("%s/%d/%s", f.Status, f.Code, f.ErrorType), scope: f.Scope, health: f.Health,
				failover: f.Failover, timeout: f.Timeout, capacity: f.Capacity, retryAfter: f.RetryAfter, watchdog: f.Watchdog}
			if !f.Failover {
				got.reqOutcome = fmt.Sprintf("%s/%d", f.RequestStatus, f.RequestCode)
			}
			if got != tt.want {
				t.Errorf("Classify(%v, committed=%v, ended=%v)\n got %+v\nwant %+v", tt.err, tt.committed, tt.ended, got, tt.want)
			}
			if f.Health && f.Scope == ScopeNone {
				t.Error("a failure that counts for health must blame the key or the provider")
			}
			if (f.Relay != nil) != (f.Code == 400 || f.Code == 413 || f.Code == 422) {
				t.Errorf("relay %v for %d", f.Relay, f.Code)
			}
			if f.Code == http.StatusOK {
				t.Error("a failure with status 200")
			}
		})
	}
}
