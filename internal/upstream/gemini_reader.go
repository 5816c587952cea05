package upstream

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/llmgw/gateway/internal/upstream/anthropicclient"
	"github.com/llmgw/gateway/internal/upstream/gemini"
)

// geminiReader is the reader of an attempt on a gemini endpoint, for the
// request's route.
func (r *ChatRequest) geminiReader() Reader {
	created := time.Now().Unix()
	f := &fromGemini{route: r.Route, model: r.Model, created: created}
	switch r.Route {
	case RouteEmbeddings:
		e := &geminiEmbeddings{model: r.Model}
		if r.x != nil {
			// What the reader reads of it (the count of inputs, base64,
			// the estimate) is the client's body's, the same for every
			// model: a hedge that translated for another model since
			// changes nothing of it.
			e.req = r.x.emb
		}
		return e
	case RouteMessages:
		// The Anthropic client's usage comes from the chat stream's usage
		// chunk, so it is always asked for.
		f.t = gemini.NewStreamTranslator(r.Model, created, true)
		f.msgs = anthropicclient.NewStreamTranslator(r.Model)
	default:
		f.t = gemini.NewStreamTranslator(r.Model, created, r.IncludeUsage)
	}
	return f
}

// fromGemini reads a gemini provider's answer for an OpenAI chat client or,
// with msgs, for an Anthropic one: Gemini's events become chat chunks
// (gemini.StreamTranslator), and those Anthropic events.
type fromGemini struct {
	usageCheck
	t       *gemini.StreamTranslator
	msgs    *anthropicclient.StreamTranslator // an Anthropic client; nil for chat
	route   Route
	model   string
	created int64
	usage   Usage
	has     bool
	chunks  []byte // t's chat chunks, before msgs translates them
	chat    []byte // the chat body Body made, for FinishReasons
	scratch []byte // joins an event's data lines when it has several
}

func (f *fromGemini) Event(dst, ev []byte, _ bool) ([]byte, error) {
	return translateEvents(dst, ev, &f.scratch, f)
}

// translate implements translator.
func (f *fromGemini) translate(dst, name, data []byte) ([]byte, bool, error) {
	if f.msgs == nil {
		out, err := f.t.Event(dst, name, data)
		if err == nil {
			return out, false, nil
		}
		return f.verdict(out, err)
	}
	chunks, err := f.t.Event(f.chunks[:0], name, data)
	f.chunks = chunks
	out, merr := f.toMessages(dst, chunks)
	if err != nil {
		return f.verdict(out, err)
	}
	return out, false, merr
}

// verdict sorts a translation error: a Gemini error object in the stream is
// an error event (before the commit point it fails over unseen); a blocked
// prompt is the client's 400, no failover (blockedAnswer); anything else
// is the provider's protocol error.
func (f *fromGemini) verdict(out []byte, err error) ([]byte, bool, error) {
	var ge *gemini.Error
	if errors.As(err, &ge) {
		return out, true, err
	}
	var be *gemini.BlockedError
	if errors.As(err, &be) {
		return out, false, blockedAnswer(f.route, be)
	}
	return out, false, err
}

// toMessages has msgs translate the chat chunks t wrote, each one frame
// "data: {...}\n\n" (JSON without raw newlines), appending to dst.
func (f *fromGemini) toMessages(dst, chunks []byte) ([]byte, error) {
	for len(chunks) > 0 {
		frame := chunks
		if i := bytes.Index(chunks, frameEnd); i >= 0 {
			frame, chunks = chunks[:i], chunks[i+len(frameEnd):]
		} else {
			chunks = nil
		}
		var err error
		if dst, err = f.msgs.Data(dst, bytes.TrimPrefix(frame, dataPrefix)); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

var (
	frameEnd         = []byte("\n\n")
	dataPrefix       = []byte("data: ")
	usageMetadataKey = []byte(`"usageMetadata"`)
)

// Done: Gemini has no last event; the stream is over when the body ends
// after a finishReason (End).
func (f *fromGemini) Done() bool {
	if f.msgs != nil {
		return f.msgs.Done()
	}
	return f.t.Done()
}

func (f *fromGemini) Whole() bool { return true }

// End closes the answer (the usage chunk and [DONE], or message_delta and
// message_stop) for a stream that gave its finishReason. One that did not
// was cut (gemini.ErrIncomplete): it fails as a cut, never relayed as a
// clean end.
func (f *fromGemini) End(dst []byte) ([]byte, error) {
	if f.msgs == nil {
		out, err := f.t.End(dst)
		if err != nil {
			return dst, geminiCut(err)
		}
		return out, nil
	}
	chunks, err := f.t.End(f.chunks[:0])
	f.chunks = chunks
	if err != nil {
		return dst, geminiCut(err)
	}
	out, err := f.toMessages(dst, chunks)
	if err != nil {
		return out, &ProtocolError{Err: err}
	}
	return out, nil
}

// geminiCut is End's error for a stream that ended before a finishReason.
func geminiCut(err error) error {
	return &ProtocolError{Err: fmt.Errorf("%w: %w", ErrEndedEarly, err)}
}

func (f *fromGemini) Usage() (Usage, bool) {
	if f.has {
		return f.checked(f.usage, true)
	}
	u, ok := f.t.Usage()
	return f.checked(Usage(u), ok)
}

func (f *fromGemini) Body(body []byte) ([]byte, error) {
	out, err := gemini.GenerateToChat(body, f.model, f.created)
	if err != nil {
		var be *gemini.BlockedError
		if errors.As(err, &be) {
			return nil, blockedAnswer(f.route, be)
		}
		return nil, &ProtocolError{Err: err}
	}
	if u, ok := gemini.BodyUsage(body); ok {
		f.usage, f.has = Usage(u), true
	} else if bytes.Contains(body, usageMetadataKey) {
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

func (f *fromGemini) TailUsage([]byte) (Usage, bool) { return f.Usage() }

// geminiEmbeddings reads a batchEmbedContents answer for an OpenAI
// embeddings client. Gemini reports no usage for embeddings: the usage is
// EmbedRequest's estimate, ceil(characters / 4) per input.
type geminiEmbeddings struct {
	usageCheck
	req   gemini.EmbedRequest
	model string
	has   bool
}

var errEmbeddingsStream = errors.New("an embeddings answer is not a stream")

func (e *geminiEmbeddings) Event([]byte, []byte, bool) ([]byte, error) {
	return nil, &ProtocolError{Err: errEmbeddingsStream}
}
func (e *geminiEmbeddings) Done() bool                     { return false }
func (e *geminiEmbeddings) End(dst []byte) ([]byte, error) { return dst, endedEarly() }
func (e *geminiEmbeddings) Whole() bool                    { return true }

func (e *geminiEmbeddings) Body(body []byte) ([]byte, error) {
	out, err := gemini.EmbeddingsFromGemini(body, e.model, e.req)
	if err != nil {
		return nil, &ProtocolError{Err: err}
	}
	e.has = true
	return out, nil
}

func (e *geminiEmbeddings) Usage() (Usage, bool) {
	n := e.req.PromptTokens
	return e.checked(Usage{PromptTokens: n, TotalTokens: n}, e.has)
}

func (e *geminiEmbeddings) TailUsage([]byte) (Usage, bool) { return e.Usage() }
