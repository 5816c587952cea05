package upstream

import (
	"errors"
	"net/http"
	"strings"

	"github.com/llmgw/gateway/internal/upstream/anthropicclient"
	"github.com/llmgw/gateway/internal/upstream/bedrock"
)

// The adapter of format bedrock: package bedrock translates, this file
// decides where the translation goes (the operation's URL), how its
// refusals and the provider's errors reach the client, and what the
// provider's errors mean for failover. Signing is in bedrock_sign.go, the
// frames of a stream in bedrock_frames.go, the reader in
// bedrock_reader.go.
//
// Chat clients are translated directly; Anthropic clients through the
// OpenAI form (messagesToChat, as for gemini). Embeddings and the
// Responses API are not served.

// BedrockBase is the default runtime endpoint of region.
func BedrockBase(region string) string { return "https://bedrock-runtime." + region + ".amazonaws.com" }

// BedrockErrorTypeHeader names an AWS error answer's exception type.
const BedrockErrorTypeHeader = "X-Amzn-Errortype"

// toBedrock translates the client's body for a bedrock endpoint, setting
// x's URL.
func (r *ChatRequest) toBedrock(ep *Endpoint, model string, x *translation) ([]byte, error) {
	chat := r.Body
	switch r.Route {
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
		return nil, &RequestError{Message: "this route is not translated for format bedrock"}
	}
	t, err := bedrock.ChatToConverse(chat, bedrock.Options{Model: model, MaxTokens: ep.DefaultMaxTokens})
	if err != nil {
		var fe *bedrock.FieldError
		if !errors.As(err, &fe) {
			return nil, &RequestError{Message: err.Error()}
		}
		re := &RequestError{Param: fe.Param, Message: fe.Message}
		if r.Route != RouteChat && re.Param != "" {
			// The field is the OpenAI form's, never named as if the
			// Anthropic or Responses client had written it.
			re.Message = "in the request's OpenAI form, " + re.Param + ": " + re.Message
			re.Param = ""
		}
		return nil, re
	}
	x.url = ep.bedrock + t.Path
	return t.Body, nil
}

// bedrockStatus reads what a bedrock provider's error says beyond its
// status (the type from x-amzn-ErrorType, else the body's __type):
//
//   - ThrottlingException speaks for the credentials (KeyWide): Bedrock's
//     quotas are the account's per region, so the key cools and the
//     provider's other credentials are tried;
//   - a credentials refusal in a status that does not say so (an
//     IncompleteSignatureException is a 400) is the key's (KeyFault);
//   - ModelStreamErrorException and ModelErrorException (424) are the
//     model's failures, counted for its health as a 5xx is (ModelFault);
//   - a ValidationException for the prompt's size is a context-length
//     refusal (TooLong): another candidate may take it.
//
// ModelNotReadyException (429) without a key-wide signal is the model's
// capacity, ModelTimeoutException (408) a timeout, 5xx the provider's:
// their statuses say so already.
func bedrockStatus(se *StatusError, h http.Header) {
	be, ok := bedrock.ParseError(h.Get(BedrockErrorTypeHeader), se.Body)
	if !ok {
		return
	}
	switch {
	case be.Type == bedrock.TypeThrottling:
		se.KeyWide = true
	case be.KeyScoped() && se.ClientFault():
		se.KeyFault = true
	case be.ModelFault():
		se.ModelFault = true
	case be.TooLong():
		se.TooLong = true
	}
}

// bedrockRelayed is a bedrock provider's client-fault answer in the
// client's format: the provider's message, the status kept. The message
// passes through the gateway's redactor like every relayed body.
func (r *ChatRequest) bedrockRelayed(se *StatusError) []byte {
	msg, typ := http.StatusText(se.Code), "invalid_request_error"
	// se.Header is filtered for the client already: the type is the
	// body's, if it names one; the message is the body's either way.
	be, ok := bedrock.ParseError("", se.Body)
	if be.Message != "" {
		msg = be.Message
	}
	if ok {
		typ = be.OpenAIErrorType()
	}
	if r.Route == RouteMessages {
		return anthropicclient.ErrorBody(se.Code, msg)
	}
	return openAIError(msg, typ, "", "")
}

// isBedrockEventStream reports whether a stream's Content-Type is the
// eventstream's.
func isBedrockEventStream(ct string) bool {
	return strings.HasPrefix(strings.ToLower(strings.TrimSpace(ct)), EventStreamContentType)
}
