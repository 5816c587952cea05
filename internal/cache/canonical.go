package cache

import (
	"bytes"
	"encoding/json"
	"slices"
	"sync"
	"unicode/utf8"
	"unsafe"
)

// Canonical is body in canonical form (see NewKey). Numbers are kept as
// written (1 and 1.0 differ: a provider may read them differently), and
// strings are re-encoded, so "\u0041" and "A" are the same.
//
// It scans the bytes itself: encoding/json's token API cost a cached
// request about 100 allocations for a short chat body, a tenth of the
// gateway's CPU on a miss. A string without escapes, valid UTF-8, is kept
// as written; one with escapes is decoded and written back with only the
// escapes JSON requires, so both spellings of a string give the same bytes.
func Canonical(body []byte) ([]byte, error) {
	return appendCanonical(make([]byte, 0, len(body)), body)
}

// appendCanonical appends body's canonical form to out, with a pooled
// canonicalizer's scratch.
func appendCanonical(out, body []byte) ([]byte, error) {
	c := canonicalizers.Get().(*canonicalizer)
	c.in, c.i, c.level = body, 0, 0
	out, err := c.appendCanonical(out)
	c.in = nil
	if c.scratchBytes() <= maxPooledScratch {
		canonicalizers.Put(c)
	}
	return out, err
}

var canonicalizers = sync.Pool{New: func() any { return new(canonicalizer) }}

// maxPooledScratch is the scratch a pooled canonicalizer may keep: a
// large body's is left to the collector rather than held for small ones.
const maxPooledScratch = 64 << 10

func (c *canonicalizer) scratchBytes() int {
	n := cap(c.scratch) * int(unsafe.Sizeof(objectScratch{}))
	for _, s := range c.scratch {
		n += cap(s.vals) + cap(s.ms)*int(unsafe.Sizeof(member{}))
	}
	return n
}

// appendCanonical appends c.in's canonical form to out.
func (c *canonicalizer) appendCanonical(out []byte) ([]byte, error) {
	c.space()
	if c.i >= len(c.in) || c.in[c.i] != '{' {
		return nil, ErrNotObject
	}
	out, err := c.object(out, true, 0)
	if err != nil {
		return nil, err
	}
	c.space()
	if c.i != len(c.in) {
		return nil, ErrNotObject
	}
	return out, nil
}

// maxDepth bounds nesting, as encoding/json does.
const maxDepth = 10000

type canonicalizer struct {
	in []byte
	i  int
	// scratch is each object nesting level's members and values, reused
	// by the next object at that level: a request's objects then cost no
	// allocation past the first at each level (and none with a pooled
	// canonicalizer, see NewKey).
	scratch []objectScratch
	level   int
}

type objectScratch struct {
	ms   []member
	vals []byte
}

