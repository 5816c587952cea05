package anthropic

import (
	"bytes"
	"encoding/json"
	"testing"
)

// encodeLikeStdlib is encoding/json's rendering of s without HTML escaping,
// the reference appendString must match byte for byte.
func encodeLikeStdlib(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return string(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

var stringSeeds = []string{
	"", "plain", `quote " and \ backslash`, "\n\r\t\b\f\x00\x1f\x7f", "é 日本 🎉",
	"\u2028\u2029", "bad \xff byte", "cut \xe6\x97", "<b>&</b>", "\xed\xa0\x80 surrogate",
}

func TestAppendString(t *testing.T) {
	for _, s := range stringSeeds {
		if got, want := string(appendString(nil, s)), encodeLikeStdlib(s); got != want {
			t.Errorf("appendString(%q) = %s, want %s", s, got, want)
		}
		if got, want := string(appendString(nil, []byte(s))), encodeLikeStdlib(s); got != want {
			t.Errorf("appendString([]byte %q) = %s, want %s", s, got, want)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range stringSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := string(appendString(nil, s)), encodeLikeStdlib(s); got != want {
			t.Fatalf("appendString(%q) = %s, want %s", s, got, want)
		}
	})
}

func TestParseCount(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "7": 7, "9007199254740992": 9007199254740992} {
		if n, ok := parseCount([]byte(in)); !ok || n != want {
			t.Errorf("parseCount(%q) = %d, %v", in, n, ok)
		}
	}
	for _, in := range []string{"", "-1", "1.5", "1e3", "null", `"3"`, "99999999999999999"} {
		if n, ok := parseCount([]byte(in)); ok {
			t.Errorf("parseCount(%q) = %d, true; want false", in, n)
		}
	}
}

// TestMembers walks an object with nesting, escapes and whitespace.
func TestMembers(t *testing.T) {
	obj := []byte(` { "a" : 1 , "b":{"x":[1,{"y":"}"}]}, "c\"d":"v\"w" ,"e":null}`)
	m, ok := objectMembers(obj)
	if !ok {
		t.Fatal("not an object")
	}
	var got []string
	for k, v, ok := m.next(); ok; k, v, ok = m.next() {
		got = append(got, string(k)+"="+string(v))
	}
	want := []string{`a=1`, `b={"x":[1,{"y":"}"}]}`, `c\"d="v\"w"`, `e=null`}
	if len(got) != len(want) {
		t.Fatalf("members %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("members %q, want %q", got, want)
		}
	}
}
