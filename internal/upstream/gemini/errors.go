package gemini

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// FieldError is a chat completions (or embeddings) request this translation
// refuses: a field the Gemini API cannot honour, or a value it cannot carry.
// Param names the field as a JSON path ("n",
// "messages[2].tool_calls[0].function.arguments"), "" for the body as a
// whole; the gateway answers 400 invalid_request_error naming it. A
// FieldError blames the request for this provider only: a provider speaking
// the OpenAI format may still serve it.
type FieldError struct {
	Param   string
	Message string
}

func (e *FieldError) Error() string {
	if e.Param == "" {
		return e.Message
	}
	return e.Param + ": " + e.Message
}

// ErrMalformed is wrapped by every error about provider bytes that are not
// the Gemini API: a body or stream event that is not the JSON it must be.
// The gateway treats it as a protocol error of the provider.
var ErrMalformed = errors.New("gemini: malformed provider answer")

// ErrIncomplete is returned by StreamTranslator.End for a stream that ended
// before any chunk carried a finishReason: Gemini has no terminal event, so
// a body cut mid-answer looks like an early end of file.
var ErrIncomplete = errors.New("gemini: stream ended before a finishReason")

// BlockedError is a prompt Gemini refused to answer:
// promptFeedback.blockReason (SAFETY, OTHER, BLOCKLIST, PROHIBITED_CONTENT,
// IMAGE_SAFETY) with no candidate. It blames the request's content, so the
// gateway answers 400 and fails over nowhere: another Gemini key would block
// it too.
type BlockedError struct {
	Reason  string // blockReason, e.g. "SAFETY"
	Message string // blockReasonMessage, when Gemini gives one
}

