package secret

import (
	"bytes"
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"
)

// EchoLen is the shortest part of a known secret that Redactor removes: a
// value's first or last EchoLen bytes, as providers echo keys cut or
// half-masked ("gsk_abcd****wxyz", "...89abcdef"). Values shorter than
// EchoLen are not matched at all: such a string is common in ordinary text,
// and no provider issues keys that short.
const EchoLen = 8

// Marker replaces what Redactor and the record writer's shape rules remove.
const Marker = redacted

// Redactor removes known secret values from text: each value whole, every
// echo of its first or last EchoLen bytes or more, and a masked echo (a
// head, a run of '*', '.', '…' or '•', then a tail of the value). The values
// are the gateway's own configuration (provider keys and header values, the
// admin token, the passwords of its database and Redis URLs), so unlike the
// shape rules it catches any vendor's key format, hex keys included.
//
// The value set is swapped whole by Set (a routes reload), with an atomic
// store: Redact takes no lock. The nil *Redactor redacts nothing.
//
// The scan costs a few nanoseconds a byte and allocates only when it finds
// something; it is meant for provider text on error paths and for log
// lines, never for every event of a stream.
type Redactor struct{ set atomic.Pointer[valueSet] }

// NewRedactor returns a Redactor of values; see Set.
func NewRedactor(values ...string) *Redactor {
	r := &Redactor{}
	r.Set(values...)
	return r
}

// Set replaces the values. Empty and short (< EchoLen) values are ignored.
// Each value is also matched in the escaped forms it takes in JSON, in a
// quoted log value and in a URL, so that a byte-level scan of an encoded
// answer finds it too.
func (r *Redactor) Set(values ...string) { r.set.Store(newValueSet(values)) }

// Redact returns s without the known values; s itself when none is there.
func (r *Redactor) Redact(s string) string {
	set := r.load()
	if set == nil || len(s) < EchoLen {
		return s
	}
	spans := set.find(s)
	if spans == nil {
		return s
	}
	return string(replaceSpans(make([]byte, 0, len(s)), s, spans))
}

// RedactBytes is Redact for bytes: b itself (not copied) when nothing is
// found, else a new slice.
func (r *Redactor) RedactBytes(b []byte) []byte {
	set := r.load()
	if set == nil || len(b) < EchoLen {
		return b
	}
	// Read-only view: find never keeps it beyond the call.
	s := unsafe.String(unsafe.SliceData(b), len(b))
	spans := set.find(s)
	if spans == nil {
		return b
	}
	return replaceSpans(make([]byte, 0, len(b)), s, spans)
}

func (r *Redactor) load() *valueSet {
	if r == nil {
		return nil
	}
	return r.set.Load()
}

// valueSet is one immutable generation of values, indexed by the 8-byte
// heads and tails of every variant. A 64 Ki-bit filter of those 8-byte
// words lets the scan skip almost every position with a multiply and a bit
// test; only a filter hit looks the word up.
type valueSet struct {
	variants []string
	needles  map[uint64][]needle
	filter   [1 << 10]uint64
}

type needle struct {
	variant int
	head    bool // the variant's first EchoLen bytes; else its last
}

func newValueSet(values []string) *valueSet {
	set := &valueSet{needles: map[uint64][]needle{}}
	seen := map[string]bool{}
	for _, v := range values {
		if len(v) < EchoLen {
			continue
		}
		for _, form := range variants(v) {
			if seen[form] {
				continue
			}
			seen[form] = true
			i := len(set.variants)
			set.variants = append(set.variants, form)
			set.add(word(form, 0), needle{variant: i, head: true})
			set.add(word(form, len(form)-EchoLen), needle{variant: i})
		}
	}
	if len(set.variants) == 0 {
		return nil
	}
	return set
}

func (set *valueSet) add(w uint64, n needle) {
	set.needles[w] = append(set.needles[w], n)
	h := filterBit(w)
	set.filter[h>>6] |= 1 << (h & 63)
}

