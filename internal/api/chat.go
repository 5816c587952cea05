package api

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/budget"
	"github.com/llmgw/gateway/internal/candidates"
	"github.com/llmgw/gateway/internal/report"
	"github.com/llmgw/gateway/internal/upstream"
)

const (
	priorityHeader = "X-Gateway-Priority"
	deadlineHeader = "X-Gateway-Deadline"
)

// apiHandler serves one client route: POST /v1/chat/completions,
// /v1/messages, /v1/embeddings or /v1/responses. The routes share every
// step; only the body's required fields, the provider formats that can
// serve them and the shape of errors differ, so the route is the handler's
// one field. Its frame is under a stream for the stream's whole life: the
// checks and planning that come first live in prepare, which has returned by
// then (docs/architecture.md, "Stack budget of a stream").
type apiHandler struct {
	s     *Server
	route upstream.Route
}

func (h apiHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, tc, res, cs := h.s.prepare(w, r, h.route)
	if req == nil {
		return
	}
	if cs != nil {
		// A handler that panics past this point still ends its flight:
		// the requests waiting on it must not wait for their deadlines.
		defer cs.abandon()
	}
	w = cs.wrap(w) // nil cs (no cache): w itself
	// r.Context() descends from BaseContext, so HardStop reaches it with the
	// shutdown cause without a per-request context layer. Nothing runs
	// between Run handing out the committed attempt and relay, which owns
	// it from its first statement: a panic there would leak its slots.
	a, out := h.s.opts.Runner.Run(r.Context(), req)
	if a != nil {
		out = h.s.relay(w, a, tc, req.CostInUsage)
	}
	abort := h.s.finish(w, r, req, out)
	h.s.cacheFinish(r.Context(), cs, out)
	tc.finish(out)
	if res != nil && !abort {
		// The answer is whole: send what net/http still buffers before the
		// settle's Redis round trip, which the client need not wait for
		// (its remaining-budget header went out with the reservation's
		// figures). The reservation holds until the settle lands.
		_ = http.NewResponseController(w).Flush()
	}
	settle(r.Context(), res, out)
	h.s.access.request(req, out)
	if abort {
		// The response started and then broke: make sure the client
		// cannot mistake it for a complete one.
		panic(http.ErrAbortHandler)
	}
}

// prepare authenticates, reads, validates and plans a request of route, and
// readies the count of its tokens against the client's rate, from the same
// routes file as the plan. It answers the client itself and returns nil
// when the request is refused.
func (s *Server) prepare(w http.ResponseWriter, r *http.Request, route upstream.Route) (*candidates.Request, *tokenCount, *budget.Reservation, *cacheState) {
	received := s.opts.Runner.Now() // the loop's clock: the records and deadlines are on it
	rj := rejecter{s: s, w: w, r: r, route: route, received: received}
	if s.draining.Load() {
		w.Header().Set("Connection", "close")
		rj.reject(http.StatusServiceUnavailable, typeServer, codeShuttingDown, "", "the gateway is shutting down")
		return nil, nil, nil, nil
	}
	rt := s.routing.Load() // one routes file for the whole request
	who, ok, msg := s.authenticate(rt, r.Header)
	if !ok {
		rj.reject(http.StatusUnauthorized, typeAuthentication, codeInvalidAPIKey, "", msg)
		return nil, nil, nil, nil
	}
	clientName, ceiling, limits := who.name, who.ceiling, who.limits
	prio, err := requestPriority(r.Header.Get(priorityHeader), ceiling)
	if err != nil {
		rj.reject(http.StatusBadRequest, typeInvalidRequest, codeInvalidRequest, "", err.Error())
		return nil, nil, nil, nil
	}
	asked, err := requestDeadline(r.Header.Get(deadlineHeader))
	if err != nil {
		rj.reject(http.StatusBadRequest, typeInvalidRequest, codeInvalidRequest, "", err.Error())
		return nil, nil, nil, nil
	}
	body, err := s.readBody(w, r)
	if err != nil {
		status, code, msg := bodyReadError(err)
		rj.reject(status, typeInvalidRequest, code, "", msg)
		return nil, nil, nil, nil
	}
	chat, err := upstream.ParseRequest(route, body)
	if err != nil {
		var re *upstream.RequestError
		errors.As(err, &re)
		rj.reject(http.StatusBadRequest, typeInvalidRequest, codeInvalidRequest, re.Param, re.Message)
		return nil, nil, nil, nil
	}
	if !who.allows(chat.Model) {
		// Before planning: a key learns nothing of the models outside its
		// list, not even whether they exist.
		rj.reject(http.StatusForbidden, typePermission, codeModelNotAllowed, "model",
			"this API key may not use the model '"+chat.Model+"'")
		return nil, nil, nil, nil
	}
	planStart := time.Now()
	policy, plan, err := rt.Planner.PlanRoute(chat.Model, route)
	s.opts.Observe.Planned(time.Since(planStart))
	if err != nil {
		msg := "the model '" + chat.Model + "' does not exist on this gateway"
		if errors.Is(err, candidates.ErrRouteNotServed) {
			msg = "the model '" + chat.Model + "' has no provider that serves " + r.URL.Path
		}
		rj.reject(http.StatusNotFound, typeInvalidRequest, codeModelNotFound, "model", msg)
		return nil, nil, nil, nil
	}
	if !checkFirst(rj, chat, &plan[0]) {
		return nil, nil, nil, nil
	}
	if !s.countRate(rj, clientName, limits) {
		return nil, nil, nil, nil
	}
	req := &candidates.Request{
		ID: requestID(r.Context()), ClientRequestID: clientRequestID(r.Context()),
		Model: chat.Model, Stream: chat.Stream, Client: clientName, Team: limits.team, Priority: prio,
		Received: received, Candidates: plan, Route: route, Exchange: chat, Header: r.Header,
		ClientConcurrency: limits.concurrency, CostInUsage: limits.costInUsage,
	}
	var cs *cacheState
	if policy.Cache != nil {
		var served bool
		cs, served = s.cacheLookup(rj, policy.Cache, chat, body, req)
		s.cacheCounted(w, req)
		if served {
			return nil, nil, nil, nil
		}
	}
	res, ok := s.reserve(rj, limits.owners, estimateMicros(chat, &plan[0], int64(policy.TokensEstimate)))
	if !ok {
		cs.abandon()
		return nil, nil, nil, nil
	}
	req.Hedge = policy.Hedge
	if !policy.Hedge.On() {
		req.Resume = policy.Resume
	}
	if d := shorter(policy.Deadline, asked); d > 0 {
		req.Deadline = received.Add(d)
	}
	return req, s.newTokenCount(r.Context(), clientName, limits), res, cs
}

