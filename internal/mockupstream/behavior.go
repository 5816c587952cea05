package mockupstream

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// DefaultChunks is the number of content chunks (stream) or words (non-stream) when
// Behavior.Chunks is zero.
const DefaultChunks = 3

// DefaultIdentity names a Server whose Behavior.Identity is empty.
const DefaultIdentity = "mock"

// Behavior is what the mock does with a chat request. The zero value answers at once,
// successfully, with DefaultChunks chunks. Stream-only fields are ignored by
// non-stream requests.
type Behavior struct {
	// Identity appears in the completion text ("Hello from <Identity> chunk 1 ...") and in
	// the X-Mock-Identity response header, so a failover test can tell which upstream
	// answered. Default DefaultIdentity.
	Identity string
	// Latency delays the whole answer (non-stream) or the response headers (stream).
	// It also delays injected error answers, like a slow provider that then fails.
	Latency time.Duration
	// FirstByteDelay (stream) is the pause after the headers and the comments, before the
	// first data event: what the gateway's first-byte watchdog measures.
	FirstByteDelay time.Duration
	// StallAfterHeaders (stream) flushes 200 headers and then sends nothing until the
	// request is cancelled.
	StallAfterHeaders bool
	// Comments (stream) is the number of ": keep-alive" comment events sent right after the
	// headers, each followed by CommentInterval; they must not count as a first byte.
	Comments        int
	CommentInterval time.Duration
	// Chunks is the number of content chunks in a stream and of words in a non-stream
	// answer. Zero means DefaultChunks.
	Chunks int
	// ChunkInterval (stream) is the pause before each content chunk; the role chunk goes
	// out at the first byte.
	ChunkInterval time.Duration
	// StallAfterChunks (stream), when > 0, stalls until cancelled once that many content
	// chunks were sent. Equal to Chunks: everything but the usage chunk and [DONE] arrives.
	StallAfterChunks int
	// ResetAfterChunks (stream), when > 0, aborts the connection once that many content
	// chunks were sent: the client reads an unexpected EOF and never sees [DONE].
	// StallAfterChunks wins when both trigger at the same chunk.
	ResetAfterChunks int
	// ErrorAfterChunks (stream), when > 0, sends an error object event
	// (data: {"error":{...}}) once that many content chunks were sent and ends the
	// stream there, cleanly but without [DONE]: how OpenAI reports a failure in the
	// middle of a generation. StallAfterChunks and ResetAfterChunks win when they
	// trigger at the same chunk.
	ErrorAfterChunks int
	// EndAfterChunks (stream), when > 0, ends the stream cleanly once that many content
	// chunks were sent, with no error and without its closing events (no finish_reason,
	// usage or [DONE]; no message_stop; no response.completed): a provider that stops
	// in the middle of an answer without saying so. The other *AfterChunks faults win
	// when they trigger at the same chunk.
	EndAfterChunks int
	// Status, when non-zero and not 200, is answered with an OpenAI-shaped error body
	// instead of a completion (for stream requests too: providers fail before the stream
	// starts). Subject to FailRate, or to FailFirst and DownUntil when they are set.
	Status int
	// FailRate in [0,1] is the share of requests answered with Status (500 when Status is
	// 0 or 200), ignored when FailFirst or a down window is set. 0 means "every
	// request" when Status (or ErrorKind, ResetBeforeHeaders, HangBeforeHeaders) is set
	// and "none" otherwise. The choice is deterministic: request n (0-based, counted
	// among requests with a rate in (0,1)) fails when floor((n+1)·r) > floor(n·r).
	FailRate float64
	// HangRate in [0,1] is the share of requests that hang until the client cancels: a
	// stream gets its 200 headers and then nothing, a non-stream request gets nothing at
	// all. It emulates a provider that accepts connections and never answers, which only
	// the caller's timeout ends. The schedule is FailRate's, on a counter of its own,
	// over the requests that FailRate did not fail; 1 hangs every one of them.
	HangRate float64
	// SlowRate in [0,1] (stream) is the share of streams whose first byte waits
	// SlowDelay instead of FirstByteDelay: a provider whose answers are mostly fast with
	// a slow tail, which is what hedged requests rescue. The schedule is FailRate's, on a
	// counter of its own, over the streams that FailRate did not fail and HangRate did not
	// hang; a chosen stream's response carries HeaderSlowed, so a test can tell which
	// ones were slow without timing them.
	SlowRate  float64
	SlowDelay time.Duration
	// RetryAfter, when set, is sent as Retry-After on injected error answers.
	RetryAfter string
	// FailFirst, when > 0, fails the first FailFirst requests of each model and lets
	// every later one succeed, instead of FailRate's schedule: "500 once" is
	// FailFirst 1. The count is per model (the body's "model"), over the requests
	// whose Behavior has FailFirst set, and starts again when the Behavior is set
	// (SetBehavior, SetModelBehavior, POST /mock/behavior) or Reset. The failure is
	// Status (500 when 0 or 200), or what ErrorKind, ResetBeforeHeaders or
	// HangBeforeHeaders say.
	FailFirst int
	// DownUntil, when set, fails every request before it and lets every request from
	// it on succeed, instead of FailRate's schedule: an outage that ends. The failure
	// is Status (503 when 0 or 200), or what ErrorKind, ResetBeforeHeaders or
	// HangBeforeHeaders say. With FailFirst too, a request fails when either says so.
	DownUntil time.Time
	// DownFor is DownUntil relative to when the Behavior was set: New, SetBehavior
	// and SetModelBehavior turn it into DownUntil = now + DownFor (when DownUntil is
	// unset), so "down 10 s, then up" starts with the call. From a header
	// (HeaderDownFor) it starts at the model's first request that carries it.
	DownFor time.Duration
	// ErrorKind, when set, makes the injected error answer one of a provider's real
	// refusals (the Error* constants) with that refusal's status and body, and it
	// fails requests the way a set Status does (every one, or FailRate's share, or
	// FailFirst's, or while down). The kind's status replaces Status.
	ErrorKind string
	// ResetBeforeHeaders makes the chosen failures (every request, unless FailRate,
	// FailFirst or DownUntil choose) close the connection without any response: the
	// socket is hijacked and closed with a TCP reset (HTTP/2: the stream is reset).
	// The client reads a connection error, never a status. Counted in Stats.Resets.
	ResetBeforeHeaders bool
	// HangBeforeHeaders makes the chosen failures, stream or not, get no status and
	// no byte until the client leaves: a provider that accepts the connection and
	// never answers. Unlike HangRate it sends no stream headers. ResetBeforeHeaders
	// wins when both are set.
	HangBeforeHeaders bool
	// MalformedAfterChunks (stream), when > 0, sends an event whose data is not JSON
	// ("data: {not json") once that many content chunks were sent; the stream then
	// goes on as it would have, so a gateway that skips the event delivers a whole
	// answer. With another *AfterChunks fault at the same chunk, the malformed event
	// comes first.
	MalformedAfterChunks int
	// OmitFinishReason (chat stream) leaves finish_reason null on the last content
	// chunk. With EndAfterChunks equal to Chunks the stream ends after its last
	// content chunk with neither a finish_reason nor [DONE].
	OmitFinishReason bool
	// StopAtMaxTokens ends a text answer as one cut by the request's token
	// limit: finish_reason "length" (chat), stop_reason "max_tokens"
	// (messages, Converse), finishReason MAX_TOKENS (Gemini). A tool call's
	// answer is unchanged.
	StopAtMaxTokens bool
	// KeyStatus answers every request whose bearer token (Authorization: Bearer <key>;
	// x-api-key on Anthropic messages, x-goog-api-key on Gemini) is one of its keys with that key's status (200
	// succeeds), instead of Status and FailRate: one account whose keys fare
	// differently, such as one key revoked (401) or rate limited (429) while the others
	// serve. Other tokens follow Status and FailRate. The map is read, never written:
	// replace it with SetBehavior.
	KeyStatus map[string]int
	// Usage makes the mock honour stream_options.include_usage: a final chunk with empty
	// "choices" and a "usage" object before [DONE], and "usage":null in every chunk
	// before it, as OpenAI's API does. False emulates a provider that
	// ignores the option. Non-stream answers always carry usage. Only the chat endpoint
	// reads it: Anthropic messages and Responses always carry usage.
	Usage bool
	// ToolUse (Anthropic messages and Gemini only), when set, makes the answer call that tool: a
	// tool_use content block after the text and stop_reason "tool_use". ToolUseFirst
	// ("*") calls the first tool of the request's "tools" and refuses a request without
	// any.
	ToolUse string
	// Keyless (Anthropic messages and Gemini only) accepts requests without an x-api-key
	// (x-goog-api-key) header;
	// by default the mock answers them 401 like Anthropic, so a test notices a gateway
	// that forgot the provider's credentials. KeyStatus reads x-api-key there.
	Keyless bool
	// TokenStatus, when set, is the status the Vertex token endpoint (POST /token)
	// answers every grant with: an outage of Google's token endpoint (vertex.go).
	TokenStatus int
	// RejectPrefill and RepeatOnPrefill: how a request with a prefill is
	// failed (prefill.go).
	RejectPrefill, RepeatOnPrefill bool
	// CachedTokens, CacheWriteTokens and ReasoningTokens put cache reads, cache writes
	// and reasoning into every answer's usage, stream and not, where each vendor reports
	// them (usagetokens.go): a test can then assert what a gateway bills for them.
	CachedTokens, CacheWriteTokens, ReasoningTokens int
}

