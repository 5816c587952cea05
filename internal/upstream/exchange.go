package upstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"time"

	"github.com/llmgw/gateway/internal/jsontext"
	"github.com/llmgw/gateway/internal/upstream/anthropic"
	"github.com/llmgw/gateway/internal/upstream/anthropicclient"
	"github.com/llmgw/gateway/internal/upstream/gemini"
)

// A *ChatRequest is the adapter between one client request and each
// provider format its candidates speak: it builds every attempt's body (the
// client's bytes with the model spliced in, or a translation) and hands each
// attempt a Reader for the answer. The attempt loop sees it through a small
// interface (candidates.Exchange) and never learns a format.

// Build sets call's URL and Body for an attempt on ep with the upstream
// model. It returns a *RequestError when the request cannot be translated
// for ep's format (a field with no equivalent there): the client's fault,
// which another attempt would meet too. The last translation is kept, so
// the attempt after the API's check (or a failover to the same provider's
// next key) does not translate again. Not safe for concurrent use: the loop
// builds on the request's goroutine.
func (r *ChatRequest) Build(ep *Endpoint, model string, call *Call) error {
	call.URL = ep.URLs[r.Route]
	call.gemini, call.bedrock = ep.isGemini(), ep.isBedrock()
	if !ep.Translates(r.Route) {
		call.Body = r.bodyFor(ep, model)
		return nil
	}
	if r.x == nil {
		r.x = &translation{}
	}
	if x := r.x; x.ep != ep || x.model != model {
		x.ep, x.model, x.url = ep, model, ""
		switch {
		case ep.isGemini():
			x.body, x.err = r.toGemini(ep, model, x)
		case ep.isBedrock():
			x.body, x.err = r.toBedrock(ep, model, x)
		default:
			x.body, x.err = r.translate(ep, model)
		}
	}
	call.Body = r.x.body
	if r.x.url != "" {
		call.URL = r.x.url // a gemini method or bedrock operation: the model is in the path
	}
	return r.x.err
}

// translation is a request's body translated for one endpoint and model.
type translation struct {
	ep    *Endpoint
	model string
	body  []byte
	err   error
	url   string              // the method's URL on a gemini endpoint
	emb   gemini.EmbedRequest // a gemini embeddings translation, for its reader
}

// translate turns the client's body into ep's format.
func (r *ChatRequest) translate(ep *Endpoint, model string) ([]byte, error) {
	switch r.Route {
	case RouteChat, RouteResponses: // an OpenAI client, an anthropic provider
		chat := r.Body
		if r.Route == RouteResponses {
			b, err := r.responsesToChat(model)
			if err != nil {
				return nil, err
			}
			chat = b
		}
		t, err := anthropic.ChatToMessages(chat, anthropic.Options{Model: model, MaxTokens: ep.DefaultMaxTokens})
		if err != nil {
			var fe *anthropic.FieldError
			if errors.As(err, &fe) {
				if r.Route == RouteResponses && fe.Param != "" {
					// The field is the chat form's, not the client's own.
					return nil, &RequestError{Message: "in the request's OpenAI chat form, " + fe.Param + ": " + fe.Message}
				}
				return nil, &RequestError{Param: fe.Param, Message: fe.Message}
			}
			return nil, &RequestError{Message: err.Error()}
		}
		return t.Body, nil
	case RouteMessages: // an Anthropic client, an openai provider
		return messagesToChat(r.Body, model)
	}
	return nil, &RequestError{Message: "this route is not translated"}
}

// messagesToChat is an Anthropic client's body in the OpenAI form, for
// model: what an openai provider is sent, and what other formats translate
// from. A refusal is the client's 400, naming the field.
func messagesToChat(body []byte, model string) ([]byte, error) {
	b, _, err := anthropicclient.MessagesToChat(body, model)
	if err != nil {
		var re *anthropicclient.RequestError
		if errors.As(err, &re) {
			return nil, &RequestError{Param: re.Param, Message: re.Message}
		}
		return nil, &RequestError{Message: err.Error()}
	}
	return b, nil
}