// variants are the forms v takes when written out: as is, JSON-escaped
// (with and without HTML escaping: encoding/json and log/slog differ),
// Go-quoted (a text log's quoted value) and URL-escaped.
func variants(v string) []string {
	out := []string{v}
	for _, html := range []bool{true, false} {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(html)
		if enc.Encode(v) == nil {
			b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
			out = append(out, string(b[1:len(b)-1]))
		}
	}
	q := strconv.Quote(v)
	out = append(out, q[1:len(q)-1], url.QueryEscape(v), url.PathEscape(v))
	slices.Sort(out)
	return slices.Compact(out)
}

// word is the 8 bytes of s at i as a little-endian integer.
func word(s string, i int) uint64 {
	_ = s[i+7]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}

func filterBit(w uint64) uint64 { return (w * 0x9E3779B97F4A7C15) >> 48 }

type span struct{ lo, hi int }

// find returns the spans of s to redact, sorted and merged; nil for none.
func (set *valueSet) find(s string) []span {
	var spans []span
	if len(s) < EchoLen {
		return nil
	}
	// w rolls over s one byte a step: the 8 bytes at i.
	w := word(s, 0) << 8
	for i := 0; i+EchoLen <= len(s); i++ {
		w = w>>8 | uint64(s[i+EchoLen-1])<<56
		h := filterBit(w)
		if set.filter[h>>6]&(1<<(h&63)) == 0 {
			continue
		}
		for _, n := range set.needles[w] {
			v := set.variants[n.variant]
			var sp span
			if n.head {
				sp = span{i, i + commonPrefix(s[i:], v)}
				if sp.hi-sp.lo < len(v) {
					sp.hi = maskedTail(s, sp.hi, v)
				}
			} else {
				sp.hi = i + EchoLen
				sp.lo = sp.hi - commonSuffix(s[:sp.hi], v)
				if sp.hi-sp.lo < len(v) {
					sp.lo = maskedHead(s, sp.lo, v)
				}
			}
			spans = append(spans, sp)
		}
	}
	if len(spans) < 2 {
		return spans
	}
	slices.SortFunc(spans, func(a, b span) int { return a.lo - b.lo })
	merged := spans[:1]
	for _, sp := range spans[1:] {
		last := &merged[len(merged)-1]
		if sp.lo <= last.hi {
			last.hi = max(last.hi, sp.hi)
			continue
		}
		merged = append(merged, sp)
	}
	return merged
}

func replaceSpans(dst []byte, s string, spans []span) []byte {
	at := 0
	for _, sp := range spans {
		dst = append(dst, s[at:sp.lo]...)
		dst = append(dst, Marker...)
		at = sp.hi
	}
	return append(dst, s[at:]...)
}

func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

func commonSuffix(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[len(a)-1-i] == b[len(b)-1-i] {
		i++
	}
	return i
}

// masks are what providers put in place of a key's middle.
var masks = []string{"*", ".", "…", "•"}

// maskedTail extends a partial head echo ending at p over a mask and the
// value's tail after it ("gsk_abcd" + "****" + "wxyz"); p when s does not
// go on that way.
func maskedTail(s string, p int, v string) int {
	q := p
	for q < len(s) {
		m := maskAt(s[q:], strings.HasPrefix)
		if m == 0 {
			break
		}
		q += m
	}
	e := q
	for e < len(s) && keyByte(s[e]) {
		e++
	}
	if q == p || e == q || !strings.HasSuffix(v, s[q:e]) {
		return p
	}
	return e
}

// maskedHead is maskedTail backwards, for a partial tail echo starting at
// p ("gsk_" + "****" + "89abcdef").
func maskedHead(s string, p int, v string) int {
	q := p
	for q > 0 {
		m := maskAt(s[:q], strings.HasSuffix)
		if m == 0 {
			break
		}
		q -= m
	}
	b := q
	for b > 0 && keyByte(s[b-1]) {
		b--
	}
	if q == p || b == q || !strings.HasPrefix(v, s[b:q]) {
		return p
	}
	return b
}

func maskAt(s string, has func(s, m string) bool) int {
	for _, m := range masks {
		if has(s, m) {
			return len(m)
		}
	}
	return 0
}

// keyByte reports whether c is among the characters API keys are made of.
func keyByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}
