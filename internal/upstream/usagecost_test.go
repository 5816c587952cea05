package upstream

import (
	"encoding/json"
	"testing"
)

func TestWithUsageCost(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		ok             bool
	}{
		{"chat body", `{"id":"x","usage":{"prompt_tokens":3,"completion_tokens":4}}`,
			`{"id":"x","usage":{"prompt_tokens":3,"completion_tokens":4,"cost":0.0001}}`, true},
		{"spaces kept", "{\"usage\": { \"a\": 1 } , \"z\": 2}", "{\"usage\": { \"a\": 1 ,\"cost\":0.0001} , \"z\": 2}", true},
		{"empty usage", `{"usage":{}}`, `{"usage":{"cost":0.0001}}`, true},
		{"provider's cost replaced", `{"usage":{"cost":99,"prompt_tokens":1}}`, `{"usage":{"cost":0.0001,"prompt_tokens":1}}`, true},
		{"duplicate usage: the last, as decoders keep", `{"usage":{"a":1},"usage":{"b":2}}`, `{"usage":{"a":1},"usage":{"b":2,"cost":0.0001}}`, true},
		{"null usage", `{"usage":null}`, `{"usage":null}`, false},
		{"no usage", `{"id":"x"}`, `{"id":"x"}`, false},
		{"nested usage only", `{"response":{"usage":{"a":1}}}`, `{"response":{"usage":{"a":1}}}`, false},
		{"not an object", `[1,2]`, `[1,2]`, false},
		{"broken", `{"usage":{"a":`, `{"usage":{"a":`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := WithUsageCost(nil, []byte(tc.in), "0.0001")
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if !ok {
				got = []byte(tc.in)
			}
			if string(got) != tc.want {
				t.Fatalf("got %s\nwant %s", got, tc.want)
			}
			if ok && json.Valid([]byte(tc.in)) && !json.Valid(got) {
				t.Fatalf("valid JSON in, invalid out: %s", got)
			}
		})
	}
}

func FuzzWithUsageCost(f *testing.F) {
	f.Add([]byte(`{"usage":{"prompt_tokens":3}}`))
	f.Add([]byte(`{"usage":{"cost":1},"x":[{"usage":{}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, ok := WithUsageCost(nil, b, "0.5")
		if ok && json.Valid(b) && !json.Valid(out) {
			t.Fatalf("valid %q became invalid %q", b, out)
		}
	})
}
