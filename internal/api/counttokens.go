package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/llmgw/gateway/internal/upstream"
)

// countTokensPath is the Anthropic SDKs' Messages.CountTokens.
const countTokensPath = "/v1/messages/count_tokens"

// messagesCountTokens answers POST /v1/messages/count_tokens with an estimate, in
// Anthropic's shape: {"input_tokens": N}, N the bytes of the request's
// messages, system and tools (as sent) over four, rounded up. The gateway
// does not ask a provider: the planner, admission and records serve model
// calls, and a count is none (it would also need an anthropic provider,
// which an openai-only model lacks). Coding agents call it to decide when
// to compact a conversation, for which an estimate of this kind (about four
// bytes a token for English text and JSON) is what they need. The checks
// are those of /v1/messages: the client key (401), the body (413, 400), the
// model (404 unless it is routed for /v1/messages).
func (s *Server) messagesCountTokens(w http.ResponseWriter, r *http.Request) {
	fail := func(status int, typ, code, param, msg string) {
		writeRouteError(w, r, upstream.RouteMessages, status, typ, code, param, msg)
	}
	if s.draining.Load() {
		w.Header().Set("Connection", "close")
		fail(http.StatusServiceUnavailable, typeServer, codeShuttingDown, "", "the gateway is shutting down")
		return
	}
	rt := s.routing.Load()
	who, ok, msg := s.authenticate(rt, r.Header)
	if !ok {
		fail(http.StatusUnauthorized, typeAuthentication, codeInvalidAPIKey, "", msg)
		return
	}
	body, err := s.readBody(w, r)
	if err != nil {
		status, code, msg := bodyReadError(err)
		fail(status, typeInvalidRequest, code, "", msg)
		return
	}
	// The one request parser's checks, twins of policy members included;
	// then the spans the estimate counts.
	parsed, err := upstream.ParseRequest(upstream.RouteMessages, body)
	if err != nil {
		var re *upstream.RequestError
		errors.As(err, &re)
		fail(http.StatusBadRequest, typeInvalidRequest, codeInvalidRequest, re.Param, re.Message)
		return
	}
	var req struct {
		Messages json.RawMessage `json:"messages"`
		System   json.RawMessage `json:"system"`
		Tools    json.RawMessage `json:"tools"`
	}
	_ = json.Unmarshal(body, &req) // valid JSON: ParseRequest said so
	if !who.allows(parsed.Model) {
		fail(http.StatusForbidden, typePermission, codeModelNotAllowed, "model", "this API key may not use the model '"+parsed.Model+"'")
		return
	}
	if _, _, err := rt.Planner.PlanRoute(parsed.Model, upstream.RouteMessages); err != nil {
		fail(http.StatusNotFound, typeInvalidRequest, codeModelNotFound, "model", "the model '"+parsed.Model+"' does not exist on this gateway")
		return
	}
	n := (len(req.Messages) + len(req.System) + len(req.Tools) + 3) / 4
	out := append(strconv.AppendInt([]byte(`{"input_tokens":`), int64(n), 10), "}\n"...)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(out)))
	_, _ = w.Write(out)
}
