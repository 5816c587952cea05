package anthropic

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/llmgw/gateway/internal/jsontext"
)

// The stream translator reads provider events without encoding/json's
// reflection: it checks each event with json.Valid, then walks the object's
// members by hand and copies string values into the chunk it writes. Every
// helper here assumes input that json.Valid accepted, and stays within bounds
// on any input regardless, so a mistake costs a wrong value, never a panic.

// members walks the members of one JSON object.
type members struct {
	b []byte
	i int
}

// objectMembers starts a walk over obj, which must be a JSON object.
func objectMembers(obj []byte) (members, bool) {
	i := jsontext.SkipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return members{}, false
	}
	return members{b: obj, i: i + 1}, true
}

// next returns the next member: its key as written between the quotes (no
// unescaping: every key the translator looks for is plain ASCII, and an
// escaped spelling of one is simply not recognised) and its raw value.
func (m *members) next() (key, val []byte, ok bool) {
	b := m.b
	i := jsontext.SkipSpace(b, m.i)
	if i < len(b) && b[i] == ',' {
		i = jsontext.SkipSpace(b, i+1)
	}
	if i >= len(b) || b[i] != '"' {
		m.i = len(b)
		return nil, nil, false
	}
	keyEnd := jsontext.SkipString(b, i)
	if keyEnd-i < 2 {
		m.i = len(b)
		return nil, nil, false
	}
	key = b[i+1 : keyEnd-1]
	i = jsontext.SkipSpace(b, keyEnd)
	if i < len(b) && b[i] == ':' {
		i = jsontext.SkipSpace(b, i+1)
	}
	end := jsontext.SkipValue(b, i)
	m.i = end
	return key, b[i:end], true
}

// isString reports whether v is a complete JSON string literal.
func isString(v []byte) bool {
	return len(v) >= 2 && v[0] == '"' && jsontext.SkipString(v, 0) == len(v)
}

// parseCount reads a non-negative integer literal such as a token count or a
// block index; anything else (negative, fraction, exponent, overflow past
// 2^53, null) is not a count.
func parseCount(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 16 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// appendLiteral appends the JSON string literal lit (checked by json.Valid
// as part of its event) to dst. Valid UTF-8 is copied byte for byte, the
// provider's escapes included; otherwise the string is decoded, which
// replaces each invalid byte with U+FFFD, and written again, so a client
// never receives bytes that are not UTF-8.
func appendLiteral(dst, lit []byte) []byte {
	if utf8.Valid(lit) {
		return append(dst, lit...)
	}
	var s string
	if json.Unmarshal(lit, &s) != nil {
		return append(dst, `""`...)
	}
	return appendString(dst, s)
}

// unquote decodes a JSON string literal; the empty string for anything else.
func unquote(lit []byte) string {
	if !isString(lit) {
		return ""
	}
	plain := true
	for _, c := range lit[1 : len(lit)-1] {
		if c == '\\' || c >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if plain {
		return string(lit[1 : len(lit)-1])
	}
	var s string
	if json.Unmarshal(lit, &s) != nil {
		return ""
	}
	return s
}

// appendString appends s as a JSON string literal.
func appendString[S ~string | ~[]byte](dst []byte, s S) []byte { return jsontext.AppendString(dst, s) }
