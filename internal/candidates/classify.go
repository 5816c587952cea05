package candidates

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/health"
	"github.com/llmgw/gateway/internal/report"
	"github.com/llmgw/gateway/internal/upstream"
	"github.com/llmgw/gateway/internal/watchdog"
)

// Scope is whom a failure is blamed on: which later candidates of the
// request it skips, and how far it reaches in health.
type Scope uint8

const (
	// ScopeNone: nobody upstream (the client, the gateway, a full gate).
	ScopeNone Scope = iota
	// ScopeKey: the target's key (401, 402, 403, a 429 with a key-wide
	// signal): the provider's other keys remain worth trying; in health it
	// counts for every model of the key.
	ScopeKey
	// ScopeModel: the upstream model on this provider (5xx, 529, a
	// timeout, a cut or broken stream, 404, a 429 without a key-wide
	// signal): later candidates
	// of the same provider and model are skipped, the provider's other
	// models are still tried; in health it counts for this (target, model)
	// alone.
	ScopeModel
	// ScopeTransport: the provider cannot be reached (DNS, refused, TLS):
	// every later candidate of the provider is skipped, and it counts for
	// every (target, model) of the provider.
	ScopeTransport
)

// healthScope is how far a counted failure of scope s reaches in health.
func (s Scope) healthScope() health.Scope {
	switch s {
	case ScopeKey:
		return health.ScopeKey
	case ScopeTransport:
		return health.ScopeProvider
	}
	return health.ScopeModel
}

// Failure is what one failed attempt means. Classify is the only place these
// rules live: the attempt loop (failover, the request's outcome), the
// records and provider health all read the same Failure.
type Failure struct {
	Status     string // the candidate's status: failed or cancelled
	Code       int    // the candidate's status_code
	ErrorType  string // the record's error_type
	Message    string // the record's error_message
	Scope      Scope
	Health     bool // counts against the target's health
	Failover   bool // the next candidate may be tried
	Timeout    bool // a timeout: the request answers 504 if every candidate fails
	Capacity   bool // admission or an upstream 429: 429 if every candidate fails this way
	Auth       bool // a 401 or 403: the key was refused
	RetryAfter time.Duration
	Watchdog   string // "first_byte", "idle" or "total" when a deadline fired

	// When Failover is false the request ends here, with this status and
	// code, answering (before commit) with Reply or by relaying Relay.
	RequestStatus string
	RequestCode   int
	Reply         string // the client-facing message
	ReplyCode     string // the client-facing error code, when not the default for the status
	Relay         *upstream.StatusError
}

