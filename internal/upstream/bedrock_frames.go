package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/llmgw/gateway/internal/jsontext"
	"github.com/llmgw/gateway/internal/upstream/bedrock"
)

// A ConverseStream body is application/vnd.amazon.eventstream: binary
// frames, each CRC-checked, with headers naming the event. The gateway
// reads every provider stream as SSE events (EventReader, one reader for
// every format), so frameBody decodes the frames with aws-sdk-go-v2's
// eventstream decoder and presents each as the SSE event
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

// maxFramePayload bounds the payload buffer kept between frames; the
// decoder itself refuses frames over 16 MiB.
const maxFramePayload = 64 << 10

type frameBody struct {
	body    io.ReadCloser
	dec     *eventstream.Decoder
	payload []byte
	pending []byte // SSE bytes of the frame decoded last, not yet read
	sse     []byte // pending's backing buffer
	err     error  // what ends the body, once the frames before it were read
}

// newFrameBody reads body's frames as SSE events.
func newFrameBody(body io.ReadCloser) *frameBody {
	return &frameBody{body: body, dec: eventstream.NewDecoder()}
}

func (b *frameBody) Close() error { return b.body.Close() }

func (b *frameBody) Read(p []byte) (int, error) {
	for len(b.pending) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		msg, err := b.dec.Decode(b.body, b.payload[:0])
		if cap(msg.Payload) <= maxFramePayload {
			b.payload = msg.Payload[:0]
		}
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
		b.sse, err = appendFrameEvent(b.sse[:0], msg)
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
func appendFrameEvent(dst []byte, msg eventstream.Message) ([]byte, error) {
	header := func(name string) string {
		if v, ok := msg.Headers.Get(name).(eventstream.StringValue); ok {
			return string(v)
		}
		return ""
	}
	var name, typ, text string
	switch mt := header(":message-type"); mt {
	case "event":
		name = header(":event-type")
		if name == "" || !jsontext.Valid(msg.Payload) {
			return dst, fmt.Errorf("%w: event %q without a name or a JSON payload", ErrBadFrame, clip(name, 64))
		}
		dst = append(dst, "event: "...)
		dst = append(dst, name...)
		dst = append(dst, "\ndata: "...)
		var buf bytes.Buffer
		_ = json.Compact(&buf, msg.Payload) // valid, checked above
		dst = append(dst, buf.Bytes()...)
		return append(dst, "\n\n"...), nil
	case "exception":
		typ = header(":exception-type")
		var v struct {
			Message  string `json:"message"`
			MessageC string `json:"Message"`
		}
		_ = json.Unmarshal(msg.Payload, &v)
		text = v.Message
		if text == "" {
			text = v.MessageC
		}
	case "error":
		typ, text = header(":error-code"), header(":error-message")
	default:
		return dst, fmt.Errorf("%w: :message-type %q", ErrBadFrame, clip(mt, 64))
	}
	dst = append(dst, "event: "+bedrock.ExceptionEvent+"\ndata: "...)
	b, _ := json.Marshal(struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}{bedrock.TypeName(typ), text})
	dst = append(dst, b...)
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
