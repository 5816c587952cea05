package mockupstream

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Stats counts chat completion requests (other routes are not counted). Every request
// ends in exactly one outcome, so at any time
// Requests == InFlight + Completed + Failed + Rejected + Cancelled + Resets.
type Stats struct {
	Requests  uint64 `json:"requests"`
	InFlight  int64  `json:"in_flight"`
	Completed uint64 `json:"completed"` // a success answer was written in full
	Failed    uint64 `json:"failed"`    // an injected error status or stream error event was answered
	Rejected  uint64 `json:"rejected"`  // 400/413: malformed body or X-Mock-* header
	// Cancelled counts requests whose context ended (or whose connection failed a write)
	// before the mock finished its answer: a client or gateway that gave up.
	Cancelled uint64 `json:"cancelled"`
	Resets    uint64 `json:"resets"` // streams aborted on purpose by ResetAfterChunks
}

// RecordedRequest is a chat request as the mock received it, for asserting what the
// gateway forwarded (model rewrite, untouched unknown fields, stripped client
// credentials, provider headers and query).
type RecordedRequest struct {
	Method string
	Path   string
	Query  url.Values
	Header http.Header
	Body   []byte
}

// Server is the mock upstream; it is an http.Handler, to be mounted on an
// httptest.Server or an http.Server. All methods are safe for concurrent use.
type Server struct {
	behavior atomic.Pointer[Behavior]
	now      func() time.Time // source of "created"; replaced in tests

	nextID  atomic.Int64  // completion and request ids
	failSeq atomic.Uint64 // position in the deterministic fail-rate schedule
	hangSeq atomic.Uint64 // position in the hang-rate schedule, counted apart
	slowSeq atomic.Uint64 // position in the slow-rate schedule, counted apart

	requests, completed, failed, rejected, cancelled, resets atomic.Uint64

	mu       sync.Mutex
	inFlight int64
	idle     chan struct{} // closed while inFlight == 0
	last     lastRequest
}

// lastRequest keeps the raw query so that the hot path does not parse it.
type lastRequest struct {
	method, path, rawQuery string
	header                 http.Header
	body                   []byte
}

var _ http.Handler = (*Server)(nil)

// New returns a Server that behaves as defaults until SetBehavior changes it. defaults is
// not validated (see Behavior.Validate) so that tests can set edge values on purpose.
func New(defaults Behavior) *Server {
	s := &Server{now: time.Now, idle: make(chan struct{})}
	close(s.idle)
	s.behavior.Store(&defaults)
	return s
}

// SetBehavior replaces the defaults; requests already running keep what they started
// with, so a test can change behaviour between phases without racing a stream.
func (s *Server) SetBehavior(b Behavior) {
	s.behavior.Store(&b)
}

// Behavior returns the current defaults.
func (s *Server) Behavior() Behavior {
	return *s.behavior.Load()
}

// Stats returns the counters. They are read one by one, so while requests run the
// invariant between them may be off by the requests that moved meanwhile.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	inFlight := s.inFlight
	s.mu.Unlock()
	return Stats{
		Requests:  s.requests.Load(),
		InFlight:  inFlight,
		Completed: s.completed.Load(),
		Failed:    s.failed.Load(),
		Rejected:  s.rejected.Load(),
		Cancelled: s.cancelled.Load(),
		Resets:    s.resets.Load(),
	}
}

// LastRequest returns a copy of the last chat request received (zero before the first
// one). It is recorded as soon as the body is read, before any validation, so malformed
// requests are visible too.
func (s *Server) LastRequest() RecordedRequest {
	s.mu.Lock()
	l := s.last
	s.mu.Unlock()
	if l.header == nil {
		return RecordedRequest{}
	}
	q, _ := url.ParseQuery(l.rawQuery) // keeps what parses, like Request.URL.Query
	return RecordedRequest{
		Method: l.method,
		Path:   l.path,
		Query:  q,
		Header: l.header.Clone(),
		Body:   bytes.Clone(l.body),
	}
}

// WaitIdle returns nil once no chat request is in flight, or ctx's error. Tests call it
// after cancelling a client so that Stats reflect the handler's end: the server learns
// of a cancellation a little after the client.
func (s *Server) WaitIdle(ctx context.Context) error {
	s.mu.Lock()
	idle := s.idle
	s.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

type outcome uint8

const (
	outcomeCompleted outcome = iota
	outcomeFailed
	outcomeRejected
	outcomeCancelled
	outcomeReset
)

func (s *Server) begin() {
	s.requests.Add(1)
	s.mu.Lock()
	if s.inFlight == 0 {
		s.idle = make(chan struct{})
	}
	s.inFlight++
	s.mu.Unlock()
}

// end counts the outcome before InFlight drops, so a WaitIdle that returns sees it.
func (s *Server) end(o outcome) {
	switch o {
	case outcomeCompleted:
		s.completed.Add(1)
	case outcomeFailed:
		s.failed.Add(1)
	case outcomeRejected:
		s.rejected.Add(1)
	case outcomeCancelled:
		s.cancelled.Add(1)
	case outcomeReset:
		s.resets.Add(1)
	}
	s.mu.Lock()
	s.inFlight--
	if s.inFlight == 0 {
		close(s.idle)
	}
	s.mu.Unlock()
}

func (s *Server) record(r *http.Request, body []byte) {
	l := lastRequest{
		method:   r.Method,
		path:     r.URL.Path,
		rawQuery: r.URL.RawQuery,
		header:   r.Header.Clone(), // the request's map is not ours after the handler
		body:     body,             // read into a fresh slice per request, never reused
	}
	s.mu.Lock()
	s.last = l
	s.mu.Unlock()
}

// ServeHTTP routes the mock's endpoints.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/chat/completions":
		if r.Method != http.MethodPost {
			methodNotAllowed(w, http.MethodPost)
			return
		}
		s.serveChat(w, r)
	case "/v1/models":
		if r.Method != http.MethodGet {
			methodNotAllowed(w, http.MethodGet)
			return
		}
		writeJSON(w, http.StatusOK, modelsBody)
	case "/mock/stats":
		if r.Method != http.MethodGet {
			methodNotAllowed(w, http.MethodGet)
			return
		}
		body, _ := json.Marshal(s.Stats()) // plain integers cannot fail to encode
		writeJSON(w, http.StatusOK, body)
	default:
		writeError(w, http.StatusNotFound, "unknown path "+r.URL.Path, "invalid_request_error", "", "unknown_url")
	}
}

func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	writeError(w, http.StatusMethodNotAllowed, "method not allowed", "invalid_request_error", "", "method_not_allowed")
}

func writeError(w http.ResponseWriter, status int, message, typ, param, code string) {
	writeJSON(w, status, appendErrorBody(nil, message, typ, param, code))
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	_, _ = w.Write(body) // a client that left is not an error of the mock
}