// ToolUseFirst as Behavior.ToolUse calls the first tool the request offers.
const ToolUseFirst = "*"

// ErrorKind values: a provider's own refusals, worded as each provider words them
// (canned.go has the bodies).
const (
	// ErrorContextLength: OpenAI 400 code context_length_exceeded; Anthropic 400
	// invalid_request_error "prompt is too long: 210000 tokens > 200000 maximum".
	ErrorContextLength = "context_length_exceeded"
	// ErrorRequestTooLarge: 413 request_too_large ("Request exceeds the maximum
	// allowed number of bytes.") on both.
	ErrorRequestTooLarge = "request_too_large"
	// ErrorContentFilter: OpenAI (Azure) 400 code content_filter, param "prompt";
	// Anthropic 400 invalid_request_error "Output blocked by content filtering policy".
	ErrorContentFilter = "content_filter"
	// ErrorRequestsExhausted: 429 rate limit of the whole key, with the headers that
	// say so: x-ratelimit-limit-requests, x-ratelimit-remaining-requests: 0 and
	// x-ratelimit-reset-requests on the OpenAI routes;
	// anthropic-ratelimit-requests-limit and anthropic-ratelimit-requests-remaining: 0
	// on the Anthropic one.
	ErrorRequestsExhausted = "requests_exhausted"
)