// checkFirst translates the request for its first candidate, when that
// one's format differs from the client's: a request the format cannot
// express (n > 1 to an anthropic provider) is refused here, before any
// record, like any other invalid request. The translation is kept for the
// first attempt. A later candidate's refusal is the loop's (Classify).
func checkFirst(rj rejecter, chat *upstream.ChatRequest, c *candidates.Candidate) bool {
	ep := c.Target.Provider.Endpoint
	if !ep.Translates(chat.Route) {
		return true
	}
	var call upstream.Call
	if err := chat.Build(ep, c.Model, &call); err != nil {
		var re *upstream.RequestError
		if !errors.As(err, &re) {
			re = &upstream.RequestError{Message: err.Error()}
		}
		rj.reject(http.StatusBadRequest, typeInvalidRequest, codeInvalidRequest, re.Param, re.Message)
		return false
	}
	return true
}

// clientToken is the client's key: the Authorization header, or x-api-key
// (as Anthropic SDKs send it) as a bearer token. Both styles work on every
// route.
func clientToken(h http.Header) string {
	if a := h.Get("Authorization"); a != "" {
		return a
	}
	if k := h.Get("X-Api-Key"); k != "" {
		return "Bearer " + k
	}
	return ""
}

// rejecter answers requests refused before planning on one route.
type rejecter struct {
	s        *Server
	w        http.ResponseWriter
	r        *http.Request
	route    upstream.Route
	received time.Time
}

// reject answers a request refused before planning (bad input, bad key,
// unknown model, draining). It has no ledger rows: no candidate was tried.
func (rj rejecter) reject(status int, typ, code, param, msg string) {
	writeRouteError(rj.w, rj.r, rj.route, status, typ, code, param, msg)
	rj.s.opts.Observe.Rejected(rj.route.String(), status)
	rj.s.access.rejected(requestID(rj.r.Context()), rj.s.traceID(rj.r.Context()), rj.route, status, code, rj.received)
}

// finish answers a request the loop did not answer itself, once its outcome
// is on record. It reports whether the response started and then broke, so
// the connection must be aborted.
func (s *Server) finish(w http.ResponseWriter, r *http.Request, req *candidates.Request, out *candidates.Outcome) (abort bool) {
	switch {
	case out.Committed:
		if out.Status == report.RequestSuccess || out.ErrorType == report.ErrorTypeClientCancelled {
			return false
		}
		if req.Stream && out.ErrorType != report.ErrorTypeClientWriteTimeout {
			if !out.ErrorSent {
				endStream(w, req.Route, out, s.opts.StreamWriteTimeout)
			}
		}
		return true
	case out.Relay != nil:
		s.boundWrites(w)
		h := w.Header()
		upstream.CopyResponseHeaders(h, out.Relay.Header)
		w.WriteHeader(out.Relay.Code)
		// The provider's own words: a provider that echoes the key it
		// was sent must not hand the operator's key to the client.
		_, _ = w.Write(s.opts.Redactor.RedactBytes(out.Relay.Body))
	case out.ErrorType == report.ErrorTypeClientCancelled:
		// Nobody is listening.
	case out.ErrorType == report.ErrorTypeShutdown && out.Code == "":
		s.boundWrites(w)
		writeRouteError(w, r, req.Route, http.StatusServiceUnavailable, typeServer, codeShuttingDown, "", out.Message)
	default:
		s.boundWrites(w)
		typ := typeUpstream
		if out.StatusCode == http.StatusTooManyRequests {
			typ = typeRateLimit
			w.Header().Set("Retry-After", retryAfterSeconds(out.RetryAfter))
		}
		code := out.Code
		if code == "" {
			code = codeCandidatesExhausted
		}
		writeRouteError(w, r, req.Route, out.StatusCode, typ, code, "", out.Message)
	}
	return false
}

