package cache

import (
	"crypto/sha256"
	"errors"
	"strings"
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
	h := sha256.New()
	// Length-prefixed parts: no identity can be made to collide with
	// another by moving bytes between its fields.
	for _, s := range []string{id.Route, id.Scope, id.Model} {
		var n [4]byte
		n[0], n[1], n[2], n[3] = byte(len(s)>>24), byte(len(s)>>16), byte(len(s)>>8), byte(len(s))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	canon, err := Canonical(body)
	if err != nil {
		return "", err
	}
	h.Write(canon)
	return Key(hexString(h.Sum(nil))), nil
}

func hexString(b []byte) string {
	const digits = "0123456789abcdef"
	var sb strings.Builder
	sb.Grow(2 * len(b))
	for _, c := range b {
		sb.WriteByte(digits[c>>4])
		sb.WriteByte(digits[c&15])
	}
	return sb.String()
}
