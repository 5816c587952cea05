package jsontext

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// Valid must accept exactly what encoding/json.Valid accepts: ParseRequest
// answers "not valid JSON" on its word.
func TestValidMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{
		``, ` `, `{}`, `[]`, ` { } `, `{"a":1}`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `[1,]`, `[,1]`, `[1 2]`,
		`"x"`, `"\u00e9\n\/\"\\"`, `"\u00g0"`, `"\x"`, "\"a\tb\"", "\"\x7f\xff\"", `"abc`, `"abc\`,
		`0`, `-0`, `01`, `-`, `1.`, `1.5`, `.5`, `1e5`, `1E+5`, `1e-`, `1e`, `-1.5e-10`, `+1`, `1x`,
		`true`, `tru`, `truee`, `false`, `null`, `nul`, `[true,false,null]`, `{"a":[{"b":{}}],"c":"d"}`,
		`{"a":1}}`, `[[]`, `[]]`, `{"a":{"b":[1,2,{"c":null}]}} `, "{\"model\":\"m\",\"messages\":[]}\n",
		strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth),
		strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1),
		strings.Repeat(`{"a":`, maxDepth) + "1" + strings.Repeat("}", maxDepth),
		strings.Repeat(`{"a":`, maxDepth+1) + "1" + strings.Repeat("}", maxDepth+1),
	} {
		if got, want := Valid([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("Valid(%.40q) = %v, encoding/json says %v", s, got, want)
		}
	}
}

func FuzzValid(f *testing.F) {
	for _, s := range []string{`{"model":"m","messages":[{"role":"user","content":"h\u00e9"}]}`, `[1,-2.5e3,true,null]`, `"\ud83d"`, `{"a":}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Valid(b), json.Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", b, got, want)
		}
	})
}

// BenchmarkValid compares Valid with encoding/json.Valid on chat request
// bodies of a short prompt, a conversation and a long context.
func BenchmarkValid(b *testing.B) {
	for _, size := range []int{200, 10_000, 100_000} {
		body := chatBody(size)
		for _, v := range []struct {
			name  string
			valid func([]byte) bool
		}{{"jsontext", Valid}, {"encoding-json", json.Valid}} {
			b.Run(fmt.Sprintf("%dB/%s", size, v.name), func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				for b.Loop() {
					if !v.valid(body) {
						b.Fatal("invalid")
					}
				}
			})
		}
	}
}

// chatBody is a chat completion request of about size bytes: messages of
// prose with an escape or two, as conversations are.
func chatBody(size int) []byte {
	var sb strings.Builder
	sb.WriteString(`{"model":"gpt-4o","stream":true,"messages":[`)
	for i := 0; sb.Len() < size; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"role":"user","content":"%s\u00e9 \"quoted\" line %d\n"}`,
			strings.Repeat("lorem ipsum dolor sit amet ", 1+size/2000), i)
	}
	sb.WriteString("]}")
	return []byte(sb.String())
}