// Request headers that override the Server's Behavior for one request. Durations use
// Go syntax ("150ms"), booleans strconv.ParseBool syntax ("true", "1").
const (
	HeaderLatency           = "X-Mock-Latency"
	HeaderFirstByteDelay    = "X-Mock-First-Byte-Delay"
	HeaderStallAfterHeaders = "X-Mock-Stall-After-Headers"
	HeaderComments          = "X-Mock-Comments"
	HeaderCommentInterval   = "X-Mock-Comment-Interval"
	HeaderChunks            = "X-Mock-Chunks"
	HeaderChunkInterval     = "X-Mock-Chunk-Interval"
	HeaderStallAfterChunks  = "X-Mock-Stall-After-Chunks"
	HeaderResetAfterChunks  = "X-Mock-Reset-After-Chunks"
	HeaderErrorAfterChunks  = "X-Mock-Error-After-Chunks"
	HeaderEndAfterChunks    = "X-Mock-End-After-Chunks"
	HeaderStatus            = "X-Mock-Status"
	HeaderFailRate          = "X-Mock-Fail-Rate"
	HeaderHangRate          = "X-Mock-Hang-Rate"
	HeaderSlowRate          = "X-Mock-Slow-Rate"
	HeaderSlowDelay         = "X-Mock-Slow-Delay"
	HeaderRetryAfter        = "X-Mock-Retry-After"
	HeaderIdentity          = "X-Mock-Identity"
	HeaderUsage             = "X-Mock-Usage"
	HeaderToolUse           = "X-Mock-Tool-Use"
	HeaderKeyless           = "X-Mock-Keyless"

	HeaderFailFirst            = "X-Mock-Fail-First"
	HeaderDownUntil            = "X-Mock-Down-Until" // RFC 3339
	HeaderDownFor              = "X-Mock-Down-For"
	HeaderErrorKind            = "X-Mock-Error-Kind"
	HeaderResetBeforeHeaders   = "X-Mock-Reset-Before-Headers"
	HeaderHangBeforeHeaders    = "X-Mock-Hang-Before-Headers"
	HeaderMalformedAfterChunks = "X-Mock-Malformed-After-Chunks"
	HeaderOmitFinishReason     = "X-Mock-Omit-Finish-Reason"
	HeaderStopAtMaxTokens      = "X-Mock-Stop-At-Max-Tokens"

	// HeaderForModel scopes the other X-Mock-* headers of a request to the models it
	// names (a comma-separated list, spaces ignored): a request whose body's "model"
	// is not one of them ignores them all and behaves as its model's Behavior (or the
	// defaults) says. A gateway forwards a client's headers to every candidate, so this
	// is how one request fails its primary model and not its fallback. The names are
	// the upstream's, as the mock receives them (after a gateway's model rewrite).
	HeaderForModel = "X-Mock-For-Model"
)

