package mockupstream

import (
	"cmp"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// The steps every model endpoint takes, in order: count the request, read and record
// the body, apply the X-Mock-* overrides, validate (the endpoint's own code), stamp the
// identity and request id, then decide injected failures, hangs and slow first bytes.
// Sharing them is what makes a fault control mean the same on every endpoint.

// wire is how a provider words the errors the mock answers with.
type wire interface {
	// reject answers a request the mock refuses before any fault applies: a body that
	// is not a valid request, a bad X-Mock-* header, missing credentials. param names
	// the offending field or is empty; code is OpenAI's error code.
	reject(w http.ResponseWriter, status int, message, param, code string)
	// fail answers an injected error status, or the canned refusal kind
	// (Behavior.ErrorKind) when it is not empty.
	fail(w http.ResponseWriter, status int, kind, requestID string)
}

// call is one model request on its way through the shared steps. Handlers keep it on
// the stack; finish counts its outcome.
type call struct {
	s    *Server
	w    http.ResponseWriter
	r    *http.Request
	ep   endpoint
	wire wire
	o    outcome // counted by finish; cancelled unless a step says otherwise
	b    Behavior
	body []byte
	id   int64
	ms   *modelState // the model's counters, once track was called
	// model is the model the URL names (Gemini's path), which the body does
	// not; "" for the endpoints whose body names it.
	model string
}

// open counts the request as begun. The handler must defer c.finish().
func (s *Server) open(w http.ResponseWriter, r *http.Request, ep endpoint, wr wire) call {
	s.begin(ep)
	return call{s: s, w: w, r: r, ep: ep, wire: wr, o: outcomeCancelled}
}

// finish counts the outcome, then aborts the connection of a stream that ended in a
// reset: http.ErrAbortHandler makes net/http drop it (HTTP/1) or reset the stream
// (HTTP/2) without the terminating chunk, and without logging a panic.
func (c *call) finish() {
	if c.ms != nil { // before end, so that a WaitIdle that returns sees it
		c.ms.count.add(c.o)
		c.ms.inFlight.Add(-1)
	}
	c.s.end(c.ep, c.o)
	if c.o == outcomeReset {
		panic(http.ErrAbortHandler)
	}
}

// read reads and records the body and applies the X-Mock-* overrides to the defaults,
// or to the model's own Behavior (SetModelBehavior); HeaderForModel scopes them.
// It reports false when the request is answered already (or the client left).
func (c *call) read() bool {
	body, err := readBody(c.w, c.r)
	if err != nil {
		if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
			c.reject(http.StatusRequestEntityTooLarge, "request body too large", "", "request_too_large")
		}
		return false // otherwise the client went away while sending
	}
	c.body = body
	c.s.record(c.ep, c.r, body)

	base := c.s.behavior.Load()
	scope, scoped := headerValue(c.r.Header, HeaderForModel)
	apply := true
	if c.s.models.Load() != nil || scoped {
		model := c.model
		if model == "" {
			model = peekModel(body)
		}
		base = c.s.modelBehavior(model)
		apply = !scoped || forModel(scope, model)
	}
	b := *base
	if apply {
		b, err = applyOverrides(b, c.r.Header)
	}
	if err != nil {
		field := ""
		if fe := (*FieldError)(nil); errors.As(err, &fe) {
			field = fe.Field
		}
		c.reject(http.StatusBadRequest, err.Error(), field, "invalid_mock_header")
		return false
	}
	c.b = b
	return true
}

// reject answers a refused request and counts it Rejected.
func (c *call) reject(status int, message, param, code string) {
	c.wire.reject(c.w, status, message, param, code)
	c.o = outcomeRejected
}

// stamp fills the Behavior defaults, takes a request id, and sets the identity header
// and the provider's request id header (idHeader, canonical) with idPrefix+id.
func (c *call) stamp(idHeader, idPrefix string) {
	if c.b.Identity == "" {
		c.b.Identity = DefaultIdentity
	}
	if c.b.Chunks == 0 {
		c.b.Chunks = DefaultChunks
	}
	c.id = c.s.nextID.Add(1)
	h := c.w.Header()
	h[HeaderIdentity] = []string{c.b.Identity}
	// Real providers send their own request id; a gateway that copied upstream headers
	// blindly would leak it next to its own X-Request-Id.
	h[idHeader] = []string{idPrefix + strconv.FormatInt(c.id, 10)}
}

