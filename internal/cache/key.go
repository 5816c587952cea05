package cache

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
)

// Identity is what a key is computed over besides the body: the client
// route (chat, messages, embeddings), the scope's identity (a client's or
// team's name, "" when shared) and the model route's name. None of it is a
// secret: a client is named by its configured name, never its token.
type Identity struct {
	Route, Scope, Model string
}

// Key is the SHA-256 of an identity and a request body in canonical form,
// as lower-case hex.
type Key string

// ErrNotObject is a body that is not one JSON object; such a request is not
// cached (the handler refuses it before, so this only guards the parser).
var ErrNotObject = errors.New("cache: request body is not a JSON object")

// NewKey canonicalizes body (object keys sorted, insignificant whitespace
// dropped, the top-level stream and stream_options left out, so a stream
// request and a non-stream one share an entry) and hashes it with id. It
// is called only on cached routes, once per request, over the bytes the
// handler already read.
func NewKey(id Identity, body []byte) (Key, error) {
	// Length-prefixed parts: no identity can be made to collide with
	// another by moving bytes between its fields. They and the canonical
	// body are hashed in one buffer, so a key costs two allocations: the
	// buffer and the key itself.
	buf := make([]byte, 0, 12+len(id.Route)+len(id.Scope)+len(id.Model)+len(body))
	for _, s := range []string{id.Route, id.Scope, id.Model} {
		buf = appendPart(buf, s)
	}
	buf, err := appendCanonical(buf, body)
	if err != nil {
		return "", err
	}
	return hexKey(sha256.Sum256(buf)), nil
}

// PartsKey is the Key of parts alone, each length-prefixed, for what the
// store keeps besides answers (Responses output items): its first part
// names the kind, which no client route's name equals, so it cannot be an
// answer's key.
func PartsKey(parts ...string) Key {
	var buf []byte
	for _, s := range parts {
		buf = appendPart(buf, s)
	}
	return hexKey(sha256.Sum256(buf))
}

// appendPart appends s after its length, 4 bytes big-endian.
func appendPart(buf []byte, s string) []byte {
	buf = append(buf, byte(len(s)>>24), byte(len(s)>>16), byte(len(s)>>8), byte(len(s)))
	return append(buf, s...)
}

// hexKey is sum as lower-case hex.
func hexKey(sum [sha256.Size]byte) Key {
	var b [2 * sha256.Size]byte
	hex.Encode(b[:], sum[:])
	return Key(b[:])
}
