package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/llmgw/gateway/internal/upstream"
	"github.com/llmgw/gateway/internal/upstream/anthropicclient"
)

// Error types and codes of DESIGN section 4 (contract).
const (
	typeInvalidRequest = "invalid_request_error"
	typeAuthentication = "authentication_error"
	typeRateLimit      = "rate_limit_error"
	typeUpstream       = "upstream_error"
	typeServer         = "server_error"
	typePermission     = "permission_error"

	codeInvalidRequest      = "invalid_request"
	codeInvalidAPIKey       = "invalid_api_key"
	codeModelNotFound       = "model_not_found"
	codeRequestTooLarge     = "request_too_large"
	codeCandidatesExhausted = "candidates_exhausted"
	codeInternal            = "internal_error"
	codeShuttingDown        = "shutting_down"
	codeNotFound            = "not_found"
	codeMethodNotAllowed    = "method_not_allowed"
	codeModelNotAllowed     = "model_not_allowed"
	codeStoreUnavailable    = "store_unavailable"
	codeReadOnlyToken       = "read_only_token"
)

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Message   string  `json:"message"`
	Type      string  `json:"type"`
	Param     *string `json:"param"`
	Code      string  `json:"code"`
	RequestID string  `json:"request_id,omitempty"`
}

// writeError writes an OpenAI-shaped error. param may be "" for null.
func writeError(w http.ResponseWriter, r *http.Request, status int, typ, code, param, msg string) {
	d := errorDetail{Message: msg, Type: typ, Code: code, RequestID: requestID(r.Context()).String()}
	if param != "" {
		d.Param = &param
	}
	b, _ := json.Marshal(errorBody{Error: d})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// writeRouteError writes the error in the shape the route's clients read:
// Anthropic's on /v1/messages, {"type":"error","error":{"type":...,
// "message":...}} with the type its status stands for (a named param is put
// before the message), OpenAI's everywhere else.
func writeRouteError(w http.ResponseWriter, r *http.Request, route upstream.Route, status int, typ, code, param, msg string) {
	if route != upstream.RouteMessages {
		writeError(w, r, status, typ, code, param, msg)
		return
	}
	if param != "" {
		msg = param + ": " + msg
	}
	b := anthropicclient.ErrorBody(status, msg)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// streamErrorFrame is the frame that ends a stream cut after bytes reached
// the client, in the route's stream format: Anthropic's event: error on
// /v1/messages, the Responses API's error event on /v1/responses, the
// chat error object otherwise.
func streamErrorFrame(route upstream.Route, status int, msg string) []byte {
	switch route {
	case upstream.RouteMessages:
		if status < 500 {
			status = http.StatusBadGateway
		}
		return anthropicclient.ErrorEvent(nil, status, msg)
	case upstream.RouteResponses:
		b, _ := json.Marshal(struct {
			Type    string  `json:"type"`
			Code    string  `json:"code"`
			Message string  `json:"message"`
			Param   *string `json:"param"`
		}{"error", "stream_interrupted", msg, nil})
		out := append([]byte("event: error\ndata: "), b...)
		return append(out, "\n\n"...)
	}
	return streamErrorEvent(msg)
}

// retryAfterSeconds renders a wait as whole seconds, at least 1.
func retryAfterSeconds(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return strconv.FormatInt(s, 10)
}

// streamErrorEvent is the one event that ends a stream cut after bytes
// reached the client (DESIGN section 4). No [DONE] follows it.
func streamErrorEvent(msg string) []byte {
	b, _ := json.Marshal(struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    string `json:"code"`
		} `json:"error"`
	}{Error: struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    string `json:"code"`
	}{msg, typeUpstream, "stream_interrupted"}})
	out := make([]byte, 0, len(b)+8)
	out = append(out, "data: "...)
	out = append(out, b...)
	return append(out, "\n\n"...)
}
