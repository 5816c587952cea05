package upstream

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// frameDecoder splits an eventstream body into frames without allocating
// per frame: aws-sdk-go-v2's decoder builds a CRC hash, a tee and limit
// readers, a map of headers and a string per header name and value for
// every frame, and reads the body a few bytes at a time; that was most of a
// bedrock stream's allocations before its first chunk. This one reads what
// the body has into a buffer kept for the stream, checks both CRCs, and
// returns the headers the gateway reads (:message-type, :event-type,
// :exception-type, :error-code, :error-message) as slices of that buffer,
// valid until the next call.
//
// A frame: total length and headers length (4 bytes each, big endian), the
// CRC32 of those 8 bytes, the headers, the payload, the CRC32 of all
// before it. A header: name length (1 byte), name, value type (1 byte),
// value (fixed size by type, or a 2-byte length and bytes).
type frameDecoder struct {
	buf  []byte
	r, w int // buf[r:w] is read from the body and not yet decoded
}

// frame is one decoded frame; its slices are the decoder's buffer's.
type frame struct {
	messageType, eventType, exceptionType, errorCode, errorMessage []byte
	payload                                                        []byte
}

const (
	framePrelude  = 12 // the two lengths and the prelude's CRC
	frameOverhead = framePrelude + 4
	// maxFrame bounds one frame: 16 MiB of payload and 128 KiB of headers,
	// AWS's own limits.
	maxFrame = 16<<20 + 128<<10 + frameOverhead
	// frameReadSize is the smallest read into the buffer: a text delta's
	// frame is about 100 bytes, so one read usually takes a few.
	frameReadSize = 4 << 10
)

// errFrame is a frame that cannot be decoded; the caller wraps it in
// ErrBadFrame.
var errFrame = errors.New("malformed frame")

// next decodes the next frame from body. io.EOF is a body that ended at a
// frame boundary, io.ErrUnexpectedEOF one cut inside a frame; a body's
// other read errors are returned as they are.
func (d *frameDecoder) next(body io.Reader, f *frame) error {
	if d.r == d.w {
		d.r, d.w = 0, 0
		if len(d.buf) > maxFramePayload {
			d.buf = nil // a large frame's buffer is not kept for the rest of the stream
		}
	}
	for d.w-d.r < framePrelude {
		if err := d.fill(body, framePrelude); err != nil {
			return err
		}
	}
	p := d.buf[d.r:d.w]
	total, hlen := binary.BigEndian.Uint32(p), binary.BigEndian.Uint32(p[4:])
	if total < frameOverhead || total > maxFrame || hlen > total-frameOverhead {
		return fmt.Errorf("%w: length %d, headers %d", errFrame, total, hlen)
	}
	if crc32.ChecksumIEEE(p[:8]) != binary.BigEndian.Uint32(p[8:]) {
		return fmt.Errorf("%w: prelude checksum mismatch", errFrame)
	}
	for d.w-d.r < int(total) {
		if err := d.fill(body, int(total)); err != nil {
			return err
		}
	}
	p = d.buf[d.r : d.r+int(total)]
	if crc32.ChecksumIEEE(p[:total-4]) != binary.BigEndian.Uint32(p[total-4:]) {
		return fmt.Errorf("%w: message checksum mismatch", errFrame)
	}
	d.r += int(total)
	*f = frame{payload: p[framePrelude+hlen : total-4]}
	return f.headers(p[framePrelude : framePrelude+hlen])
}

// fill reads more of body, making room for a frame of size bytes. An end
// with nothing buffered is io.EOF, with part of a frame io.ErrUnexpectedEOF.
func (d *frameDecoder) fill(body io.Reader, size int) error {
	if d.r > 0 && len(d.buf)-d.r < size {
		d.w = copy(d.buf, d.buf[d.r:d.w]) // the frame's start to the front
		d.r = 0
	}
	if len(d.buf)-d.r < size {
		nb := make([]byte, max(size, 2*len(d.buf), frameReadSize))
		d.w = copy(nb, d.buf[d.r:d.w])
		d.buf, d.r = nb, 0
	}
	n, err := body.Read(d.buf[d.w:])
	d.w += n
	switch {
	case n > 0:
		return nil
	case err == io.EOF && d.w == d.r:
		return io.EOF
	case err == io.EOF:
		return io.ErrUnexpectedEOF
	case err != nil:
		return err
	}
	return nil // a read of nothing and no error: try again
}

// headers reads a frame's headers, keeping the string ones the gateway
// reads; every header must be well formed.
func (f *frame) headers(h []byte) error {
	for len(h) > 0 {
		n := int(h[0])
		if len(h) < 2+n {
			return fmt.Errorf("%w: header name cut", errFrame)
		}
		name, typ := h[1:1+n], h[1+n]
		h = h[2+n:]
		var size int
		switch typ {
		case 0, 1: // true, false
		case 2: // byte
			size = 1
		case 3: // short
			size = 2
		case 4: // integer
			size = 4
		case 5, 8: // long, timestamp
			size = 8
		case 9: // uuid
			size = 16
		case 6, 7: // bytes, string
			if len(h) < 2 {
				return fmt.Errorf("%w: header value cut", errFrame)
			}
			size = int(binary.BigEndian.Uint16(h))
			h = h[2:]
		default:
			return fmt.Errorf("%w: header value type %d", errFrame, typ)
		}
		if len(h) < size {
			return fmt.Errorf("%w: header value cut", errFrame)
		}
		v := h[:size]
		h = h[size:]
		if typ != 7 {
			continue
		}
		switch string(name) {
		case ":message-type":
			f.messageType = v
		case ":event-type":
			f.eventType = v
		case ":exception-type":
			f.exceptionType = v
		case ":error-code":
			f.errorCode = v
		case ":error-message":
			f.errorMessage = v
		}
	}
	return nil
}
