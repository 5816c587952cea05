package upstream

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ConnectError is a failure to establish a connection to the provider
// (DNS, refused, connect timeout, TLS handshake). Nothing was sent.
type ConnectError struct {
	Provider string
	Err      error
	// Dial: the provider was not reached at all (DNS, a refused or timed
	// out dial, a TLS handshake), so every model behind it fails the same.
	// False for a connection that broke after it was made (a reset).
	Dial bool
}

func (e *ConnectError) Error() string { return fmt.Sprintf("connect to %s: %v", e.Provider, e.Err) }
func (e *ConnectError) Unwrap() error { return e.Err }

// StatusError is a non-2xx answer from the provider. Body holds at most
// maxErrorBody bytes of it, for relaying (400/413/422) and for records.
type StatusError struct {
	Code       int
	RetryAfter time.Duration // from Retry-After; 0 when absent
	Header     http.Header   // upstream headers, already filtered for the client
	Body       []byte
	// ClientChosen: the request carried a header value the client chose
	// (a beta flag, a header the routes file's forward_headers allows), so
	// a key-scoped refusal may be the header's doing rather than the key's.
	ClientChosen bool
	// KeyWide: a 429 that speaks for the whole key (keyWide), not for
	// one model.
	KeyWide bool
	// KeyFault: the provider blamed the key in a status that does not say
	// so, as Gemini answers a bad key 400 API_KEY_INVALID. Such an answer
	// is no client fault: it is classified like a 401, so the provider's
	// other keys are tried.
	KeyFault bool
	// ModelFault: the provider blamed the model in a status that does not
	// say so, as Bedrock answers a model's failure 424
	// ModelStreamErrorException: counted for its health like a 5xx.
	ModelFault bool
	// TooLong: the provider refused the request for its size only, in a
	// body ContextLength cannot read (Bedrock's ValidationException "Input
	// is too long for requested model").
	TooLong bool
}

func (e *StatusError) Error() string { return fmt.Sprintf("upstream answered %d", e.Code) }

// ClientFault reports whether the answer blames the request itself, so it is
// relayed to the client instead of failing over: any other provider would
// refuse the same body.
func (e *StatusError) ClientFault() bool {
	return !e.KeyFault && (e.Code == http.StatusBadRequest || e.Code == http.StatusRequestEntityTooLarge || e.Code == http.StatusUnprocessableEntity)
}

// KeyScoped reports whether the failure belongs to the key rather than the
// provider (bad, unpaid, forbidden or rate-limited key), so the provider's other keys
// remain worth trying.
func (e *StatusError) KeyScoped() bool {
	return e.KeyFault || e.Code == http.StatusUnauthorized || e.Code == http.StatusPaymentRequired ||
		e.Code == http.StatusForbidden || e.Code == http.StatusTooManyRequests
}

// ProtocolError is a provider answer the gateway cannot relay: a malformed
// stream, a wrong content type, a body cut short.
type ProtocolError struct{ Err error }

func (e *ProtocolError) Error() string { return "upstream protocol error: " + e.Err.Error() }
func (e *ProtocolError) Unwrap() error { return e.Err }

// ErrTotalTimeout is the cancellation cause when timeouts.total fires.
var ErrTotalTimeout = errors.New("upstream total timeout")

// maxRetryAfter bounds a provider's Retry-After. No wait beyond a day is a
// plan worth following, and the bound keeps an absurd value from overflowing
// Duration: 9223372037 seconds became a negative wait, and a date in year
// 9999 a wait so long that rounding it up to whole seconds for the client
// wrapped around.
const maxRetryAfter = 24 * time.Hour

// parseRetryAfter reads delay-seconds or an HTTP date, as a wait in
// [0, maxRetryAfter]; anything else is no wait.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if strings.Trim(v, "0123456789") == "" {
		// Only digits: delay-seconds. ParseInt fails only past int64.
		s, err := strconv.ParseInt(v, 10, 64)
		if err != nil || s >= int64(maxRetryAfter/time.Second) {
			return maxRetryAfter
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), maxRetryAfter)
	}
	return 0
}
