package upstream

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
)

// What a provider's failure says beyond its status code: whether a
// connection failed before the provider was reached at all (every model
// behind it would fail the same), whether a 429 speaks for the whole key,
// and whether a 400 only says the prompt is too long for this model. The
// classification in package candidates reads these; the rules for what each
// provider writes live here, beside the wire code that reads its answers.

// dialFailure reports whether err is a failure to reach the provider at
// all: DNS, a refused or timed-out dial, a TLS handshake.
func dialFailure(err error) bool {
	var (
		op   *net.OpError
		dns  *net.DNSError
		cert *tls.CertificateVerificationError
		rec  tls.RecordHeaderError
		alrt tls.AlertError
		ua   x509.UnknownAuthorityError
		hn   x509.HostnameError
		ci   x509.CertificateInvalidError
	)
	switch {
	case errors.As(err, &op) && op.Op == "dial", errors.As(err, &dns),
		errors.As(err, &cert), errors.As(err, &rec), errors.As(err, &alrt),
		errors.As(err, &ua), errors.As(err, &hn), errors.As(err, &ci):
		return true
	}
	return false
}

// keyWide reports whether a 429 speaks for the whole key rather than one
// model: OpenAI's x-ratelimit-remaining-requests: 0 on the answer (the key's
// request budget is spent) or its insufficient_quota code (the account's
// credit is). A plain 429 is one model's limit: another model of the same
// key may answer.
func keyWide(h http.Header, body []byte) bool {
	if strings.TrimSpace(h.Get("X-Ratelimit-Remaining-Requests")) == "0" {
		return true
	}
	code, _, _ := errorFields(body)
	return code == "insufficient_quota"
}

// ContextLength reports whether the answer refuses the request only for its
// size: the prompt exceeds this model's context window, or the body exceeds
// the provider's request limit. Another candidate, with a larger window,
// may take it, so such a refusal fails over instead of being relayed:
//
//   - OpenAI: code context_length_exceeded (also string_above_max_length);
//   - Anthropic: invalid_request_error "prompt is too long: ...", and
//     request_too_large (413);
//   - Gemini: INVALID_ARGUMENT "The input token count (...) exceeds the
//     maximum number of tokens allowed (...)";
//   - Bedrock: a ValidationException for the input's size (TooLong, set
//     where the answer was read: bedrockStatus);
//   - any 413.
func (e *StatusError) ContextLength() bool {
	if e.Code == http.StatusRequestEntityTooLarge || e.TooLong {
		return true
	}
	if e.Code != http.StatusBadRequest {
		return false
	}
	code, typ, msg := errorFields(e.Body)
	switch {
	case code == "context_length_exceeded", code == "string_above_max_length", typ == "request_too_large":
		return true
	case typ == "invalid_request_error" && strings.HasPrefix(msg, "prompt is too long"):
		// Anthropic's only signal is its message; its shape is stable.
		return true
	case typ == "" && strings.Contains(msg, "exceeds the maximum number of tokens allowed"):
		// Gemini's, a 400 INVALID_ARGUMENT: "The input token count
		// (1200000) exceeds the maximum number of tokens allowed
		// (1048576)." Its body has no type, so no other format's matches.
		return true
	}
	return false
}

// errorFields reads the error object of an OpenAI ({"error":{"code",
// "type","message"}}) or Anthropic ({"type":"error","error":{"type",
// "message"}}) error body. It runs on failures only.
func errorFields(body []byte) (code, typ, msg string) {
	var v struct {
		Error struct {
			Code    any    `json:"code"` // a string, a number or null
			Type    any    `json:"type"` // OpenAI writes null at times
			Message string `json:"message"`
		} `json:"error"`
	}
	if len(body) == 0 || json.Unmarshal(body, &v) != nil {
		return "", "", ""
	}
	code, _ = v.Error.Code.(string)
	typ, _ = v.Error.Type.(string)
	return code, typ, v.Error.Message
}