// HeaderSlowed is a response header: "true" on a stream that SlowRate chose.
const HeaderSlowed = "X-Mock-Slowed"

// FieldError reports a Behavior value that cannot be used. Field is the X-Mock-* header
// name when the value came from a request, else the Behavior field name.
type FieldError struct {
	Field string
	Value string
	Err   error
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("invalid %s %q: %v", e.Field, e.Value, e.Err)
}

func (e *FieldError) Unwrap() error { return e.Err }

var (
	errNegative   = errors.New("must not be negative")
	errStatus     = errors.New("must be 0 or an HTTP status in 200..599")
	errRate       = errors.New("must be within 0..1")
	errTooLarge   = errors.New("too large")
	errNotANumber = errors.New("not a number")
	errErrorKind  = errors.New("not a known error kind")
)

// maxCount bounds counts so a typo cannot make one request stream for hours or build an
// enormous body.
const maxCount = 1 << 20

// Validate reports the first field that New would have to guess about. New does not call
// it (tests may want odd values); commands and header overrides do.
func (b Behavior) Validate() error {
	durs := []struct {
		name string
		d    time.Duration
	}{
		{"Latency", b.Latency}, {"FirstByteDelay", b.FirstByteDelay},
		{"CommentInterval", b.CommentInterval}, {"ChunkInterval", b.ChunkInterval},
		{"SlowDelay", b.SlowDelay}, {"DownFor", b.DownFor},
	}
	for _, f := range durs {
		if f.d < 0 {
			return &FieldError{f.name, f.d.String(), errNegative}
		}
	}
	counts := []struct {
		name string
		n    int
	}{
		{"Comments", b.Comments}, {"Chunks", b.Chunks},
		{"StallAfterChunks", b.StallAfterChunks}, {"ResetAfterChunks", b.ResetAfterChunks},
		{"ErrorAfterChunks", b.ErrorAfterChunks}, {"EndAfterChunks", b.EndAfterChunks},
		{"FailFirst", b.FailFirst}, {"MalformedAfterChunks", b.MalformedAfterChunks},
		{"CachedTokens", b.CachedTokens}, {"CacheWriteTokens", b.CacheWriteTokens},
		{"ReasoningTokens", b.ReasoningTokens},
	}
	for _, f := range counts {
		if err := checkCount(f.n); err != nil {
			return &FieldError{f.name, strconv.Itoa(f.n), err}
		}
	}
	if err := checkStatus(b.Status); err != nil {
		return &FieldError{"Status", strconv.Itoa(b.Status), err}
	}
	if st := b.TokenStatus; st != 0 && (st < 400 || st > 599) {
		// A failure status only: the grant's success is the mock's own answer.
		return &FieldError{"TokenStatus", strconv.Itoa(st), errStatus}
	}
	if err := checkRate(b.FailRate); err != nil {
		return &FieldError{"FailRate", strconv.FormatFloat(b.FailRate, 'g', -1, 64), err}
	}
	if err := checkRate(b.HangRate); err != nil {
		return &FieldError{"HangRate", strconv.FormatFloat(b.HangRate, 'g', -1, 64), err}
	}
	if err := checkRate(b.SlowRate); err != nil {
		return &FieldError{"SlowRate", strconv.FormatFloat(b.SlowRate, 'g', -1, 64), err}
	}
	if b.ErrorKind != "" && errorKindStatus(b.ErrorKind) == 0 {
		return &FieldError{"ErrorKind", b.ErrorKind, errErrorKind}
	}
	for _, st := range b.KeyStatus {
		// The key stays out of the error: it may be a real credential.
		if st == 0 || checkStatus(st) != nil {
			return &FieldError{"KeyStatus", strconv.Itoa(st), errStatus}
		}
	}
	return nil
}

