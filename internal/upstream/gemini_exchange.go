package upstream

import (
	"errors"
	"net/http"

	"github.com/llmgw/gateway/internal/upstream/anthropicclient"
	"github.com/llmgw/gateway/internal/upstream/gemini"
)

// The adapter of format gemini: package gemini translates, this file
// decides where the translation goes (the method's URL), how its refusals
// and the provider's errors reach the client, and what the provider's
// errors mean for failover. The readers are in gemini_reader.go.
//
// Chat clients are translated directly; Anthropic clients through the
// OpenAI form (anthropicclient, as for an openai provider, then
// ChatToGemini); Responses clients the same way (responses.go);
// embeddings through batchEmbedContents.

// toGemini translates the client's body for a gemini endpoint, setting x's
// URL (and, for embeddings, what its reader needs).
func (r *ChatRequest) toGemini(ep *Endpoint, model string, x *translation) ([]byte, error) {
	opts := gemini.Options{Model: model, MaxTokens: ep.DefaultMaxTokens}
	chat := r.Body
	switch r.Route {
	case RouteEmbeddings:
		t, err := gemini.EmbeddingsToGemini(r.Body, opts)
		if err != nil {
			return nil, geminiRefusal(err)
		}
		x.url, x.emb = ep.geminiURL(t.Path), t
		return t.Body, nil
	case RouteMessages:
		b, err := messagesToChat(r.Body, model)
		if err != nil {
			return nil, err
		}
		chat = b
	case RouteResponses:
		b, err := r.responsesToChat(model)
		if err != nil {
			return nil, err
		}
		chat = b
	case RouteChat:
	default:
		return nil, &RequestError{Message: "this route is not translated for format gemini"}
	}
	t, err := gemini.ChatToGemini(chat, opts)
	if err != nil {
		re := geminiRefusal(err)
		if r.Route != RouteChat && re.Param != "" {
			// The field is the OpenAI form's (disable_parallel_tool_use
			// became parallel_tool_calls, system left messages): named as
			// such, never as if the Anthropic client had written it.
			re.Message = "in the request's OpenAI form, " + re.Param + ": " + re.Message
			re.Param = ""
		}
		return nil, re
	}
	x.url = ep.geminiURL(t.Path)
	return t.Body, nil
}

// geminiRefusal is a translation's refusal as the client's 400: a
// *gemini.FieldError names the field; any other error (no model) is the
// gateway's wording.
func geminiRefusal(err error) *RequestError {
	var fe *gemini.FieldError
	if errors.As(err, &fe) {
		return &RequestError{Param: fe.Param, Message: fe.Message}
	}
	return &RequestError{Message: err.Error()}
}

// geminiStatus reads what a gemini provider's error body says beyond its
// status:
//
//   - RetryInfo's retryDelay (sent with 429 RESOURCE_EXHAUSTED) is the
//     wait when no Retry-After header gave one, bounded as a header is;
//   - a key the body blames in a client-fault status (400 with an
//     API_KEY_* reason) is the key's fault, not the client's (KeyFault):
//     the provider's other keys are tried and the key cools, as for a 401.
//     A 400 FAILED_PRECONDITION (billing, region) is relayed like
//     INVALID_ARGUMENT, as the provider contract has it.
//
// A 429 RESOURCE_EXHAUSTED speaks for the key (KeyWide), as the contract
// has it (docs/formats.md): Gemini's quotas belong to the key's project,
// and a project that ran out of requests or tokens per minute for one
// model is usually near its other limits too, so the key cools and the
// provider's other keys are tried before the next candidate.
func geminiStatus(se *StatusError) {
	ge, ok := gemini.ParseError(se.Code, se.Body)
	if !ok {
		return
	}
	if se.Code == http.StatusTooManyRequests {
		se.KeyWide = true
	}
	if se.RetryAfter == 0 && ge.RetryDelay > 0 {
		se.RetryAfter = min(ge.RetryDelay, maxRetryAfter)
	}
	se.KeyFault = ge.KeyScoped() && se.ClientFault()
}

// geminiRelayed is a gemini provider's client-fault answer in the client's
// format: the provider's message, the OpenAI error type its google.rpc
// status maps to (gemini.Error.OpenAIErrorType), the status kept.
func (r *ChatRequest) geminiRelayed(se *StatusError) []byte {
	msg, typ := http.StatusText(se.Code), "invalid_request_error"
	if ge, ok := gemini.ParseError(se.Code, se.Body); ok {
		if ge.Message != "" {
			msg = ge.Message
		}
		typ = ge.OpenAIErrorType()
	}
	if r.Route == RouteMessages {
		return anthropicclient.ErrorBody(se.Code, msg)
	}
	return openAIError(msg, typ, "", "")
}

// blockedAnswer is a prompt Gemini blocked (*gemini.BlockedError) as the
// client's 400, in its format: the content is refused, so the request
// fails over nowhere (another Gemini key would block it too) and the
// client is told why, as a client fault is relayed.
func blockedAnswer(route Route, be *gemini.BlockedError) *StatusError {
	msg := be.Error()
	se := &StatusError{Code: http.StatusBadRequest, Header: http.Header{"Content-Type": {"application/json"}}}
	if route == RouteMessages {
		se.Body = anthropicclient.ErrorBody(http.StatusBadRequest, msg)
	} else {
		se.Body = openAIError(msg, "invalid_request_error", "", "content_filter")
	}
	return se
}
