package anthropic

import (
	"encoding/json"
	"testing"
)

type errorCase struct {
	Body       json.RawMessage `json:"body"`
	Type       string          `json:"type"`
	Message    string          `json:"message"`
	Status     int             `json:"status"`
	OpenAIType string          `json:"openai_type"`
	OK         *bool           `json:"ok"`
}

// TestParseError reads every documented error type from testdata/errors.json
// and checks the status and OpenAI type each one maps to.
func TestParseError(t *testing.T) {
	for _, tc := range loadJSON[[]errorCase](t, "errors.json") {
		body := []byte(tc.Body)
		var raw string
		if json.Unmarshal(tc.Body, &raw) == nil {
			body = []byte(raw) // a body that is not JSON at all
		}
		typ, msg, ok := ParseError(body)
		wantOK := tc.OK == nil || *tc.OK
		if ok != wantOK {
			t.Errorf("ParseError(%s) ok = %v, want %v", body, ok, wantOK)
			continue
		}
		if !ok {
			continue
		}
		if typ != tc.Type || msg != tc.Message {
			t.Errorf("ParseError(%s) = %q, %q; want %q, %q", body, typ, msg, tc.Type, tc.Message)
		}
		if got := ErrorStatus(typ); got != tc.Status {
			t.Errorf("ErrorStatus(%q) = %d, want %d", typ, got, tc.Status)
		}
		if got := OpenAIErrorType(typ); got != tc.OpenAIType {
			t.Errorf("OpenAIErrorType(%q) = %q, want %q", typ, got, tc.OpenAIType)
		}
	}
}

// TestStreamErrorClassification: the gateway fails over on Retryable, tries
// another key on KeyScoped and relays ClientFault; each type is exactly one.
func TestStreamErrorClassification(t *testing.T) {
	tests := []struct {
		typ                          string
		retryable, keyScoped, client bool
	}{
		{"overloaded_error", true, false, false},
		{"api_error", true, false, false},
		{"timeout_error", true, false, false},
		{"not_found_error", true, false, false},
		{"unknown_future_error", true, false, false},
		{"rate_limit_error", false, true, false},
		{"authentication_error", false, true, false},
		{"permission_error", false, true, false},
		{"billing_error", false, true, false},
		{"invalid_request_error", false, false, true},
		{"request_too_large", false, false, true},
	}
	for _, tt := range tests {
		e := &StreamError{Type: tt.typ, Message: "m"}
		if e.Retryable() != tt.retryable || e.KeyScoped() != tt.keyScoped || e.ClientFault() != tt.client {
			t.Errorf("%s: Retryable %v KeyScoped %v ClientFault %v; want %v %v %v", tt.typ,
				e.Retryable(), e.KeyScoped(), e.ClientFault(), tt.retryable, tt.keyScoped, tt.client)
		}
		if e.Status() != ErrorStatus(tt.typ) {
			t.Errorf("%s: Status %d", tt.typ, e.Status())
		}
	}
}
