package gemini

import (
	"encoding/json"
	"errors"
	"testing"
	"time"
)

type errorCase struct {
	Name       string          `json:"name"`
	Source     string          `json:"source"`
	HTTPStatus int             `json:"http_status"`
	Body       json.RawMessage `json:"body"`
	NotError   bool            `json:"not_error"`
	Want       struct {
		HTTPStatus   int    `json:"http_status"`
		Status       string `json:"status"`
		Reason       string `json:"reason"`
		RetryDelayMS int64  `json:"retry_delay_ms"`
		Class        string `json:"class"`
		OpenAIType   string `json:"openai_type"`
	} `json:"want"`
}

// TestParseError runs testdata/errors.json: each Gemini error body is read
// into the status, reason and retry delay, and classed as the client's
// fault, the key's, or the provider's (retryable elsewhere).
func TestParseError(t *testing.T) {
	for _, tc := range loadJSON[[]errorCase](t, "errors.json") {
		t.Run(tc.Name, func(t *testing.T) {
			if tc.Source == "" {
				t.Fatal("fixture without a source")
			}
			e, ok := ParseError(tc.HTTPStatus, tc.Body)
			if ok == tc.NotError {
				t.Fatalf("ok = %v", ok)
			}
			if !ok {
				return
			}
			w := tc.Want
			if e.HTTPStatus != w.HTTPStatus || e.Status != w.Status || e.Reason != w.Reason ||
				e.RetryDelay != time.Duration(w.RetryDelayMS)*time.Millisecond || e.OpenAIErrorType() != w.OpenAIType {
				t.Fatalf("got %+v (type %s), want %+v", e, e.OpenAIErrorType(), w)
			}
			class := map[bool]string{true: "client"}[e.ClientFault()] + map[bool]string{true: "key"}[e.KeyScoped()] +
				map[bool]string{true: "retry"}[e.Retryable()]
			if class != w.Class {
				t.Fatalf("class %q, want %q", class, w.Class)
			}
			if ErrorStatus(e.Status) != e.HTTPStatus {
				t.Fatalf("ErrorStatus(%s) = %d, the fixture came with %d", e.Status, ErrorStatus(e.Status), e.HTTPStatus)
			}
		})
	}
}

// TestErrorInStream: an error object inside a 200 stream carries the
// status from its code, and errors.As finds it.
func TestErrorInStream(t *testing.T) {
	tr := NewStreamTranslator("m", 1, false)
	_, err := tr.Event(nil, nil, []byte(`{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED",
		"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"2s"}]}}`))
	var e *Error
	if !errors.As(err, &e) || e.HTTPStatus != 429 || e.RetryDelay != 2*time.Second || !e.KeyScoped() {
		t.Fatalf("err = %#v", err)
	}
	// A code that is no HTTP error status falls back to the status name's.
	e, ok := ParseError(0, []byte(`{"error":{"code":8,"status":"RESOURCE_EXHAUSTED"}}`))
	if !ok || e.HTTPStatus != 429 {
		t.Fatalf("%+v %v", e, ok)
	}
	if ErrorStatus("SOMETHING_NEW") != 502 || (&Error{Status: "SOMETHING_NEW"}).OpenAIErrorType() != "upstream_error" {
		t.Fatal("unknown status")
	}
}
