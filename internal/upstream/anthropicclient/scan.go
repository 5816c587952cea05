package anthropicclient

import (
	"encoding/json"

	"github.com/llmgw/gateway/internal/jsontext"
)

// This file walks JSON that json.Valid has already accepted, handing out
// sub-slices of the input instead of decoding it. The stream translator
// copies string literals (text fragments, tool arguments, ids) from the
// provider's chunk into its own events verbatim: a literal that is valid JSON
// in one document is valid in another, so the hot path neither unescapes nor
// re-escapes, and allocates nothing. Every index is still bounds-checked, so
// input that skipped validation cannot make the walk panic.

// iter walks the members of an object or the elements of an array.
type iter struct {
	b     []byte
	i     int
	close byte
}

// members iterates the object v; ok is false when v is not an object.
func members(v []byte) (it iter, ok bool) {
	if len(v) == 0 || v[0] != '{' {
		return iter{}, false
	}
	return iter{b: v, close: '}'}, true
}

// elements iterates the array v; ok is false when v is not an array.
func elements(v []byte) (it iter, ok bool) {
	if len(v) == 0 || v[0] != '[' {
		return iter{}, false
	}
	return iter{b: v, close: ']'}, true
}

// step moves past the opening bracket or the comma before the next item and
// reports whether an item follows.
func (it *iter) step() bool {
	b := it.b
	i := jsontext.SkipSpace(b, it.i)
	if i >= len(b) || b[i] == it.close {
		it.i = len(b)
		return false
	}
	if b[i] == ',' || (i == 0 && (b[0] == '{' || b[0] == '[')) {
		i = jsontext.SkipSpace(b, i+1)
	}
	if i >= len(b) || b[i] == it.close {
		it.i = len(b)
		return false
	}
	it.i = i
	return true
}

// member returns the next key (a raw string literal, quotes included) and
// its raw value.
func (it *iter) member() (key, val []byte, ok bool) {
	if !it.step() {
		return nil, nil, false
	}
	b, i := it.b, it.i
	if b[i] != '"' {
		it.i = len(b)
		return nil, nil, false
	}
	end := jsontext.SkipString(b, i)
	key = b[i:end]
	i = jsontext.SkipSpace(b, end)
	if i >= len(b) || b[i] != ':' {
		it.i = len(b)
		return nil, nil, false
	}
	i = jsontext.SkipSpace(b, i+1)
	end = jsontext.SkipValue(b, i)
	it.i = end
	return key, b[i:end], true
}

// element returns the next raw array element.
func (it *iter) element() (val []byte, ok bool) {
	if !it.step() {
		return nil, false
	}
	end := jsontext.SkipValue(it.b, it.i)
	val = it.b[it.i:end]
	it.i = end
	return val, len(val) > 0
}

// is reports whether the raw string literal lit spells s. Literals with
// escapes take the slow path; providers do not escape plain ASCII keys, so it
// is rarely taken.
func is(lit []byte, s string) bool {
	if len(lit) < 2 || lit[0] != '"' {
		return false
	}
	inner := lit[1 : len(lit)-1]
	for _, c := range inner {
		if c == '\\' {
			return unquote(lit) == s
		}
	}
	return string(inner) == s
}

// unquote decodes a raw string literal; anything else decodes to "".
func unquote(lit []byte) string {
	if len(lit) < 2 || lit[0] != '"' {
		return ""
	}
	var s string
	if json.Unmarshal(lit, &s) != nil {
		return ""
	}
	return s
}

// isString reports whether v is a string literal.
func isString(v []byte) bool { return len(v) >= 2 && v[0] == '"' }

// isNull reports whether v is absent or JSON null.
func isNull(v []byte) bool { return len(v) == 0 || string(v) == "null" }

// parseCount reads a token count: the integer part of a non-negative JSON
// number (some servers send 12.0), 0 for anything else, saturating rather
// than overflowing.
func parseCount(v []byte) int64 {
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			break
		}
		if n > (1<<62)/10 {
			return 1 << 62
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

// appendString appends s as a JSON string literal.
func appendString[S ~string | ~[]byte](dst []byte, s S) []byte { return jsontext.AppendString(dst, s) }
