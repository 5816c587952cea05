package upstream

import (
	"bytes"
	"errors"
	"time"

	"github.com/llmgw/gateway/internal/upstream/anthropic"
	"github.com/llmgw/gateway/internal/upstream/bedrock"
	"github.com/llmgw/gateway/internal/upstream/gemini"
	"github.com/llmgw/gateway/internal/upstream/responsesclient"
)

// The Responses API (POST /v1/responses) on providers that do not speak
// it. Every format reaches it through the chat form: the request is
// translated Responses → chat (responsesclient) → the provider's format by
// the translation its chat clients use, and the answer read into chat
// chunks by the reader its chat clients use, which toResponses turns into
// Responses events. A format that translates chat (anthropic, gemini,
// vertex; bedrock the same way) needs only its chat reader here. openai
// providers are passed through, untouched (PassReader).

// responsesToChat is a Responses client's body in the chat form, for
// model, its item references resolved from r.Items. A refusal is the
// client's 400, naming the field.
func (r *ChatRequest) responsesToChat(model string) ([]byte, error) {
	b, err := responsesclient.ResponsesToChat(r.Body, model, r.Items)
	if err != nil {
		var re *responsesclient.RequestError
		if errors.As(err, &re) {
			return nil, &RequestError{Param: re.Param, Message: re.Message}
		}
		return nil, &RequestError{Message: err.Error()}
	}
	return b, nil
}

// responsesReader reads an attempt on a translated endpoint for a
// Responses client. The chat reader always asks for the usage chunk: the
// terminal response.completed carries the usage.
func (r *ChatRequest) responsesReader(ep *Endpoint) Reader {
	created := time.Now().Unix()
	var chat Reader
	switch {
	case ep.isGemini():
		chat = &fromGemini{route: RouteResponses, model: r.Model, created: created,
			t: gemini.NewStreamTranslator(r.Model, created, true)}
	case ep.isBedrock():
		chat = &fromBedrock{model: r.Model, created: created, t: bedrock.NewStreamTranslator(r.Model, created, true)}
	default:
		chat = &fromAnthropic{t: anthropic.NewStreamTranslator(r.Model, created, true), model: r.Model, created: created}
	}
	return &toResponses{chat: chat, t: responsesclient.NewStreamTranslator(r.Model), model: r.Model, keep: r.KeepItems}
}

// toResponses turns what a chat reader makes of a provider's answer into
// the Responses API's. The usage is the chat reader's, read from the
// provider's own counts, as for a chat client.
type toResponses struct {
	chat   Reader
	t      *responsesclient.StreamTranslator
	model  string
	chunks []byte // the chat reader's chunks, before t translates them
	// keep is handed the output items of the whole answer before it
	// reaches the client (nil: not kept); kept is that it was
	keep func([]responsesclient.Item)
	kept bool
}

func (x *toResponses) Event(dst, ev []byte, committed bool) ([]byte, error) {
	chunks, err := x.chat.Event(x.chunks[:0], ev, committed)
	x.chunks = chunks
	out, terr := x.feed(dst, chunks)
	x.keepWhole()
	if err != nil {
		return out, err
	}
	return out, terr
}

// keepWhole hands keep the items of a stream whose terminal event was just
// translated, before the caller writes that event: a client that names
// them in its next request finds them.
func (x *toResponses) keepWhole() {
	if x.keep == nil || x.kept || !x.t.Done() {
		return
	}
	if items := x.t.Items(); items != nil {
		x.kept = true
		x.keep(items)
	}
}

// feed has t translate the chat chunks the chat reader wrote, each one
// frame "data: {...}\n\n", appending to dst.
func (x *toResponses) feed(dst, chunks []byte) ([]byte, error) {
	for len(chunks) > 0 {
		frame := chunks
		if i := bytes.Index(chunks, frameEnd); i >= 0 {
			frame, chunks = chunks[:i], chunks[i+len(frameEnd):]
		} else {
			chunks = nil
		}
		var err error
		if dst, err = x.t.Data(dst, bytes.TrimPrefix(frame, dataPrefix)); err != nil {
			var pe *responsesclient.ProviderError
			if errors.As(err, &pe) {
				return dst, &EventError{Data: string(pe.Data)}
			}
			return dst, &ProtocolError{Err: err}
		}
	}
	return dst, nil
}

func (x *toResponses) Done() bool  { return x.t.Done() }
func (x *toResponses) Whole() bool { return true }

// End closes the response for a stream the chat reader closes (its last
// chunks, [DONE]); one it calls cut stays cut.
func (x *toResponses) End(dst []byte) ([]byte, error) {
	chunks, err := x.chat.End(x.chunks[:0])
	x.chunks = chunks
	if err != nil {
		return dst, err
	}
	out, err := x.feed(dst, chunks)
	if err != nil {
		return out, err
	}
	if !x.t.Done() {
		if !x.t.Finished() {
			return out, endedEarly()
		}
		out = x.t.Finish(out)
	}
	x.keepWhole()
	return out, nil
}

func (x *toResponses) Body(body []byte) ([]byte, error) {
	chat, err := x.chat.Body(body)
	if err != nil {
		return nil, err
	}
	if x.keep == nil {
		out, err := responsesclient.ChatToResponse(chat, x.model)
		if err != nil {
			return nil, &ProtocolError{Err: err}
		}
		return out, nil
	}
	out, items, err := responsesclient.ChatToResponseItems(chat, x.model)
	if err != nil {
		return nil, &ProtocolError{Err: err}
	}
	x.keep(items)
	return out, nil
}

func (x *toResponses) Usage() (Usage, bool)                { return x.chat.Usage() }
func (x *toResponses) UsageError() error                   { return x.chat.UsageError() }
func (x *toResponses) TailUsage(tail []byte) (Usage, bool) { return x.chat.TailUsage(tail) }
