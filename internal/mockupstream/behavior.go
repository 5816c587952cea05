package mockupstream

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
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
	// starts). Subject to FailRate.
	Status int
	// FailRate in [0,1] is the share of requests answered with Status (500 when Status is
	// 0 or 200). 0 means "every request" when Status is set and "none" otherwise. The
	// choice is deterministic: request n (0-based, counted among requests with a rate in
	// (0,1)) fails when floor((n+1)·r) > floor(n·r).
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
	// KeyStatus answers every request whose bearer token (Authorization: Bearer <key>;
	// x-api-key on Anthropic messages) is one of its keys with that key's status (200
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
	// ToolUse (Anthropic messages only), when set, makes the answer call that tool: a
	// tool_use content block after the text and stop_reason "tool_use". ToolUseFirst
	// ("*") calls the first tool of the request's "tools" and refuses a request without
	// any.
	ToolUse string
	// Keyless (Anthropic messages only) accepts requests without an x-api-key header;
	// by default the mock answers them 401 like Anthropic, so a test notices a gateway
	// that forgot the provider's credentials. KeyStatus reads x-api-key there.
	Keyless bool
	// RejectPrefill and RepeatOnPrefill: how a request with a prefill is
	// failed (prefill.go).
	RejectPrefill, RepeatOnPrefill bool
}

// ToolUseFirst as Behavior.ToolUse calls the first tool the request offers.
const ToolUseFirst = "*"

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
		{"SlowDelay", b.SlowDelay},
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
	}
	for _, f := range counts {
		if err := checkCount(f.n); err != nil {
			return &FieldError{f.name, strconv.Itoa(f.n), err}
		}
	}
	if err := checkStatus(b.Status); err != nil {
		return &FieldError{"Status", strconv.Itoa(b.Status), err}
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
	return b, err
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
