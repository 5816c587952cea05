package upstream

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/llmgw/gateway/internal/upstream/anthropicclient"
	"github.com/llmgw/gateway/internal/upstream/bedrock"
)

// bedrockReader is the reader of an attempt on a bedrock endpoint.
func (r *ChatRequest) bedrockReader() Reader {
	created := time.Now().Unix()
	f := &fromBedrock{model: r.Model, created: created}
	if r.Route == RouteMessages {
		// The Anthropic client's usage comes from the chat stream's usage
		// chunk, so it is always asked for.
		f.t = bedrock.NewStreamTranslator(r.Model, created, true)
		f.msgs = anthropicclient.NewStreamTranslator(r.Model)
	} else {
		f.t = bedrock.NewStreamTranslator(r.Model, created, r.IncludeUsage)
	}
	return f
}

// fromBedrock reads a bedrock provider's answer for an OpenAI chat client
// or, with msgs, for an Anthropic one: the stream's events (frames as SSE
// events, bedrock_frames.go) become chat chunks (bedrock.StreamTranslator),
// and those Anthropic events.
type fromBedrock struct {
	usageCheck
	t       *bedrock.StreamTranslator
	msgs    *anthropicclient.StreamTranslator // an Anthropic client; nil for chat
	model   string
	created int64
	usage   Usage
	has     bool
	chunks  []byte // t's chat chunks, before msgs translates them
	chat    []byte // the chat body Body made, for FinishReasons
	scratch []byte
}

func (f *fromBedrock) Event(dst, ev []byte, _ bool) ([]byte, error) {
	return translateEvents(dst, ev, &f.scratch, f)
}

// translate implements translator. An exception frame is an error event:
// before the commit point it fails over unseen, after it the stream ends
// with the client format's error frame.
func (f *fromBedrock) translate(dst, name, data []byte) ([]byte, bool, error) {
	if f.msgs == nil {
		out, err := f.t.Event(dst, name, data)
		var be *bedrock.Error
		return out, errors.As(err, &be), err
	}
	chunks, err := f.t.Event(f.chunks[:0], name, data)
	f.chunks = chunks
	out, merr := toMessages(f.msgs, dst, chunks)
	if err != nil {
		var be *bedrock.Error
		return out, errors.As(err, &be), err
	}
	return out, false, merr
}

// toMessages has msgs translate the chat chunks a translator wrote, each
// one frame "data: {...}\n\n" (JSON without raw newlines), appending to
// dst.
func toMessages(msgs *anthropicclient.StreamTranslator, dst, chunks []byte) ([]byte, error) {
	for len(chunks) > 0 {
		frame := chunks
		if i := bytes.Index(chunks, frameEnd); i >= 0 {
			frame, chunks = chunks[:i], chunks[i+len(frameEnd):]
		} else {
			chunks = nil
		}
		var err error
		if dst, err = msgs.Data(dst, bytes.TrimPrefix(frame, dataPrefix)); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

func (f *fromBedrock) Done() bool {
	if f.msgs != nil {
		return f.msgs.Done()
	}
	return f.t.Done()
}

func (f *fromBedrock) Whole() bool { return true }

// End closes an answer whose messageStop came but whose metadata did not;
// one cut before messageStop fails as a cut.
func (f *fromBedrock) End(dst []byte) ([]byte, error) {
	chunks, err := f.t.End(f.chunks[:0])
	if err != nil {
		return dst, &ProtocolError{Err: fmt.Errorf("%w: %w", ErrEndedEarly, err)}
	}
	if f.msgs == nil {
		return append(dst, chunks...), nil
	}
	f.chunks = chunks
	out, err := toMessages(f.msgs, dst, chunks)
	if err != nil {
		return out, &ProtocolError{Err: err}
	}
	return out, nil
}

func (f *fromBedrock) Usage() (Usage, bool) {
	if f.has {
		return f.checked(f.usage, true)
	}
	u, ok := f.t.Usage()
	return f.checked(Usage(u), ok)
}

var bedrockUsageKey = []byte(`"usage"`)

func (f *fromBedrock) Body(body []byte) ([]byte, error) {
	out, err := bedrock.ConverseToChat(body, f.model, f.created)
	if err != nil {
		return nil, &ProtocolError{Err: err}
	}
	if u, ok := bedrock.BodyUsage(body); ok {
		f.usage, f.has = Usage(u), true
	} else if bytes.Contains(body, bedrockUsageKey) {
		f.unreadable()
	}
	f.chat = out
	if f.msgs == nil {
		return out, nil
	}
	msg, _, err := anthropicclient.ChatToMessage(out, f.model)
	if err != nil {
		return nil, &ProtocolError{Err: err}
	}
	return msg, nil
}

func (f *fromBedrock) TailUsage([]byte) (Usage, bool) { return f.Usage() }
