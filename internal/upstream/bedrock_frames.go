package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/llmgw/gateway/internal/jsontext"
	"github.com/llmgw/gateway/internal/upstream/bedrock"
)

// A ConverseStream body is application/vnd.amazon.eventstream: binary
// frames, each CRC-checked, with headers naming the event. The gateway
// reads every provider stream as SSE events (EventReader, one reader for
// every format), so frameBody decodes the frames (frameDecoder,
// bedrock_decode.go) and presents each as the SSE event
//
//	event: {:event-type}
//	data: {the payload JSON, compacted to one line}
//
// for the bedrock reader to translate; an exception or error frame is
// "event: exception" with data {"__type":...,"message":...}. Nothing of
// the frames reaches the client: the translation is what is relayed.

// EventStreamContentType is the media type of a ConverseStream answer.
const EventStreamContentType = "application/vnd.amazon.eventstream"

// ErrBadFrame is a ConverseStream frame that does not decode: a CRC
// mismatch, an impossible length, a payload that is not JSON. Returned
// wrapped in a *ProtocolError: the stream cannot be trusted past it.
var ErrBadFrame = errors.New("bad eventstream frame")

// maxFramePayload bounds the frame buffer kept between frames; the decoder
// refuses frames over 16 MiB.
const maxFramePayload = 64 << 10

type frameBody struct {
	body    io.ReadCloser
	dec     frameDecoder
	pending []byte       // SSE bytes of the frame decoded last, not yet read
	sse     []byte       // pending's backing buffer
	compact bytes.Buffer // a payload compacted to one line, kept between frames
	err     error        // what ends the body, once the frames before it were read
}

// newFrameBody reads body's frames as SSE events.
func newFrameBody(body io.ReadCloser) *frameBody {
	return &frameBody{body: body}
}

func (b *frameBody) Close() error { return b.body.Close() }

func (b *frameBody) Read(p []byte) (int, error) {
	for len(b.pending) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		var f frame
		err := b.dec.next(b.body, &f)
		switch {
		case err == io.EOF:
			b.err = io.EOF // at a frame boundary: a clean end
			continue
		case errors.Is(err, io.ErrUnexpectedEOF):
			b.err = err // cut inside a frame
			continue
		case err != nil:
			b.err = &ProtocolError{Err: fmt.Errorf("%w: %v", ErrBadFrame, err)}
			continue
		}
		b.sse, err = b.appendFrameEvent(b.sse[:0], &f)
		if err != nil {
			b.err = &ProtocolError{Err: err}
			continue
		}
		b.pending = b.sse
	}
	n := copy(p, b.pending)
	b.pending = b.pending[n:]
	return n, nil
}

// appendFrameEvent appends one decoded frame as an SSE event.
func (b *frameBody) appendFrameEvent(dst []byte, f *frame) ([]byte, error) {
	var typ, text string
	switch mt := f.messageType; string(mt) {
	case "event":
		name := f.eventType
		if len(name) == 0 || !jsontext.Valid(f.payload) {
			return dst, fmt.Errorf("%w: event %q without a name or a JSON payload", ErrBadFrame, clip(string(name), 64))
		}
		dst = append(dst, "event: "...)
		dst = append(dst, name...)
		dst = append(dst, "\ndata: "...)
		b.compact.Reset()
		_ = json.Compact(&b.compact, f.payload) // valid, checked above
		dst = append(dst, b.compact.Bytes()...)
		if b.compact.Cap() > maxFramePayload {
			b.compact = bytes.Buffer{}
		}
		return append(dst, "\n\n"...), nil
	case "exception":
		typ = string(f.exceptionType)
		var v struct {
			Message  string `json:"message"`
			MessageC string `json:"Message"`
		}
		_ = json.Unmarshal(f.payload, &v)
		text = v.Message
		if text == "" {
			text = v.MessageC
		}
	case "error":
		typ, text = string(f.errorCode), string(f.errorMessage)
	default:
		return dst, fmt.Errorf("%w: :message-type %q", ErrBadFrame, clip(string(mt), 64))
	}
	dst = append(dst, "event: "+bedrock.ExceptionEvent+"\ndata: "...)
	v, _ := json.Marshal(struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}{bedrock.TypeName(typ), text})
	dst = append(dst, v...)
	return append(dst, "\n\n"...), nil
}

// bedrockStream presents a ConverseStream answer as SSE: its frames as
// events (frameBody), labelled text/event-stream for the attempt's event
// reader. An answer that is not an eventstream is the provider's protocol
// error, as a non-SSE stream of another format is.
func bedrockStream(resp *http.Response) (*http.Response, error) {
	if ct := resp.Header.Get("Content-Type"); !isBedrockEventStream(ct) {
		resp.Body.Close()
		return nil, &ProtocolError{Err: fmt.Errorf("stream answered with Content-Type %s", strconv.Quote(clip(ct, 64)))}
	}
	resp.Body = newFrameBody(resp.Body)
	resp.Header.Set("Content-Type", "text/event-stream")
	return resp, nil
}
