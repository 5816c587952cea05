package cache

import (
	"crypto/sha256"
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
	// body are hashed in one buffer, a pooled canonicalizer's, so a key
	// costs one allocation: the key itself.
	c := canonicalizers.Get().(*canonicalizer)
	buf := c.hashed[:0]
	for _, s := range []string{id.Route, id.Scope, id.Model} {
		buf = append(buf, byte(len(s)>>24), byte(len(s)>>16), byte(len(s)>>8), byte(len(s)))
		buf = append(buf, s...)
	}
	c.in, c.i, c.level = body, 0, 0
	out, err := c.appendCanonical(buf)
	c.in = nil
	var sum [sha256.Size]byte
	if err == nil {
		sum = sha256.Sum256(out)
		buf = out
	}
	c.hashed = buf[:0]
	if c.scratchBytes() <= maxPooledScratch {
		canonicalizers.Put(c)
	}
	if err != nil {
		return "", err
	}
	var hex [2 * sha256.Size]byte
	const digits = "0123456789abcdef"
	for i, b := range sum {
		hex[2*i], hex[2*i+1] = digits[b>>4], digits[b&15]
	}
	return Key(hex[:]), nil
}
