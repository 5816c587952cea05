package api

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/candidates"
	"github.com/llmgw/gateway/internal/report"
	"github.com/llmgw/gateway/internal/upstream"
)

const priorityHeader = "X-Gateway-Priority"

// chatCompletions serves POST /v1/chat/completions.
func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	received := time.Now()
	if s.draining.Load() {
		w.Header().Set("Connection", "close")
		s.reject(w, r, http.StatusServiceUnavailable, typeServer, codeShuttingDown, "", "the gateway is shutting down")
		return
	}
	clientName, ceiling := "", admission.Interactive
	if s.opts.Clients != nil {
		name, c, ok := s.opts.Clients.Authenticate(r.Header.Get("Authorization"))
		if !ok {
			s.reject(w, r, http.StatusUnauthorized, typeAuthentication, codeInvalidAPIKey, "", "invalid or missing API key")
			return
		}
		clientName, ceiling = name, c
	}
	prio, err := requestPriority(r.Header.Get(priorityHeader), ceiling)
	if err != nil {
		s.reject(w, r, http.StatusBadRequest, typeInvalidRequest, codeInvalidRequest, "", err.Error())
		return
	}
	body, err := s.readBody(w, r)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			s.reject(w, r, http.StatusRequestEntityTooLarge, typeInvalidRequest, codeRequestTooLarge, "",
				"request body is larger than the gateway's limit")
			return
		}
		s.reject(w, r, http.StatusBadRequest, typeInvalidRequest, codeInvalidRequest, "", "could not read the request body")
		return
	}
	chat, err := upstream.ParseChatRequest(body)
	if err != nil {
		var re *upstream.RequestError
		errors.As(err, &re)
		s.reject(w, r, http.StatusBadRequest, typeInvalidRequest, codeInvalidRequest, re.Param, re.Message)
		return
	}
	planStart := time.Now()
	plan, err := s.opts.Planner.Plan(chat.Model)
	if s.opts.OnPlan != nil {
		s.opts.OnPlan(time.Since(planStart))
	}
	if err != nil {
		s.reject(w, r, http.StatusNotFound, typeInvalidRequest, codeModelNotFound, "model",
			"the model '"+chat.Model+"' does not exist on this gateway")
		return
	}
	req := &candidates.Request{
		ID: requestID(r.Context()), ClientRequestID: clientRequestID(r.Context()),
		Model: chat.Model, Stream: chat.Stream, Client: clientName, Priority: prio,
		Received: received, Candidates: plan,
	}
	// r.Context() descends from BaseContext, so HardStop reaches it with the
	// shutdown cause without a per-request context layer.
	x := newExchange(w, r, chat, s)
	out := s.opts.Runner.Run(r.Context(), req, x)
	s.finish(w, r, out)
}

// reject answers a request refused before planning (bad input, bad key,
// unknown model, draining). It has no ledger rows: no candidate was tried.
func (s *Server) reject(w http.ResponseWriter, r *http.Request, status int, typ, code, param, msg string) {
	writeError(w, r, status, typ, code, param, msg)
	if s.opts.OnRejected != nil {
		s.opts.OnRejected(status)
	}
}

// finish answers a request the loop did not answer itself.
func (s *Server) finish(w http.ResponseWriter, r *http.Request, out candidates.Outcome) {
	switch {
	case out.Committed:
		if out.Status != report.RequestSuccess && out.ErrorType != report.ErrorTypeClientCancelled {
			// The response started and then broke: make sure the client
			// cannot mistake it for a complete one.
			panic(http.ErrAbortHandler)
		}
	case out.Relay != nil:
		h := w.Header()
		upstream.CopyResponseHeaders(h, out.Relay.Header)
		w.WriteHeader(out.Relay.Code)
		_, _ = w.Write(out.Relay.Body)
	case out.ErrorType == report.ErrorTypeClientCancelled:
		// Nobody is listening.
	case out.ErrorType == report.ErrorTypeShutdown && out.Code == "":
		writeError(w, r, http.StatusServiceUnavailable, typeServer, codeShuttingDown, "", out.Message)
	default:
		typ := typeUpstream
		if out.StatusCode == http.StatusTooManyRequests {
			typ = typeRateLimit
			w.Header().Set("Retry-After", retryAfterSeconds(out.RetryAfter))
		}
		if out.StatusCode == http.StatusInternalServerError {
			typ = typeServer
		}
		writeError(w, r, out.StatusCode, typ, codeCandidatesExhausted, "", out.Message)
	}
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
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength))
	}
	if _, err := io.Copy(&buf, rd); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