// Classify turns the error of one attempt into a Failure. committed reports
// whether bytes of this attempt reached the client; ended is the request
// context's cause when it has ended, else nil. It is pure: the same inputs
// always give the same Failure.
//
// What the upstream did comes first. The request context decides only when
// the attempt ended because the context did (the executor turns such errors
// into the context's cause): a client that hangs up on a cut stream's error
// event must not turn the provider's failure into a client cancel.
func Classify(err error, committed bool, ended error) Failure {
	var (
		ae  *AdmissionError
		cwe *ClientWriteError
		se  *upstream.StatusError
		ce  *upstream.ConnectError
		te  *upstream.TokenError
		cut *StreamCutError
		obj *StreamErrorObject
		ref *RefusedError
	)
	switch {
	case errors.As(err, &ref):
		// The gateway refused to translate the request for this provider:
		// like a provider's 400, every provider of the format would.
		f := Failure{Status: report.CandidateFailed, Code: http.StatusBadRequest, ErrorType: ErrorTypeTranslationRefused,
			Message: ref.Error(), RequestStatus: report.RequestFailed, RequestCode: http.StatusBadRequest, Relay: ref.Reply}
		return f
	case ended != nil && errors.Is(ended, ErrDeadline) && (errors.Is(err, ErrDeadline) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)):
		return deadlineFailure()
	case errors.As(err, &ae):
		return admissionFailure(ae.Err)
	case errors.As(err, &cwe):
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// A client that stopped reading cut the stream.
			return stop(report.CandidateFailed, http.StatusBadGateway, report.ErrorTypeClientWriteTimeout, err.Error(), report.RequestFailed)
		}
		return stop(report.CandidateCancelled, 499, report.ErrorTypeClientCancelled, err.Error(), report.RequestCancelled)
	case ended != nil && (errors.Is(err, context.Canceled) || errors.Is(err, ErrShutdown)):
		return contextEnded(ended, committed)
	case committed:
		// Bytes reached the client: no failover is possible any more.
		f := stop(report.CandidateFailed, http.StatusBadGateway, report.ErrorTypeStreamInterrupted, err.Error(), report.RequestFailed)
		switch {
		case errors.Is(err, watchdog.ErrIdleTimeout):
			f.Watchdog = "idle"
		case errors.Is(err, upstream.ErrTotalTimeout):
			f.Watchdog = "total"
		}
		return f
	case errors.Is(err, health.ErrCooling):
		// Others found the target failing while this attempt waited for its
		// first event: the gateway gave up on it. Not a verdict of its own.
		return Failure{Status: report.CandidateCancelled, Code: 499, ErrorType: report.ErrorTypeCoolingDown,
			Message: err.Error(), Failover: true}
	case errors.As(err, &cut):
		f := providerFailure(http.StatusBadGateway, report.ErrorTypeStreamInterrupted, err.Error(), false, "")
		if errors.Is(err, watchdog.ErrIdleTimeout) {
			f.Watchdog = "idle"
		}
		return f
	case errors.As(err, &obj):
		return providerFailure(http.StatusBadGateway, report.ErrorTypeStreamError, obj.Data, false, "")
	case errors.Is(err, watchdog.ErrFirstByteTimeout):
		return providerFailure(http.StatusGatewayTimeout, report.ErrorTypeFirstByteTimeout, err.Error(), true, "first_byte")
	case errors.Is(err, upstream.ErrTotalTimeout):
		return providerFailure(http.StatusGatewayTimeout, report.ErrorTypeUpstreamTimeout, err.Error(), true, "total")
	case errors.As(err, &se):
		return statusFailure(se)
	case errors.As(err, &te):
		// No access token: the provider cannot be called at all, whatever
		// the model, as when its host refuses the dial.
		f := providerFailure(http.StatusBadGateway, report.ErrorTypeUpstreamConnect, err.Error(), false, "")
		f.Scope = ScopeTransport
		return f
	case errors.As(err, &ce):
		var ne net.Error
		// A connect or TLS timeout is a timeout: never retried, and 504
		// if it was the last failure.
		timeout := errors.As(err, &ne) && ne.Timeout()
		f := providerFailure(http.StatusBadGateway, report.ErrorTypeUpstreamConnect, err.Error(), timeout, "")
		if ce.Dial {
			f.Scope = ScopeTransport // no model behind it was reached
		}
		return f
	default: // *upstream.ProtocolError, and anything unforeseen from a provider
		return providerFailure(http.StatusBadGateway, report.ErrorTypeUpstreamProtocol, err.Error(), false, "")
	}
}

// Verdict is what the failure tells the (target, model)'s health.
// Retry-After cools at once only where the health contract honours it: a
// 429 and a 503.
func (f Failure) Verdict() health.Verdict {
	v := health.Verdict{Counts: f.Health, Scope: f.Scope.healthScope(), Auth: f.Auth,
		ErrorType: f.ErrorType, Status: f.Code}
	if f.Health && (f.Code == http.StatusTooManyRequests || f.Code == http.StatusServiceUnavailable) {
		v.RetryAfter = f.RetryAfter
	}
	return v
}

// ErrorTypeTranslationRefused is the error_type of a candidate whose
// provider format cannot express the request (a field with no equivalent).
const ErrorTypeTranslationRefused = "translation_refused"

// RefusedError is a request the candidate's provider format cannot
// express; Reply is the client's 400 in its own format.
type RefusedError struct {
	Err   *upstream.RequestError
	Reply *upstream.StatusError
}

