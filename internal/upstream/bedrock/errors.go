package bedrock

import (
	"encoding/json"
	"errors"
	"strings"
)

// FieldError is a chat request this translation refuses: a field Converse
// cannot honour. Param names the field as a JSON path, "" for the body as
// a whole. It blames the request for this provider only.
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
// the Converse API: a body or stream event that is not the JSON it must be.
var ErrMalformed = errors.New("bedrock: malformed provider answer")

// ErrIncomplete is returned by StreamTranslator.End for a stream that
// ended before its messageStop event: a cut, never a clean end.
var ErrIncomplete = errors.New("bedrock: stream ended before messageStop")

// Error is a Bedrock error: an HTTP error answer's type and message, or an
// exception frame of a stream. Type is the exception's name as the API
// reference spells it ("ThrottlingException"), without the namespace or
// the URL AWS may append.
type Error struct {
	Type    string
	Message string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return "bedrock: " + e.Type
	}
	return "bedrock: " + e.Type + ": " + e.Message
}

// The exception types whose meaning the gateway acts on
// (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html#API_runtime_Converse_Errors).
const (
	TypeValidation         = "ValidationException"
	TypeThrottling         = "ThrottlingException"
	TypeAccessDenied       = "AccessDeniedException"
	TypeUnrecognizedClient = "UnrecognizedClientException"
	TypeModelStream        = "ModelStreamErrorException"
	TypeModelError         = "ModelErrorException"
	TypeModelNotReady      = "ModelNotReadyException"
	TypeModelTimeout       = "ModelTimeoutException"
	TypeServiceUnavailable = "ServiceUnavailableException"
	TypeInternalServer     = "InternalServerException"
)

// KeyScoped reports whether the error blames the credentials rather than
// the request or the model: they are refused, or their account's request
// rate is spent.
func (e *Error) KeyScoped() bool {
	switch e.Type {
	case TypeThrottling, TypeAccessDenied, TypeUnrecognizedClient, "ExpiredTokenException",
		"InvalidSignatureException", "IncompleteSignatureException", "MissingAuthenticationTokenException":
		return true
	}
	return false
}

// ModelFault reports whether the model failed the request (its own error,
// its stream broke), whatever status carried it: AWS answers these 424,
// which is no client fault.
func (e *Error) ModelFault() bool { return e.Type == TypeModelStream || e.Type == TypeModelError }

// TooLong reports whether a ValidationException refuses the request for
// its size only: the prompt exceeds the model's context window, which
// another model may have larger. The message is Bedrock's only signal.
func (e *Error) TooLong() bool {
	if e.Type != TypeValidation {
		return false
	}
	m := strings.ToLower(e.Message)
	return strings.Contains(m, "too long") || strings.Contains(m, "too many input tokens") ||
		strings.Contains(m, "exceeds the maximum") || strings.Contains(m, "context length")
}

// OpenAIErrorType is the OpenAI error type a relayed error is given.
func (e *Error) OpenAIErrorType() string {
	switch e.Type {
	case TypeThrottling:
		return "rate_limit_error"
	case TypeAccessDenied, TypeUnrecognizedClient:
		return "authentication_error"
	case TypeValidation, "ResourceNotFoundException":
		return "invalid_request_error"
	}
	return "api_error"
}

// TypeName reduces an error type as AWS writes it to the exception's name:
// the x-amzn-ErrorType header's "ValidationException:http://internal...",
// the body's "com.amazonaws.bedrock#ValidationException", or a stream's
// union member "throttlingException".
func TypeName(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, ':'); i >= 0 {
		s = s[:i]
	}
	if i := strings.LastIndexByte(s, '#'); i >= 0 {
		s = s[i+1:]
	}
	if s != "" && s[0] >= 'a' && s[0] <= 'z' {
		s = string(s[0]-'a'+'A') + s[1:]
	}
	return s
}

// ParseError reads an error answer: its type from the x-amzn-ErrorType
// header value (typeHeader) or else the body's __type, its message from
// the body's message (or Message). ok is false when neither names a type.
func ParseError(typeHeader string, body []byte) (*Error, bool) {
	var v struct {
		Type     string `json:"__type"`
		Message  string `json:"message"`
		MessageC string `json:"Message"`
	}
	_ = json.Unmarshal(body, &v) // a body that is not JSON may still have a typed header
	e := &Error{Type: TypeName(typeHeader), Message: v.Message}
	if e.Type == "" {
		e.Type = TypeName(v.Type)
	}
	if e.Message == "" {
		e.Message = v.MessageC
	}
	return e, e.Type != ""
}