func (c *canonicalizer) space() {
	for c.i < len(c.in) {
		switch c.in[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

// value appends the value at c.i in canonical form.
func (c *canonicalizer) value(out []byte, depth int) ([]byte, error) {
	c.space()
	if c.i >= len(c.in) {
		return nil, ErrNotObject
	}
	switch b := c.in[c.i]; {
	case b == '{':
		return c.object(out, false, depth+1)
	case b == '[':
		return c.array(out, depth+1)
	case b == '"':
		raw, s, err := c.str()
		if err != nil {
			return nil, err
		}
		if raw != nil {
			return append(out, raw...), nil
		}
		return appendString(out, s), nil
	case b == '-' || ('0' <= b && b <= '9'):
		start := c.i
		if !c.number() {
			return nil, ErrNotObject
		}
		return append(out, c.in[start:c.i]...), nil
	}
	for _, lit := range literals {
		if bytes.HasPrefix(c.in[c.i:], lit) {
			c.i += len(lit)
			return append(out, lit...), nil
		}
	}
	return nil, ErrNotObject
}

var literals = [][]byte{[]byte("true"), []byte("false"), []byte("null")}

type member struct {
	key      []byte // unquoted: as written, or decoded when it had escapes
	from, to int    // the value in the object's scratch buffer
}

// object appends the object at c.i, its members sorted by key (stable:
// duplicate keys keep their order); top drops stream and stream_options.
func (c *canonicalizer) object(out []byte, top bool, depth int) ([]byte, error) {
	if depth > maxDepth {
		return nil, ErrNotObject
	}
	c.i++ // '{'
	c.space()
	if c.i < len(c.in) && c.in[c.i] == '}' {
		c.i++
		return append(out, '{', '}'), nil
	}
	lvl := c.level
	if lvl == len(c.scratch) {
		c.scratch = append(c.scratch, objectScratch{})
	}
	ms, vals := c.scratch[lvl].ms[:0], c.scratch[lvl].vals[:0]
	c.level++
	defer func() {
		c.level--
		clear(ms) // the keys point into this body: not kept past it
		c.scratch[lvl] = objectScratch{ms: ms[:0], vals: vals[:0]}
	}()
	for {
		c.space()
		if c.i >= len(c.in) || c.in[c.i] != '"' {
			return nil, ErrNotObject
		}
		raw, k, err := c.str()
		if err != nil {
			return nil, err
		}
		var key []byte
		if raw != nil {
			key = raw[1 : len(raw)-1]
		} else {
			key = []byte(k) // rare: a key with escapes
		}
		c.space()
		if c.i >= len(c.in) || c.in[c.i] != ':' {
			return nil, ErrNotObject
		}
		c.i++
		from := len(vals)
		if vals, err = c.value(vals, depth); err != nil {
			return nil, err
		}
		if top && (string(key) == "stream" || string(key) == "stream_options") {
			vals = vals[:from]
		} else {
			ms = append(ms, member{key, from, len(vals)})
		}
		c.space()
		if c.i >= len(c.in) {
			return nil, ErrNotObject
		}
		if c.in[c.i] == '}' {
			c.i++
			break
		}
		if c.in[c.i] != ',' {
			return nil, ErrNotObject
		}
		c.i++
	}
	slices.SortStableFunc(ms, func(a, b member) int { return bytes.Compare(a.key, b.key) })
	out = append(out, '{')
	for i, m := range ms {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendString(out, m.key)
		out = append(out, ':')
		out = append(out, vals[m.from:m.to]...)
	}
	return append(out, '}'), nil
}

func (c *canonicalizer) array(out []byte, depth int) ([]byte, error) {
	if depth > maxDepth {
		return nil, ErrNotObject
	}
	c.i++ // '['
	out = append(out, '[')
	c.space()
	if c.i < len(c.in) && c.in[c.i] == ']' {
		c.i++
		return append(out, ']'), nil
	}
	for n := 0; ; n++ {
		if n > 0 {
			out = append(out, ',')
		}
		var err error
		if out, err = c.value(out, depth); err != nil {
			return nil, err
		}
		c.space()
		if c.i >= len(c.in) {
			return nil, ErrNotObject
		}
		if c.in[c.i] == ']' {
			c.i++
			return append(out, ']'), nil
		}
		if c.in[c.i] != ',' {
			return nil, ErrNotObject
		}
		c.i++
	}
}

// str reads the string at c.i. When it has no escape and is valid UTF-8,
// raw is it as written, quotes included, which is its canonical form;
// else s is its value.
func (c *canonicalizer) str() (raw []byte, _ string, err error) {
	start := c.i
	c.i++ // '"'
	escaped := false
	for c.i < len(c.in) {
		switch b := c.in[c.i]; {
		case b == '"':
			c.i++
			if !escaped && utf8.Valid(c.in[start+1:c.i-1]) {
				return c.in[start:c.i], "", nil
			}
			// Escapes and invalid UTF-8 (read as U+FFFD) are rare in a
			// request: encoding/json decodes them.
			// s is declared here: a named result's address taken would
			// put it on the heap on every call, escapes or not.
			var s string
			if err := json.Unmarshal(c.in[start:c.i], &s); err != nil {
				return nil, "", ErrNotObject
			}
			return nil, s, nil
		case b == '\\':
			escaped = true
			c.i += 2
		case b < 0x20:
			return nil, "", ErrNotObject
		default:
			c.i++
		}
	}
	return nil, "", ErrNotObject
}

// number reads a JSON number at c.i: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (c *canonicalizer) number() bool {
	if c.in[c.i] == '-' {
		c.i++
	}
	digits := func() int {
		n := 0
		for c.i < len(c.in) && '0' <= c.in[c.i] && c.in[c.i] <= '9' {
			c.i++
			n++
		}
		return n
	}
	if c.i < len(c.in) && c.in[c.i] == '0' {
		c.i++
	} else if digits() == 0 {
		return false
	}
	if c.i < len(c.in) && c.in[c.i] == '.' {
		c.i++
		if digits() == 0 {
			return false
		}
	}
	if c.i < len(c.in) && (c.in[c.i] == 'e' || c.in[c.i] == 'E') {
		c.i++
		if c.i < len(c.in) && (c.in[c.i] == '+' || c.in[c.i] == '-') {
			c.i++
		}
		if digits() == 0 {
			return false
		}
	}
	return true
}

// appendString writes s as a JSON string with only the escapes JSON
// requires (quote, backslash, control characters), so a string written
// without escapes comes out as it was written.
func appendString[S ~string | ~[]byte](out []byte, s S) []byte {
	const hex = "0123456789abcdef"
	out = append(out, '"')
	for i := 0; i < len(s); i++ {
		switch b := s[i]; {
		case b == '"' || b == '\\':
			out = append(out, '\\', b)
		case b < 0x20:
			out = append(out, '\\', 'u', '0', '0', hex[b>>4], hex[b&15])
		default:
			out = append(out, b)
		}
	}
	return append(out, '"')
}
