package cache

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"slices"
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

// Canonical is body in canonical form (see NewKey). Numbers are kept as
// written (1 and 1.0 differ: a provider may read them differently), and
// strings are re-encoded, so "\u0041" and "A" are the same.
func Canonical(body []byte) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	tok, err := d.Token()
	if err != nil {
		return nil, ErrNotObject
	}
	if delim, ok := tok.(json.Delim); !ok || delim != '{' {
		return nil, ErrNotObject
	}
	out := make([]byte, 0, len(body))
	out, err = object(d, out, true)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, ErrNotObject
	}
	return out, nil
}

type member struct {
	key string
	val []byte
}

// object appends the rest of an object whose '{' was read, its members
// sorted by key; top drops stream and stream_options.
func object(d *json.Decoder, out []byte, top bool) ([]byte, error) {
	var ms []member
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return nil, err
		}
		k, ok := tok.(string)
		if !ok {
			return nil, ErrNotObject
		}
		v, err := value(d, nil)
		if err != nil {
			return nil, err
		}
		if top && (k == "stream" || k == "stream_options") {
			continue
		}
		ms = append(ms, member{k, v})
	}
	if _, err := d.Token(); err != nil { // '}'
		return nil, err
	}
	slices.SortStableFunc(ms, func(a, b member) int { return strings.Compare(a.key, b.key) })
	out = append(out, '{')
	for i, m := range ms {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendString(out, m.key)
		out = append(out, ':')
		out = append(out, m.val...)
	}
	return append(out, '}'), nil
}

// value appends the next value in canonical form.
func value(d *json.Decoder, out []byte) ([]byte, error) {
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			return object(d, out, false)
		case '[':
			out = append(out, '[')
			for i := 0; d.More(); i++ {
				if i > 0 {
					out = append(out, ',')
				}
				if out, err = value(d, out); err != nil {
					return nil, err
				}
			}
			if _, err := d.Token(); err != nil {
				return nil, err
			}
			return append(out, ']'), nil
		}
		return nil, ErrNotObject
	case string:
		return appendString(out, t), nil
	case json.Number:
		return append(out, t...), nil
	case bool:
		if t {
			return append(out, "true"...), nil
		}
		return append(out, "false"...), nil
	case nil:
		return append(out, "null"...), nil
	}
	return nil, ErrNotObject
}

func appendString(out []byte, s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return append(out, b...)
}