// boundWrites bounds the writes of an answer the handler writes itself (an
// error, a relayed 4xx body) by the write timeout: no attempt holds slots
// by then, but a client that never reads must not hold the handler either.
func (s *Server) boundWrites(w http.ResponseWriter) {
	if d := s.opts.StreamWriteTimeout; d > 0 {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d))
	}
}

// endStream ends a started stream with the error event; no [DONE] follows.
// A client that stopped reading (client_write_timeout) is not written to.
// The frame gets a write timeout d of its own: the relay's deadline may be
// the attempt's end, which is what ended the stream (0: no bound).
func endStream(w http.ResponseWriter, route upstream.Route, out *candidates.Outcome, d time.Duration) {
	msg := "the upstream stream was interrupted"
	switch out.ErrorType {
	case report.ErrorTypeShutdown:
		msg = "the gateway is shutting down"
	case report.ErrorTypeDeadline:
		msg = "the request's deadline passed"
	}
	rc := http.NewResponseController(w)
	var dl time.Time
	if d > 0 {
		dl = time.Now().Add(d)
	}
	_ = rc.SetWriteDeadline(dl)
	_, _ = w.Write(streamErrorFrame(route, out.StatusCode, msg))
	_ = rc.Flush()
}

// requestPriority reads X-Gateway-Priority. A client may lower its priority
// but never raise it above its ceiling; urgent is reserved for admin traffic.
func requestPriority(h string, ceiling admission.Priority) (admission.Priority, error) {
	if strings.TrimSpace(h) == "" {
		return ceiling, nil
	}
	p, err := admission.ParsePriority(h)
	if err != nil || p == admission.Urgent {
		return 0, errors.New("X-Gateway-Priority must be one of interactive, foreground, background, maintenance")
	}
	if p < ceiling {
		p = ceiling
	}
	return p, nil
}

// requestDeadline reads X-Gateway-Deadline: a positive Go duration, or
// nothing (0).
func requestDeadline(h string) (time.Duration, error) {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(h)
	if err != nil || d <= 0 {
		return 0, errors.New(deadlineHeader + " must be a positive duration, like 500ms or 30s")
	}
	return d, nil
}

// shorter is the shorter of two optional durations (0 is none): a client's
// deadline may only shorten its route's.
func shorter(a, b time.Duration) time.Duration {
	if a == 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

// bodyReadError is the answer to a body that could not be read: 413 past
// the gateway's limit, else 400.
func bodyReadError(err error) (status int, code, msg string) {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return http.StatusRequestEntityTooLarge, codeRequestTooLarge, "request body is larger than the gateway's limit"
	}
	return http.StatusBadRequest, codeInvalidRequest, "could not read the request body"
}

// readBody reads the capped request body once, within the body timeout so
// a client trickling its body cannot pin a handler; attempts replay it.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	limit := s.opts.MaxRequestBytes
	if r.ContentLength > limit {
		return nil, &http.MaxBytesError{Limit: limit}
	}
	if d := s.opts.ReadBodyTimeout; d > 0 {
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(d))
		body, err := readCapped(w, r, limit)
		if err != nil {
			// Keep the expired deadline: net/http would otherwise wait for
			// the rest of the body before answering, pinned by the very
			// client the deadline is for.
			w.Header().Set("Connection", "close")
			return nil, err
		}
		_ = rc.SetReadDeadline(time.Time{})
		return body, nil
	}
	return readCapped(w, r, limit)
}

func readCapped(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	rd := http.MaxBytesReader(w, r.Body, limit)
	body, err := readAll(rd, r.ContentLength)
	if err != nil {
		return nil, err
	}
	// Closing a body read to its end tells net/http it is consumed, so it
	// does not try to discard a rest when the response starts: that runs
	// deep on the handler's stack, in the middle of a stream's first flush.
	_ = rd.Close()
	return body, nil
}

// readAll reads r to its end; n is the body's length when it is known
// (Content-Length; net/http enforces it), and then the buffer is exactly
// that large: it is kept for the request's life, retries included.
func readAll(r io.Reader, n int64) ([]byte, error) {
	if n < 0 {
		return io.ReadAll(r)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	var probe [1]byte
	if m, err := r.Read(probe[:]); m > 0 || (err != nil && err != io.EOF) {
		if err == nil {
			err = errors.New("request body longer than its Content-Length")
		}
		return nil, err
	}
	return body, nil
}