// Reader returns how to read the answer of an attempt on ep. pass is the
// attempt's own pass-through reader, reset and returned when nothing is
// translated, so the common path allocates nothing.
func (r *ChatRequest) Reader(ep *Endpoint, pass *PassReader) Reader {
	if r.Route == RouteResponses && ep.Translates(r.Route) {
		return r.responsesReader(ep)
	}
	if ep.isGemini() {
		return r.geminiReader()
	}
	if ep.isBedrock() {
		return r.bedrockReader()
	}
	if ep.Translates(r.Route) {
		created := time.Now().Unix()
		if r.Route == RouteChat {
			return &fromAnthropic{t: anthropic.NewStreamTranslator(r.Model, created, r.IncludeUsage), model: r.Model, created: created}
		}
		return &toAnthropic{t: anthropicclient.NewStreamTranslator(r.Model), model: r.Model}
	}
	kind := passChat
	switch {
	case r.Route == RouteResponses:
		kind = passResponses
	case r.Route == RouteEmbeddings:
		kind = passEmbeddings
	case ep.Format == FormatAnthropic:
		kind = passMessages
	}
	*pass = PassReader{kind: kind, hide: kind == passChat && r.asksUsage(ep)}
	return pass
}

// Refusal is the client-format answer to a request Build refused: 400,
// naming the field.
func (r *ChatRequest) Refusal(re *RequestError) *StatusError {
	se := &StatusError{Code: http.StatusBadRequest, Header: http.Header{"Content-Type": {"application/json"}}}
	if r.Route == RouteMessages {
		msg := re.Message
		if re.Param != "" {
			msg = re.Param + ": " + msg
		}
		se.Body = anthropicclient.ErrorBody(http.StatusBadRequest, msg)
		return se
	}
	se.Body = openAIError(re.Message, "invalid_request_error", re.Param, "invalid_request")
	return se
}

// Relayed rewrites a provider's client-fault answer (400, 413, 422) from
// ep's format into the client's, keeping the provider's message and status.
// An answer that is not a JSON object (a proxy's HTML page) becomes the
// route's error shape with the upstream status and a message of the
// gateway's own: the gateway's origin serves JSON and SSE only, and the
// provider's page is neither shown nor echoed.
func (r *ChatRequest) Relayed(ep *Endpoint, se *StatusError) {
	if !jsonObject(se) {
		msg := fmt.Sprintf("the provider refused the request (%d %s) with a %s answer, not relayed",
			se.Code, http.StatusText(se.Code), mediaType(se.Header.Get("Content-Type")))
		if r.Route == RouteMessages {
			se.Body = anthropicclient.ErrorBody(se.Code, msg)
		} else {
			se.Body = openAIError(msg, "invalid_request_error", "", "")
		}
		if se.Header == nil {
			se.Header = http.Header{}
		}
		se.Header.Set("Content-Type", "application/json")
		se.Header.Del("Content-Encoding")
		return
	}
	if se.Header != nil && se.Header.Get("Content-Type") == "" {
		se.Header.Set("Content-Type", "application/json") // else net/http sniffs one
	}
	if !ep.Translates(r.Route) {
		return
	}
	if ep.isGemini() || ep.isBedrock() {
		if ep.isGemini() {
			se.Body = r.geminiRelayed(se)
		} else {
			se.Body = r.bedrockRelayed(se)
		}
		se.Header.Set("Content-Type", "application/json")
		return
	}
	switch r.Route {
	case RouteChat, RouteResponses:
		typ, msg, ok := anthropic.ParseError(se.Body)
		if !ok {
			typ, msg = "invalid_request_error", http.StatusText(se.Code)
		}
		se.Body = openAIError(msg, anthropic.OpenAIErrorType(typ), "", "")
	case RouteMessages:
		se.Body = anthropicclient.ErrorFromOpenAI(se.Code, se.Body)
	}
	se.Header.Set("Content-Type", "application/json")
}

// jsonObject reports whether a provider's error answer is a JSON object
// labelled as JSON (or not labelled at all).
func jsonObject(se *StatusError) bool {
	if !jsonContentType(se.Header.Get("Content-Type")) || se.Header.Get("Content-Encoding") != "" {
		return false
	}
	i := jsontext.SkipSpace(se.Body, 0)
	return i < len(se.Body) && se.Body[i] == '{' && jsontext.Valid(se.Body)
}

// mediaType names a provider's Content-Type in a message: its media type
// when it parses as one, never the raw text.
func mediaType(ct string) string {
	if ct == "" {
		return "non-JSON"
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || len(mt) > 64 {
		return "non-JSON"
	}
	return mt
}

// openAIError is an OpenAI-shaped error body; param and code "" are null.
func openAIError(msg, typ, param, code string) []byte {
	type detail struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}
	d := detail{Message: msg, Type: typ}
	if param != "" {
		d.Param = &param
	}
	if code != "" {
		d.Code = &code
	}
	b, _ := json.Marshal(struct {
		Error detail `json:"error"`
	}{d})
	return b
}
