package candidates

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/upstream"
	"github.com/llmgw/gateway/internal/watchdog"
)

// TestRetryKind is the retry policy in one table: what Classify makes of
// an attempt's error decides whether the same candidate is retried after
// the backoff (soon), after its Retry-After as a last resort (later), or
// not at all.
func TestRetryKind(t *testing.T) {
	rt := Retry{Attempts: 1, Backoff: 250 * time.Millisecond, MaxWait: 5 * time.Second}
	status := func(code int, after time.Duration) error { return &upstream.StatusError{Code: code, RetryAfter: after} }
	broken := errors.New("connection reset by peer")
	for _, tt := range []struct {
		name        string
		err         error
		committed   bool
		ended       error
		rt          Retry
		soon, later bool
	}{
		{"500", status(500, 0), false, nil, rt, true, false},
		{"502", status(502, 0), false, nil, rt, true, false},
		{"529 overloaded", status(529, 0), false, nil, rt, true, false},
		{"503 without Retry-After", status(503, 0), false, nil, rt, true, false},
		{"503 Retry-After within max_wait", status(503, time.Second), false, nil, rt, false, true},
		{"503 Retry-After beyond max_wait", status(503, 6*time.Second), false, nil, rt, false, false},
		{"429 Retry-After within max_wait", status(429, 5*time.Second), false, nil, rt, false, true},
		{"429 Retry-After beyond max_wait", status(429, time.Minute), false, nil, rt, false, false},
		{"429 without Retry-After", status(429, 0), false, nil, rt, false, false},
		{"504", status(504, 0), false, nil, rt, false, false},
		{"408", status(408, 0), false, nil, rt, false, false},
		{"401", status(401, 0), false, nil, rt, false, false},
		{"403", status(403, 0), false, nil, rt, false, false},
		{"400 relayed", status(400, 0), false, nil, rt, false, false},
		{"404", status(404, 0), false, nil, rt, false, false},
		{"connect error", &upstream.ConnectError{Provider: "a", Err: broken}, false, nil, rt, true, false},
		{"protocol error", &upstream.ProtocolError{Err: broken}, false, nil, rt, true, false},
		{"stream cut before commit", &StreamCutError{Err: broken}, false, nil, rt, true, false},
		{"stream idle before commit", &StreamCutError{Err: watchdog.ErrIdleTimeout}, false, nil, rt, false, false},
		{"error event", &StreamErrorObject{Data: `{"error":{}}`}, false, nil, rt, false, false},
		{"first-byte timeout", watchdog.ErrFirstByteTimeout, false, nil, rt, false, false},
		{"total timeout", upstream.ErrTotalTimeout, false, nil, rt, false, false},
		{"admission timeout", &AdmissionError{Err: &admission.TimeoutError{Gate: admission.TargetGate, Budget: time.Second}}, false, nil, rt, false, false},
		{"queue full", &AdmissionError{Err: admission.ErrQueueFull}, false, nil, rt, false, false},
		{"after commit", fmt.Errorf("read: %w", broken), true, nil, rt, false, false},
		{"client gone", context.Canceled, false, context.Canceled, rt, false, false},
		{"deadline", context.DeadlineExceeded, false, ErrDeadline, rt, false, false},
		{"attempts 0", status(500, 0), false, nil, Retry{Backoff: time.Second, MaxWait: time.Second}, false, false},
		{"max_wait 0", status(429, time.Second), false, nil, Retry{Attempts: 1}, false, false},
	} {
		soon, later := retryKind(Classify(tt.err, tt.committed, tt.ended), tt.rt)
		if soon != tt.soon || later != tt.later {
			t.Errorf("%s: soon %v later %v, want %v %v", tt.name, soon, later, tt.soon, tt.later)
		}
	}
}