func checkCount(n int) error {
	switch {
	case n < 0:
		return errNegative
	case n > maxCount:
		return errTooLarge
	}
	return nil
}

func checkStatus(s int) error {
	if s != 0 && (s < 200 || s > 599) {
		return errStatus
	}
	return nil
}

func checkRate(r float64) error {
	if !(r >= 0 && r <= 1) { // also rejects NaN
		return errRate
	}
	return nil
}

// applyOverrides returns b with every X-Mock-* header of h applied. It indexes the header
// map with canonical names instead of h.Get so that the common request without overrides
// costs a few map misses and no allocation.
func applyOverrides(b Behavior, h http.Header) (Behavior, error) {
	var err error
	dur := func(name string, dst *time.Duration) {
		v, ok := headerValue(h, name)
		if !ok || err != nil {
			return
		}
		d, perr := time.ParseDuration(v)
		if perr == nil && d < 0 {
			perr = errNegative
		}
		if perr != nil {
			err = &FieldError{name, v, perr}
			return
		}
		*dst = d
	}
	count := func(name string, dst *int) {
		v, ok := headerValue(h, name)
		if !ok || err != nil {
			return
		}
		n, perr := strconv.Atoi(v)
		if perr != nil {
			perr = errNotANumber
		} else {
			perr = checkCount(n)
		}
		if perr != nil {
			err = &FieldError{name, v, perr}
			return
		}
		*dst = n
	}
	rate := func(name string, dst *float64) {
		v, ok := headerValue(h, name)
		if !ok || err != nil {
			return
		}
		r, perr := strconv.ParseFloat(v, 64)
		if perr != nil {
			perr = errNotANumber
		} else {
			perr = checkRate(r)
		}
		if perr != nil {
			err = &FieldError{name, v, perr}
		}
		*dst = r
	}
	boolean := func(name string, dst *bool) {
		v, ok := headerValue(h, name)
		if !ok || err != nil {
			return
		}
		t, perr := strconv.ParseBool(v)
		if perr != nil {
			err = &FieldError{name, v, errors.New("not a boolean")}
			return
		}
		*dst = t
	}

	dur(HeaderLatency, &b.Latency)
	dur(HeaderFirstByteDelay, &b.FirstByteDelay)
	dur(HeaderSlowDelay, &b.SlowDelay)
	boolean(HeaderStallAfterHeaders, &b.StallAfterHeaders)
	count(HeaderComments, &b.Comments)
	dur(HeaderCommentInterval, &b.CommentInterval)
	count(HeaderChunks, &b.Chunks)
	dur(HeaderChunkInterval, &b.ChunkInterval)
	count(HeaderStallAfterChunks, &b.StallAfterChunks)
	count(HeaderResetAfterChunks, &b.ResetAfterChunks)
	count(HeaderErrorAfterChunks, &b.ErrorAfterChunks)
	count(HeaderEndAfterChunks, &b.EndAfterChunks)
	boolean(HeaderUsage, &b.Usage)
	boolean(HeaderKeyless, &b.Keyless)
	if v, ok := headerValue(h, HeaderStatus); ok && err == nil {
		n, perr := strconv.Atoi(v)
		if perr != nil {
			perr = errNotANumber
		} else {
			perr = checkStatus(n)
		}
		if perr != nil {
			err = &FieldError{HeaderStatus, v, perr}
		}
		b.Status = n
	}
	rate(HeaderFailRate, &b.FailRate)
	rate(HeaderHangRate, &b.HangRate)
	rate(HeaderSlowRate, &b.SlowRate)
	if v, ok := headerValue(h, HeaderRetryAfter); ok {
		b.RetryAfter = v
	}
	if v, ok := headerValue(h, HeaderToolUse); ok {
		b.ToolUse = v
	}
	if v, ok := headerValue(h, HeaderIdentity); ok {
		b.Identity = v
	}
	count(HeaderFailFirst, &b.FailFirst)
	dur(HeaderDownFor, &b.DownFor)
	if _, ok := h[HeaderDownFor]; ok {
		b.DownUntil = time.Time{} // the header's window, not one the Behavior had
	}
	count(HeaderMalformedAfterChunks, &b.MalformedAfterChunks)
	boolean(HeaderResetBeforeHeaders, &b.ResetBeforeHeaders)
	boolean(HeaderHangBeforeHeaders, &b.HangBeforeHeaders)
	boolean(HeaderOmitFinishReason, &b.OmitFinishReason)
	boolean(HeaderStopAtMaxTokens, &b.StopAtMaxTokens)
	count(HeaderCachedTokens, &b.CachedTokens)
	count(HeaderCacheWriteTokens, &b.CacheWriteTokens)
	count(HeaderReasoningTokens, &b.ReasoningTokens)
	if v, ok := headerValue(h, HeaderDownUntil); ok && err == nil {
		t, perr := time.Parse(time.RFC3339Nano, v)
		if perr != nil {
			err = &FieldError{HeaderDownUntil, v, errors.New("not an RFC 3339 time")}
		}
		b.DownUntil = t
	}
	if v, ok := headerValue(h, HeaderErrorKind); ok && err == nil {
		if v != "" && errorKindStatus(v) == 0 {
			err = &FieldError{HeaderErrorKind, v, errErrorKind}
		}
		b.ErrorKind = v
	}
	return b, err
}

// forModel reports whether the X-Mock-For-Model list names model.
func forModel(list, model string) bool {
	for list != "" {
		var name string
		name, list, _ = strings.Cut(list, ",")
		if strings.TrimSpace(name) == model {
			return true
		}
	}
	return false
}

func headerValue(h http.Header, canonical string) (string, bool) {
	vs := h[canonical]
	if len(vs) == 0 {
		return "", false
	}
	return vs[0], true
}

// failRatePPM turns a rate into parts per million so the deterministic schedule uses
// integer arithmetic: with floats, 0.29·100 floors to 28 and the share drifts.
func failRatePPM(r float64) uint64 {
	return uint64(r*1e6 + 0.5)
}

// failsAt reports whether request n (0-based) of a schedule at ppm fails. It spreads the
// failures evenly, so any prefix of N requests holds floor(N·r) of them.
func failsAt(n, ppm uint64) bool {
	return (n+1)*ppm/1e6 > n*ppm/1e6
}
