package jsontext

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// encodingJSON is what encoding/json writes for s, HTML escaping off.
func encodingJSON(t testing.TB, s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func TestAppendString(t *testing.T) {
	for _, s := range []string{"", "plain", `q"b\`, "nl\n cr\r tab\t bs\b ff\f nul\x00 del\x7f",
		"é ü 世界 🙂", "bad \xff\xfe utf8", "cut \xe4\xb8", "\u2028 \u2029", "<&>"} {
		got := string(AppendString(nil, s))
		var back string
		if err := json.Unmarshal([]byte(got), &back); err != nil {
			t.Fatalf("%q -> %s is not JSON: %v", s, got, err)
		}
		if !utf8.ValidString(got) {
			t.Fatalf("%q -> %q is not valid UTF-8", s, got)
		}
		if utf8.ValidString(s) && back != s {
			t.Fatalf("%q -> %s -> %q", s, got, back)
		}
		if want := encodingJSON(t, s); utf8.ValidString(s) && got != want {
			t.Fatalf("%q -> %s, encoding/json writes %s", s, got, want)
		}
	}
	if got := string(AppendString([]byte("x:"), []byte("b"))); got != `x:"b"` {
		t.Fatalf("appends to dst: %s", got)
	}
}

// FuzzAppendString: any bytes give one valid JSON string literal that
// decodes to the input wherever the input is valid UTF-8.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a\"b", "\xff", "\u2028", "\x00\x1f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := AppendString(nil, s)
		var back string
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("%q -> %s: %v", s, out, err)
		}
		if utf8.ValidString(s) && back != s {
			t.Fatalf("%q -> %s -> %q", s, out, back)
		}
	})
}