func (e *BlockedError) Error() string {
	s := "gemini blocked the prompt: " + e.Reason
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Error is a Gemini API error, {"error":{"code":429,"message":"...",
// "status":"RESOURCE_EXHAUSTED","details":[...]}}, whether it came as an
// HTTP error body (ParseError) or as an event inside a stream that had
// already answered 200 (StreamTranslator.Event). Message is the provider's
// text, relayed as is; Gemini never echoes the API key in it.
type Error struct {
	// HTTPStatus is the status the error came with: the response's, or for
	// a stream event the body's "code" (the status Gemini would have
	// answered with), else ErrorStatus(Status).
	HTTPStatus int
	Status     string // google.rpc.Code name, e.g. "INVALID_ARGUMENT"
	Message    string
	// Reason is the google.rpc.ErrorInfo reason when the details carry one,
	// e.g. "API_KEY_INVALID" (which Gemini sends as a 400
	// INVALID_ARGUMENT).
	Reason string
	// RetryDelay is google.rpc.RetryInfo's retryDelay ("37s"), 0 without
	// one: Gemini sends it with RESOURCE_EXHAUSTED.
	RetryDelay time.Duration
}

func (e *Error) Error() string {
	return "gemini error " + strconv.Itoa(e.HTTPStatus) + " " + e.Status + ": " + e.Message
}

// ClientFault reports whether the error is relayed to the client without
// failover: INVALID_ARGUMENT, OUT_OF_RANGE and FAILED_PRECONDITION (the
// provider contract, docs/formats.md), unless the reason says the key is
// bad.
func (e *Error) ClientFault() bool {
	switch e.Status {
	case "INVALID_ARGUMENT", "OUT_OF_RANGE", "FAILED_PRECONDITION":
		return !e.KeyScoped()
	}
	return false
}

// KeyScoped reports whether the error belongs to the API key or its project
// (bad, forbidden, out of quota), so the provider's other keys remain worth
// trying.
func (e *Error) KeyScoped() bool {
	if strings.HasPrefix(e.Reason, "API_KEY_") {
		return true
	}
	switch e.Status {
	case "UNAUTHENTICATED", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED":
		return true
	}
	return false
}

// Retryable reports whether the error is the provider's own, so another
// attempt elsewhere may succeed: UNAVAILABLE, INTERNAL, DEADLINE_EXCEEDED,
// NOT_FOUND (the model is missing here, perhaps not elsewhere) and any
// status this package does not know.
func (e *Error) Retryable() bool { return !e.ClientFault() && !e.KeyScoped() }

// ErrorStatus maps a google.rpc.Code name to the HTTP status Google's APIs
// use for it (https://cloud.google.com/apis/design/errors#handling_errors).
// An unknown status is a provider failure: 502.
func ErrorStatus(status string) int {
	switch status {
	case "INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE":
		return http.StatusBadRequest
	case "UNAUTHENTICATED":
		return http.StatusUnauthorized
	case "PERMISSION_DENIED":
		return http.StatusForbidden
	case "NOT_FOUND":
		return http.StatusNotFound
	case "ABORTED", "ALREADY_EXISTS":
		return http.StatusConflict
	case "RESOURCE_EXHAUSTED":
		return http.StatusTooManyRequests
	case "CANCELLED":
		return 499
	case "INTERNAL", "UNKNOWN", "DATA_LOSS":
		return http.StatusInternalServerError
	case "UNIMPLEMENTED":
		return http.StatusNotImplemented
	case "UNAVAILABLE":
		return http.StatusServiceUnavailable
	case "DEADLINE_EXCEEDED":
		return http.StatusGatewayTimeout
	}
	return http.StatusBadGateway
}

// OpenAIErrorType is the OpenAI error "type" a client should see when the
// gateway relays e.
//
//	API_KEY_* reasons, UNAUTHENTICATED  → authentication_error
//	PERMISSION_DENIED                   → permission_error
//	RESOURCE_EXHAUSTED                  → rate_limit_error
//	FAILED_PRECONDITION                 → insufficient_quota (billing, region)
//	INVALID_ARGUMENT, OUT_OF_RANGE, NOT_FOUND → invalid_request_error
//	INTERNAL, UNKNOWN, UNAVAILABLE, DEADLINE_EXCEEDED → server_error
//	anything else                       → upstream_error
func (e *Error) OpenAIErrorType() string {
	if strings.HasPrefix(e.Reason, "API_KEY_") {
		return "authentication_error"
	}
	switch e.Status {
	case "UNAUTHENTICATED":
		return "authentication_error"
	case "PERMISSION_DENIED":
		return "permission_error"
	case "RESOURCE_EXHAUSTED":
		return "rate_limit_error"
	case "FAILED_PRECONDITION":
		return "insufficient_quota"
	case "INVALID_ARGUMENT", "OUT_OF_RANGE", "NOT_FOUND":
		return "invalid_request_error"
	case "INTERNAL", "UNKNOWN", "UNAVAILABLE", "DEADLINE_EXCEEDED":
		return "server_error"
	}
	return "upstream_error"
}

type errorBody struct {
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
		Details []struct {
			Type       string `json:"@type"`
			Reason     string `json:"reason"`
			RetryDelay string `json:"retryDelay"`
		} `json:"details"`
	} `json:"error"`
}

// ParseError reads a Gemini error body answered with httpStatus. The body
// is {"error":{...}}, or that object inside a one-element array, as
// streamGenerateContent without alt=sse answers. ok is false when body is
// not a Gemini error (no error object, or neither a status nor a code).
func ParseError(httpStatus int, body []byte) (*Error, bool) {
	var v errorBody
	if json.Unmarshal(body, &v) != nil {
		var arr []errorBody
		if json.Unmarshal(body, &arr) != nil || len(arr) != 1 {
			return nil, false
		}
		v = arr[0]
	}
	return fromBody(v, httpStatus)
}

func fromBody(v errorBody, httpStatus int) (*Error, bool) {
	if v.Error == nil || (v.Error.Status == "" && v.Error.Code == 0) {
		return nil, false
	}
	e := &Error{HTTPStatus: httpStatus, Status: v.Error.Status, Message: v.Error.Message}
	if e.HTTPStatus == 0 {
		e.HTTPStatus = v.Error.Code
	}
	if e.HTTPStatus < 400 || e.HTTPStatus > 599 {
		e.HTTPStatus = ErrorStatus(e.Status)
	}
	for _, d := range v.Error.Details {
		switch {
		case strings.HasSuffix(d.Type, "google.rpc.ErrorInfo"):
			e.Reason = d.Reason
		case strings.HasSuffix(d.Type, "google.rpc.RetryInfo"):
			// A google.protobuf.Duration in JSON: decimal seconds, "s" suffix.
			if s, ok := strings.CutSuffix(d.RetryDelay, "s"); ok {
				if f, err := strconv.ParseFloat(s, 64); err == nil && f >= 0 && f < 1e6 {
					e.RetryDelay = time.Duration(f * float64(time.Second))
				}
			}
		}
	}
	return e, true
}
