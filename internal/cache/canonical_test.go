package cache

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"
)

// canonicalReference is the first Canonical, over encoding/json's token
// API: FuzzCanonicalMatchesReference holds the scanner to its meaning.
// Numbers are kept as
// written (1 and 1.0 differ: a provider may read them differently), and
// strings are re-encoded, so "\u0041" and "A" are the same.
func canonicalReference(body []byte) ([]byte, error) {
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
	out, err = refObject(d, out, true)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, ErrNotObject
	}
	return out, nil
}

type refMember struct {
	key string
	val []byte
}

// object appends the rest of an object whose '{' was read, its members
// sorted by key; top drops stream and stream_options.
func refObject(d *json.Decoder, out []byte, top bool) ([]byte, error) {
	var ms []refMember
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return nil, err
		}
		k, ok := tok.(string)
		if !ok {
			return nil, ErrNotObject
		}
		v, err := refValue(d, nil)
		if err != nil {
			return nil, err
		}
		if top && (k == "stream" || k == "stream_options") {
			continue
		}
		ms = append(ms, refMember{k, v})
	}
	if _, err := d.Token(); err != nil { // '}'
		return nil, err
	}
	slices.SortStableFunc(ms, func(a, b refMember) int { return strings.Compare(a.key, b.key) })
	out = append(out, '{')
	for i, m := range ms {
		if i > 0 {
			out = append(out, ',')
		}
		out = refAppendString(out, m.key)
		out = append(out, ':')
		out = append(out, m.val...)
	}
	return append(out, '}'), nil
}

// value appends the next value in canonical form.
func refValue(d *json.Decoder, out []byte) ([]byte, error) {
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			return refObject(d, out, false)
		case '[':
			out = append(out, '[')
			for i := 0; d.More(); i++ {
				if i > 0 {
					out = append(out, ',')
				}
				if out, err = refValue(d, out); err != nil {
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
		return refAppendString(out, t), nil
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

func refAppendString(out []byte, s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return append(out, b...)
}

// FuzzCanonicalMatchesReference: the scanner accepts exactly what the
// token-API version accepted, and two bodies get the same canonical form
// from one exactly when they do from the other: the reference maps the
// scanner's output to its own form of the input, and the scanner maps the
// reference's output to its own.
func FuzzCanonicalMatchesReference(f *testing.F) {
	for _, s := range []string{`{}`, `{"b":1,"a":[1,{"d":null,"c":"\u00e9"}]}`, `{"stream":true,"a":"x"}`,
		`{"a":1e400,"b":-0.5E+3,"c":[true,false,null,[]]}`, `{"a":"`, `{"a":"<&>\u2028"}`, `{"a":"\ud800"}`,
		"{\"a\":\"\xff\"}", `{"a":01}`, `{"a":1,"a":2}`, `{"a":"\"\\\/\b\f\n\r\t"}`, ` { "a" : [ 1 , 2 ] } `, `{"a":tru}`, `{}x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := Canonical(b)
		ref, refErr := canonicalReference(b)
		if (err == nil) != (refErr == nil) {
			t.Fatalf("Canonical(%q) error %v, the reference's %v", b, err, refErr)
		}
		if err != nil {
			return
		}
		if again, err := canonicalReference(got); err != nil || !bytes.Equal(again, ref) {
			t.Fatalf("Canonical(%q) = %q; the reference reads it as %q, %v, and the input as %q", b, got, again, err, ref)
		}
		if back, err := Canonical(ref); err != nil || !bytes.Equal(back, got) {
			t.Fatalf("Canonical(%q) = %q, but of the reference's form %q it is %q, %v", b, got, ref, back, err)
		}
	})
}

// BenchmarkCanonical: a short chat request, as the cache phase sends.
func BenchmarkCanonical(b *testing.B) {
	body := []byte(`{"model":"bench-cached","messages":[{"role":"user","content":"Say hello in one short sentence. 12345"}],"max_tokens":32}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Canonical(body); err != nil {
			b.Fatal(err)
		}
	}
}
