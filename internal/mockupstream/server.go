package mockupstream

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Stats counts model requests: chat completions, Anthropic messages, embeddings and
// Responses (GET /v1/models and /mock/* are not counted). Every request ends in exactly
// one outcome, so at any time
// Requests == InFlight + Completed + Failed + Rejected + Cancelled + Resets.
type Stats struct {
	Requests  uint64 `json:"requests"`
	InFlight  int64  `json:"in_flight"`
	Completed uint64 `json:"completed"` // a success answer was written in full
	Failed    uint64 `json:"failed"`    // an injected error status or stream error event was answered, or EndAfterChunks ended a stream short
	// Rejected counts 400/413 answers to a malformed body or X-Mock-* header, the
	// 401 to an Anthropic request without x-api-key, and the 403 to a Gemini request
	// without x-goog-api-key (or the 400 to one with the key in its URL).
	Rejected uint64 `json:"rejected"`
	// Cancelled counts requests whose context ended (or whose connection failed a write)
	// before the mock finished its answer: a client or gateway that gave up.
	Cancelled uint64 `json:"cancelled"`
	Resets    uint64 `json:"resets"` // connections aborted on purpose: ResetAfterChunks, ResetBeforeHeaders
}

// RecordedRequest is a model request as the mock received it, for asserting what the
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
	prefill atomic.Uint64 // requests that came with a prefill (prefill.go)

	// count is per endpoint; Stats sums it, so no request pays for two counters.
	count [numEndpoints]counters

	// models holds the models given their own Behavior; nil when there are none, so
	// the common request checks one pointer. Written copy-on-write under modelsMu.
	models   atomic.Pointer[map[string]*Behavior]
	modelsMu sync.Mutex
	states   sync.Map // model name → *modelState, made on the model's first request

	mu        sync.Mutex
	inFlight  [numEndpoints]int64
	inFlights int64         // the sum of inFlight
	idle      chan struct{} // closed while inFlights == 0
	last      [numEndpoints]lastRequest
	lastAny   endpoint // the endpoint of the latest recorded request

	vertex  atomic.Pointer[vertexAuth]   // set by EnableVertex (vertex.go)
	bedrock atomic.Pointer[bedrockCreds] // set by EnableBedrock (bedrock.go)
}

type counters struct {
	requests, completed, failed, rejected, cancelled, resets atomic.Uint64
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
	s.resolveDown(&defaults)
	s.behavior.Store(&defaults)
	return s
}

// SetBehavior replaces the defaults; requests already running keep what they started
// with, so a test can change behaviour between phases without racing a stream.
// b.DownFor starts now, and every model's FailFirst count starts again.
func (s *Server) SetBehavior(b Behavior) {
	s.resolveDown(&b)
	s.behavior.Store(&b)
	s.states.Range(func(model, _ any) bool {
		s.resetSchedules(model.(string))
		return true
	})
}

// Behavior returns the current defaults.
func (s *Server) Behavior() Behavior {
	return *s.behavior.Load()
}

// Stats returns the counters of all model endpoints together. They are read one by
// one, so while requests run the invariant between them may be off by the requests
// that moved meanwhile.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	inFlight := s.inFlights
	s.mu.Unlock()
	st := Stats{InFlight: inFlight}
	for i := range s.count {
		s.count[i].addTo(&st)
	}
	return st
}

// StatsFor returns the counters of the endpoint serving path ("/v1/messages" and
// "/messages" are one endpoint), and false when path is not a model endpoint.
func (s *Server) StatsFor(path string) (Stats, bool) {
	ep, ok := endpointOf(path)
	if !ok {
		return Stats{}, false
	}
	s.mu.Lock()
	st := Stats{InFlight: s.inFlight[ep]}
	s.mu.Unlock()
	s.count[ep].addTo(&st)
	return st, true
}

func (c *counters) addTo(st *Stats) {
	st.Requests += c.requests.Load()
	st.Completed += c.completed.Load()
	st.Failed += c.failed.Load()
	st.Rejected += c.rejected.Load()
	st.Cancelled += c.cancelled.Load()
	st.Resets += c.resets.Load()
}

// LastRequest returns a copy of the last chat request received (zero before the first
// one). It is recorded as soon as the body is read, before any validation, so malformed
// requests are visible too. LastRequestAt reads the other endpoints.
func (s *Server) LastRequest() RecordedRequest {
	r, _ := s.LastRequestAt(pathChat)
	return r
}

