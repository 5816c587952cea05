package anthropicclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// RequestError is a Messages request the translation refuses: invalid,
// incomplete, or asking for something chat completions cannot express. The
// handler answers it with 400 and ErrorBody. Param names the field the way
// the Anthropic API does ("max_tokens", "messages.2.content.0.source.type");
// Message never quotes the client's content.
type RequestError struct {
	Param   string
	Message string
}

func (e *RequestError) Error() string {
	if e.Param == "" {
		return e.Message
	}
	return e.Param + ": " + e.Message
}

func reqErr(param, format string, args ...any) *RequestError {
	return &RequestError{Param: param, Message: fmt.Sprintf(format, args...)}
}

// ErrBadResponse marks a provider answer the translation cannot turn into an
// Anthropic message: not JSON, no choices, a stream chunk of the wrong shape.
// It is the provider's fault (a protocol error), not the client's.
var ErrBadResponse = errors.New("malformed chat completion from provider")

// ProviderError is an error object a provider sent where a completion
// belonged: a stream chunk {"error":{...}} after a 200, or a 200 body that is
// an error. Message is the provider's text, kept for the client's error event
// and deliberately left out of Error(): a provider message may echo request
// content or a masked key, and Error() ends up in logs.
type ProviderError struct {
	Type    string // the provider's error type, e.g. "server_error"; may be ""
	Code    string // the provider's code, string or number as text; may be ""
	Message string
}

func (e *ProviderError) Error() string {
	return fmt.Sprintf("provider sent an error object (type %q, code %q)", e.Type, e.Code)
}

// Status guesses the HTTP status the provider's error stands for, so the
// handler can pick the Anthropic error type for the event: a numeric code in
// 400..599 is taken as the status, a type or code naming a rate limit is 429,
// an overload 529, an invalid request 400; anything else is 502.
func (e *ProviderError) Status() int {
	if n, err := strconv.Atoi(e.Code); err == nil && n >= 400 && n <= 599 {
		return n
	}
	kind := strings.ToLower(e.Type + " " + e.Code)
	switch {
	case strings.Contains(kind, "rate_limit"):
		return http.StatusTooManyRequests
	case strings.Contains(kind, "overloaded"):
		return 529
	case strings.Contains(kind, "invalid_request"):
		return http.StatusBadRequest
	}
	return http.StatusBadGateway
}

// providerError reads an OpenAI-style error value: an object with message,
// type and code, or a bare string.
func providerError(v []byte) *ProviderError {
	var obj struct {
		Message json.RawMessage `json:"message"`
		Type    json.RawMessage `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	if isString(v) {
		return &ProviderError{Message: unquote(v)}
	}
	if json.Unmarshal(v, &obj) != nil {
		return &ProviderError{}
	}
	return &ProviderError{Type: text(obj.Type), Code: text(obj.Code), Message: text(obj.Message)}
}

// text renders a scalar JSON value as text: strings decoded, numbers as
// written, anything else "".
func text(v json.RawMessage) string {
	switch {
	case isString(v):
		return unquote(v)
	case len(v) > 0 && (v[0] == '-' || (v[0] >= '0' && v[0] <= '9')):
		return string(v)
	}
	return ""
}

// ErrorType is the Anthropic error type for an HTTP status, following the
// Anthropic API's table: 400 (and any 4xx without its own type)
// invalid_request_error, 401 authentication_error, 402 billing_error, 403
// permission_error, 404 not_found_error, 413 request_too_large, 429
// rate_limit_error, 504 timeout_error, 503 and 529 overloaded_error (the
// gateway's 503 means no provider has capacity, which is what
// overloaded_error tells an SDK), and every other status, 499 and 502
// included, api_error.
func ErrorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusPaymentRequired:
		return "billing_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	case http.StatusServiceUnavailable, 529:
		return "overloaded_error"
	}
	if status >= 400 && status < 499 {
		return "invalid_request_error"
	}
	return "api_error"
}

// ErrorBody is the Anthropic error document for status:
// {"type":"error","error":{"type":T,"message":M}}.
func ErrorBody(status int, message string) []byte {
	return appendError(make([]byte, 0, 64+len(message)), status, message)
}

func appendError(dst []byte, status int, message string) []byte {
	dst = append(dst, `{"type":"error","error":{"type":`...)
	dst = appendString(dst, ErrorType(status))
	dst = append(dst, `,"message":`...)
	dst = appendString(dst, message)
	return append(dst, "}}"...)
}

// ErrorEvent appends the SSE form of ErrorBody, "event: error", for a stream
// that fails after its first event was sent and can no longer change status.
func ErrorEvent(dst []byte, status int, message string) []byte {
	dst = append(dst, "event: error\ndata: "...)
	dst = appendError(dst, status, message)
	return append(dst, "\n\n"...)
}

// ErrorFromOpenAI converts a provider's error answer, relayed to the client
// (a 400 that any provider would give the same body), into the Anthropic
// shape, keeping the provider's message. It reads {"error":{"message":..}},
// {"error":".."}, {"message":..} and FastAPI's {"detail":".."}; a body with
// none of them gets the status text, since an unrecognised body may be an
// HTML page not worth showing.
func ErrorFromOpenAI(status int, body []byte) []byte {
	msg := ""
	var doc struct {
		Error   json.RawMessage `json:"error"`
		Message json.RawMessage `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &doc) == nil {
		switch {
		case !isNull(doc.Error):
			msg = providerError(doc.Error).Message
		case isString(doc.Message):
			msg = unquote(doc.Message)
		case isString(doc.Detail):
			msg = unquote(doc.Detail)
		}
	}
	if msg == "" {
		msg = http.StatusText(status)
		if msg == "" {
			msg = "upstream error " + strconv.Itoa(status)
		}
	}
	return ErrorBody(status, msg)
}