func (e *RefusedError) Error() string {
	if e.Err.Param != "" {
		return "request not translatable: " + e.Err.Param + ": " + e.Err.Message
	}
	return "request not translatable: " + e.Err.Message
}

// StreamCutError is a stream that ended or broke after its first event but
// before its commit point: it fails over invisibly.
type StreamCutError struct{ Err error }

func (e *StreamCutError) Error() string {
	return "stream cut before its commit point: " + e.Err.Error()
}
func (e *StreamCutError) Unwrap() error { return e.Err }

// StreamErrorObject is a stream event carrying an error object
// (data: {"error":...}) before the commit point: it fails over invisibly.
type StreamErrorObject struct{ Data string }

func (e *StreamErrorObject) Error() string { return "error event before the commit point: " + e.Data }

// AdmissionError is a candidate's failure to get its slots. The attempt
// loop wraps what the scheduler returned in it, so Classify never mistakes a
// full gate for a provider failure.
type AdmissionError struct{ Err error }

func (e *AdmissionError) Error() string { return e.Err.Error() }
func (e *AdmissionError) Unwrap() error { return e.Err }

// admissionFailure classifies a failed admission. It never counts for
// health: a full gate says nothing about the provider.
func admissionFailure(err error) Failure {
	var te *admission.TimeoutError
	switch {
	case errors.As(err, &te) && te.Gate == admission.ClientGate:
		// The client's own limit: another candidate would meet the same
		// gate, so the request ends here, as a rate limit (DESIGN 10.4).
		f := stop(report.CandidateFailed, http.StatusTooManyRequests, report.ErrorTypeClientLimit, err.Error(), report.RequestFailed)
		f.ReplyCode, f.RetryAfter = "rate_limit_exceeded", max(te.Budget, time.Second)
		f.Reply = "too many requests in flight for this client (its max_concurrency)"
		return f
	case errors.As(err, &te):
		return Failure{Status: report.CandidateFailed, Code: http.StatusTooManyRequests, ErrorType: report.ErrorTypeAdmissionTimeout,
			Message: err.Error(), Failover: true, Capacity: true, RetryAfter: te.Budget}
	case errors.Is(err, admission.ErrQueueFull):
		return Failure{Status: report.CandidateFailed, Code: http.StatusTooManyRequests, ErrorType: report.ErrorTypeQueueFull,
			Message: err.Error(), Failover: true, Capacity: true, RetryAfter: time.Second}
	case errors.Is(err, admission.ErrClosed):
		f := stop(report.CandidateFailed, http.StatusServiceUnavailable, report.ErrorTypeShutdown, err.Error(), report.RequestFailed)
		f.Reply = "the gateway is shutting down"
		return f
	default:
		// A malformed admission request is a gateway bug; another candidate
		// may still serve the client.
		return Failure{Status: report.CandidateFailed, Code: http.StatusInternalServerError, ErrorType: report.ErrorTypeInternal,
			Message: err.Error(), Failover: true}
	}
}

