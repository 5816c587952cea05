package anthropic

import (
	"encoding/json"
	"errors"
	"net/http"
)

// FieldError is a chat completions request this translation refuses: a field
// the Messages API cannot honour, or a value it cannot carry. Param names the
// field as a JSON path ("n", "messages[2].tool_calls[0].function.arguments"),
// "" for the body as a whole; the gateway answers 400 invalid_request_error
// naming it. A FieldError blames the request for this provider only: a
// provider speaking the OpenAI format may still serve it.
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
// the Messages API: a response body or stream event that is not the JSON it
// must be, or events out of order. The gateway treats it as a protocol error
// of the provider.
var ErrMalformed = errors.New("anthropic: malformed provider answer")

// StreamError is an `event: error` inside a stream that already answered
// 200, such as {"type":"error","error":{"type":"overloaded_error",...}}.
// Message is the provider's text, relayed as is; it never holds credentials.
type StreamError struct {
	Type    string // Anthropic error type, e.g. "overloaded_error"
	Message string
}

func (e *StreamError) Error() string {
	return "anthropic stream error " + e.Type + ": " + e.Message
}

// Status is the HTTP status the provider would have answered with, had the
// error come before the stream began (ErrorStatus).
func (e *StreamError) Status() int { return ErrorStatus(e.Type) }

// ClientFault reports whether the error blames the request, so another
// provider would refuse it too.
func (e *StreamError) ClientFault() bool { return clientFault(e.Type) }

// KeyScoped reports whether the error belongs to the API key (bad, unpaid,
// forbidden, rate-limited), so the provider's other keys remain worth trying.
func (e *StreamError) KeyScoped() bool { return keyScoped(e.Type) }

// Retryable reports whether the error is the provider's own, so another
// attempt at another provider may succeed: overloaded_error, api_error,
// timeout_error, not_found_error (the model is missing here, perhaps not
// elsewhere) and any type this package does not know. Key-scoped and client
// errors are not: see KeyScoped and ClientFault.
func (e *StreamError) Retryable() bool { return !clientFault(e.Type) && !keyScoped(e.Type) }

func clientFault(t string) bool {
	return t == "invalid_request_error" || t == "request_too_large"
}

func keyScoped(t string) bool {
	switch t {
	case "authentication_error", "permission_error", "billing_error", "rate_limit_error":
		return true
	}
	return false
}

// ErrorStatus maps an Anthropic error type to the HTTP status Anthropic uses
// for it. An unknown type is a provider failure: 502.
//
//	invalid_request_error  400    authentication_error  401
//	billing_error          402    permission_error      403
//	not_found_error        404    request_too_large     413
//	rate_limit_error       429    api_error             500
//	timeout_error          504    overloaded_error      529
func ErrorStatus(errType string) int {
	switch errType {
	case "invalid_request_error":
		return http.StatusBadRequest
	case "authentication_error":
		return http.StatusUnauthorized
	case "billing_error":
		return http.StatusPaymentRequired
	case "permission_error":
		return http.StatusForbidden
	case "not_found_error":
		return http.StatusNotFound
	case "request_too_large":
		return http.StatusRequestEntityTooLarge
	case "rate_limit_error":
		return http.StatusTooManyRequests
	case "api_error":
		return http.StatusInternalServerError
	case "timeout_error":
		return http.StatusGatewayTimeout
	case "overloaded_error":
		return 529
	}
	return http.StatusBadGateway
}

// OpenAIErrorType maps an Anthropic error type to the OpenAI error "type" a
// client should see when the gateway relays the error:
//
//	invalid_request_error, not_found_error, request_too_large → invalid_request_error
//	authentication_error → authentication_error
//	permission_error     → permission_error
//	billing_error        → insufficient_quota
//	rate_limit_error     → rate_limit_error
//	api_error, timeout_error, overloaded_error → server_error
//	anything else        → upstream_error
func OpenAIErrorType(errType string) string {
	switch errType {
	case "invalid_request_error", "not_found_error", "request_too_large":
		return "invalid_request_error"
	case "authentication_error", "permission_error", "rate_limit_error":
		return errType
	case "billing_error":
		return "insufficient_quota"
	case "api_error", "timeout_error", "overloaded_error":
		return "server_error"
	}
	return "upstream_error"
}

// ParseError reads an Anthropic error body,
// {"type":"error","error":{"type":"...","message":"..."}}. ok is false when
// body is not one (no error object or an empty error type).
func ParseError(body []byte) (errType, message string, ok bool) {
	var v struct {
		Error *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &v) != nil || v.Error == nil || v.Error.Type == "" {
		return "", "", false
	}
	return v.Error.Type, v.Error.Message, true
}