// LastRequestAt returns a copy of the last request received by the endpoint serving
// path, recorded like LastRequest's; "/v1/messages" and "/messages" are one endpoint,
// and RecordedRequest.Path tells which one was called. An empty path means the latest
// request of any model endpoint. It returns false when path is not a model endpoint or
// nothing was recorded there yet.
func (s *Server) LastRequestAt(path string) (RecordedRequest, bool) {
	var ep endpoint
	if path != "" {
		var ok bool
		if ep, ok = endpointOf(path); !ok {
			return RecordedRequest{}, false
		}
	}
	s.mu.Lock()
	if path == "" {
		ep = s.lastAny
	}
	l := s.last[ep]
	s.mu.Unlock()
	if l.header == nil {
		return RecordedRequest{}, false
	}
	q, _ := url.ParseQuery(l.rawQuery) // keeps what parses, like Request.URL.Query
	return RecordedRequest{
		Method: l.method,
		Path:   l.path,
		Query:  q,
		Header: l.header.Clone(),
		Body:   bytes.Clone(l.body),
	}, true
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

func (s *Server) begin(ep endpoint) {
	s.count[ep].requests.Add(1)
	s.mu.Lock()
	if s.inFlights == 0 {
		s.idle = make(chan struct{})
	}
	s.inFlight[ep]++
	s.inFlights++
	s.mu.Unlock()
}

// end counts the outcome before InFlight drops, so a WaitIdle that returns sees it.
func (s *Server) end(ep endpoint, o outcome) {
	s.count[ep].add(o)
	s.mu.Lock()
	s.inFlight[ep]--
	s.inFlights--
	if s.inFlights == 0 {
		close(s.idle)
	}
	s.mu.Unlock()
}

// add counts one outcome.
func (c *counters) add(o outcome) {
	switch o {
	case outcomeCompleted:
		c.completed.Add(1)
	case outcomeFailed:
		c.failed.Add(1)
	case outcomeRejected:
		c.rejected.Add(1)
	case outcomeCancelled:
		c.cancelled.Add(1)
	case outcomeReset:
		c.resets.Add(1)
	}
}

func (s *Server) record(ep endpoint, r *http.Request, body []byte) {
	l := lastRequest{
		method:   r.Method,
		path:     r.URL.Path,
		rawQuery: r.URL.RawQuery,
		header:   r.Header.Clone(), // the request's map is not ours after the handler
		body:     body,             // read into a fresh slice per request, never reused
	}
	s.mu.Lock()
	s.last[ep] = l
	s.lastAny = ep
	s.mu.Unlock()
}

// endpoint is a model route; each one is counted and recorded apart.
type endpoint uint8

const (
	epChat endpoint = iota
	epMessages
	epEmbeddings
	epResponses
	epGemini  // every Gemini method, /v1beta/models/{model}:{method}
	epBedrock // Converse and ConverseStream, /model/{modelId}/converse(-stream)
	numEndpoints
)

const (
	pathChat       = "/v1/chat/completions"
	pathMessages   = "/v1/messages"
	pathEmbeddings = "/v1/embeddings"
	pathResponses  = "/v1/responses"
)

// endpointOf maps a path to its model endpoint. The newer routes answer with and
// without the /v1 prefix, because a provider's base_url may or may not end in /v1
// (Anthropic's SDKs append /v1/messages to a bare host); chat keeps its one path.
func endpointOf(path string) (endpoint, bool) {
	switch path {
	case pathChat:
		return epChat, true
	case pathMessages, "/messages":
		return epMessages, true
	case pathEmbeddings, "/embeddings":
		return epEmbeddings, true
	case pathResponses, "/responses":
		return epResponses, true
	}
	if ep, _, ok := azureEndpoint(path); ok {
		return ep, true
	}
	if _, _, ok := geminiMethod(path); ok {
		return epGemini, true
	}
	if _, _, ok := vertexMethod(path); ok {
		return epGemini, true // Vertex's Gemini bodies, counted with Gemini's
	}
	if _, _, ok := bedrockMethod(path); ok {
		return epBedrock, true
	}
	return 0, false
}

// ServeHTTP routes the mock's endpoints.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case pathChat:
		if r.Method != http.MethodPost {
			methodNotAllowed(w, http.MethodPost)
			return
		}
		s.serveChat(w, r)
	case pathMessages, "/messages":
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			anthropicWire{}.reject(w, http.StatusMethodNotAllowed, "method not allowed", "", "")
			return
		}
		s.serveMessages(w, r)
	case pathEmbeddings, "/embeddings":
		if r.Method != http.MethodPost {
			methodNotAllowed(w, http.MethodPost)
			return
		}
		s.serveEmbeddings(w, r)
	case pathResponses, "/responses":
		if r.Method != http.MethodPost {
			methodNotAllowed(w, http.MethodPost)
			return
		}
		s.serveResponses(w, r)
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
		s.serveStats(w, r)
	case "/mock/behavior":
		s.serveBehavior(w, r)
	case "/mock/reset":
		if r.Method != http.MethodPost {
			methodNotAllowed(w, http.MethodPost)
			return
		}
		s.Reset()
		w.WriteHeader(http.StatusNoContent)
	case PathToken:
		if r.Method != http.MethodPost {
			methodNotAllowed(w, http.MethodPost)
			return
		}
		s.serveToken(w, r)
	case "/mock/last-request":
		if r.Method != http.MethodGet {
			methodNotAllowed(w, http.MethodGet)
			return
		}
		s.serveLastRequest(w, r)
	default:
		if ep, deployment, ok := azureEndpoint(r.URL.Path); ok {
			s.serveAzure(w, r, ep, deployment)
			return
		}
		if model, method, ok := geminiMethod(r.URL.Path); ok {
			if r.Method != http.MethodPost {
				w.Header().Set("Allow", http.MethodPost)
				geminiWire{}.reject(w, http.StatusMethodNotAllowed, "method not allowed", "", "")
				return
			}
			s.serveGemini(w, r, model, method, false)
			return
		}
		if model, method, ok := vertexMethod(r.URL.Path); ok {
			if r.Method != http.MethodPost {
				w.Header().Set("Allow", http.MethodPost)
				geminiWire{}.reject(w, http.StatusMethodNotAllowed, "method not allowed", "", "")
				return
			}
			s.serveGemini(w, r, model, method, true)
			return
		}
		if model, stream, ok := bedrockMethod(r.URL.EscapedPath()); ok {
			if r.Method != http.MethodPost {
				w.Header().Set("Allow", http.MethodPost)
				bedrockWire{}.reject(w, http.StatusMethodNotAllowed, "method not allowed", "", "")
				return
			}
			s.serveBedrock(w, r, model, stream)
			return
		}
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
