package upstream

import (
	"bytes"
	"errors"

	"github.com/llmgw/gateway/internal/upstream/anthropic"
	"github.com/llmgw/gateway/internal/upstream/anthropicclient"
)

// This file holds the Readers of a translated answer: an anthropic
// provider's for an OpenAI client (fromAnthropic) and an OpenAI-format
// provider's for an Anthropic client (toAnthropic), both over the event
// loop translateEvents.

// fromAnthropic reads an anthropic provider's answer for an OpenAI client.
type fromAnthropic struct {
	usageCheck
	t       *anthropic.StreamTranslator
	model   string
	created int64
	usage   Usage
	has     bool
	chat    []byte // the chat body Body made, for FinishReasons
	scratch []byte // joins an event's data lines when it has several
}

func (f *fromAnthropic) Event(dst, ev []byte, _ bool) ([]byte, error) {
	return translateEvents(dst, ev, &f.scratch, f)
}

// translate implements translator.
func (f *fromAnthropic) translate(dst, name, data []byte) ([]byte, bool, error) {
	out, err := f.t.Event(dst, name, data)
	if err == nil {
		return out, false, nil // without an errors.As, whose target escapes
	}
	var se *anthropic.StreamError
	return out, errors.As(err, &se), err
}

// translator is a translating reader's stream translator: it turns one
// event's name and data into client bytes, and tells an error event
// (isEvent) from a malformed one.
type translator interface {
	translate(dst, name, data []byte) (out []byte, isEvent bool, err error)
}

// translateEvents gives t each event of ev (one, from EventReader) that has
// data, as a browser dispatches only those; scratch joins data lines.
func translateEvents(dst, ev []byte, scratch *[]byte, t translator) ([]byte, error) {
	for len(ev) > 0 {
		var e EventFields
		e, ev, *scratch = nextEvent(ev, *scratch)
		if !e.HasData {
			continue
		}
		out, isEvent, err := t.translate(dst, e.Name, e.Data)
		switch {
		case isEvent:
			return out, &EventError{Data: string(bytes.TrimSpace(e.Data))}
		case err != nil:
			return out, &ProtocolError{Err: err}
		}
		dst = out
	}
	return dst, nil
}

func (f *fromAnthropic) Done() bool  { return f.t.Done() }
func (f *fromAnthropic) Whole() bool { return true }

// End: an Anthropic stream that ends without message_stop was cut, even
// after its message_delta; the client's [DONE] is never made up.
func (f *fromAnthropic) End(dst []byte) ([]byte, error) { return dst, endedEarly() }

func (f *fromAnthropic) Usage() (Usage, bool) {
	if f.has {
		return f.checked(f.usage, true)
	}
	u, ok := f.t.Usage()
	if ok && f.t.BadUsage() {
		f.unreadable()
	}
	return f.checked(Usage(u), ok)
}

func (f *fromAnthropic) Body(body []byte) ([]byte, error) {
	out, err := anthropic.MessageToChat(body, f.model, f.created)
	if err != nil {
		return nil, &ProtocolError{Err: err}
	}
	if u, ok := anthropic.BodyUsage(body); ok {
		f.usage, f.has = Usage(u), true
	} else if hasUsageObject(body) {
		f.unreadable()
	}
	f.chat = out
	return out, nil
}

func (f *fromAnthropic) TailUsage([]byte) (Usage, bool) { return f.Usage() }

// toAnthropic reads an openai provider's answer for an Anthropic client.
type toAnthropic struct {
	usageCheck
	t       *anthropicclient.StreamTranslator
	model   string
	usage   Usage
	has     bool
	chat    []byte // the provider's chat body, for FinishReasons
	scratch []byte // joins an event's data lines when it has several
}

func (a *toAnthropic) Event(dst, ev []byte, _ bool) ([]byte, error) {
	return translateEvents(dst, ev, &a.scratch, a)
}

// translate implements translator: a chat stream's events have no names.
func (a *toAnthropic) translate(dst, _, data []byte) ([]byte, bool, error) {
	out, err := a.t.Data(dst, data)
	if err == nil {
		return out, false, nil
	}
	var pe *anthropicclient.ProviderError
	return out, errors.As(err, &pe), err
}

func (a *toAnthropic) Done() bool { return a.t.Done() }

// End closes the message (stop_reason, message_stop) only for a stream that
// gave its finish_reason, as PassReader does for chat: otherwise the
// answer, and any tool call's arguments, may be cut anywhere.
func (a *toAnthropic) End(dst []byte) ([]byte, error) {
	if !a.t.Finished() {
		return dst, endedEarly()
	}
	return a.t.Finish(dst), nil
}

func (a *toAnthropic) Whole() bool { return true }

func (a *toAnthropic) Usage() (Usage, bool) {
	if a.has {
		return a.checked(a.usage, true)
	}
	u, ok := a.t.Usage()
	if ok && u.Invalid {
		a.unreadable()
	}
	return a.checked(chatUsageOf(u), ok)
}

// chatUsageOf is a chat provider's usage as anthropicclient read it, its
// cache and reasoning counts included: they are costed as on the
// pass-through (before, a cached prompt was billed whole at the input
// price on this route).
func chatUsageOf(u anthropicclient.Usage) Usage {
	return Usage{PromptTokens: u.Prompt, CompletionTokens: u.Completion, TotalTokens: u.Total,
		CachedTokens: u.Cached, ReasoningTokens: u.Reasoning}
}

func (a *toAnthropic) Body(body []byte) ([]byte, error) {
	msg, u, err := anthropicclient.ChatToMessage(body, a.model)
	if err != nil {
		var pe *anthropicclient.ProviderError
		if errors.As(err, &pe) {
			return nil, &EventError{Data: string(bytes.TrimSpace(body))}
		}
		return nil, &ProtocolError{Err: err}
	}
	a.usage, a.chat = chatUsageOf(u), body
	// Any count at all is a usage, a negative one too, which the check
	// then refuses rather than taking it for none.
	a.has = u.Total != 0 || u.Prompt != 0 || u.Completion != 0 || u.Cached != 0 || u.Reasoning != 0
	if u.Invalid {
		a.unreadable()
	}
	return msg, nil
}

func (a *toAnthropic) TailUsage([]byte) (Usage, bool) { return a.Usage() }