// faults answers an injected failure (false): an error status, a canned refusal, a
// connection reset or a hang before any header; makes a non-stream hang until the
// client leaves (false); or turns a hang or a slow share into the stream timeline's
// stall or slow first byte (true). key is the request's credential, for KeyStatus.
func (c *call) faults(key string, stream bool) bool {
	if status, fail, keyed := c.failure(key); fail {
		ctx := c.r.Context()
		if !sleep(ctx, c.b.Latency) {
			return false
		}
		kind := c.b.ErrorKind
		if !keyed {
			switch {
			case c.b.ResetBeforeHeaders:
				c.resetConn()
				return false
			case c.b.HangBeforeHeaders:
				<-ctx.Done()
				return false
			}
		} else {
			kind = "" // the key's own status
		}
		if c.b.RetryAfter != "" {
			c.w.Header()["Retry-After"] = []string{c.b.RetryAfter}
		}
		c.wire.fail(c.w, status, kind, "req_mock_"+strconv.FormatInt(c.id, 10))
		c.o = outcomeFailed
		return false
	}
	if c.s.hangs(&c.b) {
		if !stream {
			<-c.r.Context().Done() // no status, no byte: only the caller's timeout ends it
			return false
		}
		c.b.StallAfterHeaders = true
	} else if stream && c.s.slow(&c.b) {
		c.b.FirstByteDelay = c.b.SlowDelay
		c.w.Header()[HeaderSlowed] = []string{"true"}
	}
	return true
}

// failure decides whether this request fails and with which status; keyed says that
// KeyStatus chose it. The schedule: KeyStatus for a listed key; else FailFirst and the
// down window when either is set (the model's first FailFirst requests and every
// request while down fail, the rest succeed); else FailRate's share of the requests
// that Status, ErrorKind, ResetBeforeHeaders or HangBeforeHeaders would fail.
func (c *call) failure(key string) (status int, fail, keyed bool) {
	b := &c.b
	if len(b.KeyStatus) > 0 && key != "" {
		if st, ok := b.KeyStatus[key]; ok {
			return st, st != http.StatusOK, true
		}
	}
	status = b.Status
	if status == http.StatusOK {
		status = 0
	}
	if b.ErrorKind != "" {
		status = errorKindStatus(b.ErrorKind)
	}
	if b.FailFirst > 0 || !b.DownUntil.IsZero() || b.DownFor > 0 {
		switch {
		case c.down():
			return cmp.Or(status, http.StatusServiceUnavailable), true, false
		case b.FailFirst > 0 && c.ms.failFirst.Add(1) <= uint64(b.FailFirst):
			return cmp.Or(status, http.StatusInternalServerError), true, false
		}
		return 0, false, false
	}
	chosen := status != 0 || b.ResetBeforeHeaders || b.HangBeforeHeaders
	status = cmp.Or(status, http.StatusInternalServerError)
	switch {
	case b.FailRate <= 0:
		return status, chosen, false
	case b.FailRate >= 1:
		return status, true, false
	}
	return status, failsAt(c.s.failSeq.Add(1)-1, failRatePPM(b.FailRate)), false
}

// down reports whether the down window (DownUntil, or a header's DownFor from the
// model's first request that carried it) holds now.
func (c *call) down() bool {
	now := c.s.now()
	if !c.b.DownUntil.IsZero() {
		return now.Before(c.b.DownUntil)
	}
	if c.b.DownFor <= 0 {
		return false
	}
	c.ms.downFrom.CompareAndSwap(0, now.UnixNano())
	return now.UnixNano() < c.ms.downFrom.Load()+int64(c.b.DownFor)
}

// resetConn closes the connection without a response. Hijacked, it is closed with a
// TCP reset (no lingering FIN); where it cannot be (HTTP/2), finish's
// http.ErrAbortHandler resets the stream.
func (c *call) resetConn() {
	c.o = outcomeReset
	conn, _, err := http.NewResponseController(c.w).Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// bearerKey is the OpenAI credential: the token of "Authorization: Bearer <key>".
// It is read only when KeyStatus could use it.
func bearerKey(b *Behavior, h http.Header) string {
	if len(b.KeyStatus) == 0 {
		return ""
	}
	auth, _ := headerValue(h, "Authorization")
	key, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok {
		return "" // not a bearer token
	}
	return key
}

// openAIWire answers OpenAI-shaped errors: {"error":{"message","type","param","code"}}.
type openAIWire struct{}

func (openAIWire) reject(w http.ResponseWriter, status int, message, param, code string) {
	writeError(w, status, message, "invalid_request_error", param, code)
}

func (openAIWire) fail(w http.ResponseWriter, status int, kind, _ string) {
	if kind == ErrorRequestsExhausted {
		setExhaustedHeaders(w.Header(), false)
	}
	if writeCanned(w, kind, openAICanned) {
		return
	}
	typ, code := errorKind(status)
	writeError(w, status, "mock error", typ, "", code)
}
