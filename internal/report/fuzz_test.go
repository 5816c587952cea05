package report

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzCleanMessage: a provider's error body becomes a candidate's
// error_message through cleanMessage. Whatever the bytes, the result must be
// storable in a Postgres text column (valid UTF-8, no NUL), at most
// maxMessageBytes, and never carry an OpenAI-style key that stood as a token
// (not glued to a letter or digit before it, which no key format has) in the
// first maxMessageBytes of the input.
func FuzzCleanMessage(f *testing.F) {
	const key = "sk-proj-SENTINEL0123456789abcdef"
	for _, s := range []string{
		"", "plain", `{"error":{"message":"Incorrect API key provided: ` + key + `"}}`,
		"Authorization: Bearer " + key, "a\x00b", "\xff\xfe", "cut \\", `{"error":"\u00e9`,
		strings.Repeat("é", maxMessageBytes), strings.Repeat("x", maxMessageBytes-3) + "€€",
		strings.Repeat("x", redactWindow-5) + " " + key, "https://user:" + key + "@host/v1?key=" + key,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := cleanMessage(s, nil)
		if !utf8.ValidString(got) || strings.IndexByte(got, 0) >= 0 {
			t.Fatalf("not storable as text: %q", got)
		}
		if len(got) > maxMessageBytes {
			t.Fatalf("%d bytes, over %d", len(got), maxMessageBytes)
		}
		if i := strings.Index(s, key); i >= 0 && i+len(key) <= maxMessageBytes && (i == 0 || !isAlnum(s[i-1])) &&
			strings.Contains(got, key) {
			t.Fatalf("key survived: %q", got)
		}
	})
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
}