// statusFailure classifies a non-2xx answer: client faults are relayed; a
// refusal of the request's size (context length, 413) fails over without
// counting; everything else fails over. Scopes: the key for 401/402/403
// and a key-wide 429, the model for the rest (5xx, 529, 404, a plain
// 429: the contract's model scope).
// Health counts 408 and 5xx, 401/403 and 429; a 404 (the provider lacks
// the model) or a 402 fails over without cooling anything. A key-scoped
// refusal of a request that carried a header value the client chose
// (ClientChosen) fails over without counting: the key is shared by every
// client, and one client's header must not cool it for all of them.
func statusFailure(se *upstream.StatusError) Failure {
	f := Failure{Status: report.CandidateFailed, Code: se.Code, ErrorType: report.ErrorTypeUpstreamHTTP,
		Message: string(se.Body), Failover: true, Scope: ScopeModel}
	if se.ContextLength() {
		// Another model may have the larger window; the same model on
		// another key would refuse it too. If no candidate is left the
		// client gets this answer (walk.exhausted).
		f.ErrorType, f.Relay = ErrorTypeContextLength, se
		return f
	}
	if se.ClientFault() {
		f.Failover, f.Scope = false, ScopeNone
		f.RequestStatus, f.RequestCode, f.Relay = report.RequestFailed, se.Code, se
		return f
	}
	switch {
	case se.Code == http.StatusUnauthorized || se.Code == http.StatusPaymentRequired || se.Code == http.StatusForbidden:
		f.Scope = ScopeKey
	case se.Code == http.StatusTooManyRequests && se.KeyWide:
		f.Scope = ScopeKey
	case se.KeyFault:
		// The key refused in a 400 (Gemini's API_KEY_INVALID): as a 401.
		f.Scope, f.Health, f.Auth = ScopeKey, !se.ClientChosen, true
		return f
	}
	switch {
	case se.Code == http.StatusTooManyRequests:
		f.Health, f.Capacity, f.RetryAfter = !se.ClientChosen, true, se.RetryAfter
	case se.Code == http.StatusUnauthorized || se.Code == http.StatusForbidden:
		f.Health, f.Auth = !se.ClientChosen, true
	case se.Code == http.StatusRequestTimeout || se.Code == http.StatusGatewayTimeout:
		f.Health, f.Timeout = true, true
	case se.Code >= 500 || se.ModelFault:
		// ModelFault: the model failed in a status under 500 (Bedrock's 424).
		f.Health = true
		if se.Code == http.StatusServiceUnavailable {
			f.RetryAfter = se.RetryAfter
		}
	}
	return f
}

// ErrorTypeContextLength is the error_type of a candidate that refused the
// request for its size (the prompt exceeds the model's context window, or
// the body the provider's limit): the walk fails over to a candidate that
// may take it.
const ErrorTypeContextLength = "context_length_exceeded"

// providerFailure is a failure of the provider's answer (a timeout, a
// broken stream, a malformed body): the model's, like a 5xx.
func providerFailure(code int, errorType, msg string, timeout bool, watchdog string) Failure {
	return Failure{Status: report.CandidateFailed, Code: code, ErrorType: errorType, Message: msg,
		Scope: ScopeModel, Health: true, Failover: true, Timeout: timeout, Watchdog: watchdog}
}

// deadlineFailure ends a request whose deadline passed: no other candidate
// has time left.
func deadlineFailure() Failure {
	f := stop(report.CandidateFailed, http.StatusGatewayTimeout, report.ErrorTypeDeadline, ErrDeadline.Error(), report.RequestFailed)
	f.Reply, f.ReplyCode = "the request's deadline passed before an answer was complete", report.ErrorTypeDeadline
	return f
}

// contextEnded classifies an attempt ended by its request: the client left,
// the shutdown grace ran out, or the deadline passed.
func contextEnded(ended error, committed bool) Failure {
	if errors.Is(ended, ErrDeadline) {
		return deadlineFailure()
	}
	if errors.Is(ended, ErrShutdown) {
		// DESIGN section 7: a stream cut after bytes were sent is failed
		// with 502; before any byte the client gets 503 shutting_down.
		code := http.StatusServiceUnavailable
		if committed {
			code = http.StatusBadGateway
		}
		f := stop(report.CandidateFailed, code, report.ErrorTypeShutdown, "the gateway shut down before the response ended", report.RequestFailed)
		f.RequestCode, f.Reply = http.StatusServiceUnavailable, "the gateway is shutting down"
		return f
	}
	f := stop(report.CandidateCancelled, 499, report.ErrorTypeClientCancelled, "client went away", report.RequestCancelled)
	f.Reply = "client closed the request"
	return f
}

// stop is a Failure that ends the request.
func stop(status string, code int, errorType, msg, requestStatus string) Failure {
	return Failure{Status: status, Code: code, ErrorType: errorType, Message: msg,
		RequestStatus: requestStatus, RequestCode: code}
}
