package upstream

import (
	"errors"
	"testing"
)

// TestUsageCheckEveryFormat protects the one rule on provider usage: a
// count below 0, above MaxUsageTokens, fractional or past int64 is not
// reported by any pass-through reader (stream or body, every format), and
// UsageError says why; a sane one is reported as sent.
func TestUsageCheckEveryFormat(t *testing.T) {
	for _, tc := range []struct {
		name string
		kind passKind
		ev   string // a stream event; "" for none
		tail string // a body's tail; "" for none
		ok   bool
	}{
		{"chat sane", passChat, `data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`, "", true},
		{"chat negative", passChat, `data: {"choices":[],"usage":{"prompt_tokens":-1,"completion_tokens":2,"total_tokens":1}}`, "", false},
		{"chat huge", passChat, `data: {"choices":[],"usage":{"total_tokens":9223372036854775807}}`, "", false},
		{"chat float", passChat, `data: {"choices":[],"usage":{"total_tokens":1.5}}`, "", false},
		{"chat overflow", passChat, `data: {"choices":[],"usage":{"total_tokens":1e30}}`, "", false},
		{"chat body negative", passChat, "", `"usage":{"prompt_tokens":-7,"total_tokens":-7}}`, false},
		{"embeddings body huge", passEmbeddings, "", `"usage":{"prompt_tokens":1000000001,"total_tokens":1000000001}}`, false},
		{"responses negative", passResponses, "event: response.completed\ndata: {\"response\":{\"usage\":{\"input_tokens\":-4,\"output_tokens\":1}}}", "", false},
		{"responses float", passResponses, "event: response.completed\ndata: {\"response\":{\"usage\":{\"input_tokens\":4.2,\"output_tokens\":1}}}", "", false},
		{"messages negative", passMessages, "event: message_delta\ndata: {\"usage\":{\"output_tokens\":-9}}", "", false},
		{"messages sane", passMessages, "event: message_delta\ndata: {\"usage\":{\"input_tokens\":3,\"output_tokens\":9}}", "", true},
	} {
		p := &PassReader{kind: tc.kind}
		var u Usage
		var ok bool
		if tc.ev != "" {
			if _, err := p.Event(nil, []byte(tc.ev+"\n\n"), true); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			u, ok = p.Usage()
		} else {
			u, ok = p.TailUsage([]byte(tc.tail))
		}
		if ok != tc.ok {
			t.Errorf("%s: usage %+v reported %v, want %v", tc.name, u, ok, tc.ok)
		}
		var ue *UsageError
		if got := errors.As(p.UsageError(), &ue); got == tc.ok {
			t.Errorf("%s: UsageError %v", tc.name, p.UsageError())
		}
	}
	if CheckUsage(Usage{TotalTokens: MaxUsageTokens}) != nil || CheckUsage(Usage{TotalTokens: MaxUsageTokens + 1}) == nil {
		t.Error("the ceiling is not inclusive of MaxUsageTokens alone")
	}
}
