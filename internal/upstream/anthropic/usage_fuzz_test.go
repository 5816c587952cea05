package anthropic

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"testing"

	"github.com/llmgw/gateway/internal/pricing"
)

// usageSeeds are Messages usage objects as Anthropic sends them and as it
// must not: 10^15 and 10^17 tokens, negative counts, fractions, huge
// exponents, duplicated keys, case variants and escaped keys.
var usageSeeds = []string{
	`{"input_tokens":100,"cache_creation_input_tokens":100,"cache_read_input_tokens":2000,"output_tokens":50}`,
	`{"input_tokens":100,"output_tokens":1}`, `{"output_tokens":50}`,
	`{"input_tokens":1000000000000000,"output_tokens":1}`, `{"output_tokens":100000000000000000}`,
	`{"cache_read_input_tokens":9223372036854775807,"input_tokens":9223372036854775807,"cache_creation_input_tokens":2}`,
	`{"input_tokens":-5,"cache_read_input_tokens":10}`, `{"output_tokens":1.5}`, `{"output_tokens":1e3}`,
	`{"output_tokens":1E+400}`, `{"input_tokens":"12"}`, `{"input_tokens":null,"output_tokens":3}`,
	`{"output_tokens":5,"output_tokens":-5}`, `{"Input_Tokens":-5,"input_tokens":5}`, `{"INPUT_TOKENS":7}`,
	`{"inpu\u0074_tokens":7}`, `{"cache_creation":{"ephemeral_5m_input_tokens":3},"server_tool_use":{"web_search_requests":1}}`,
	`{}`, `null`, `[]`, `5`, `{"input_tokens":`,
}

// FuzzUsage feeds one usage object to BodyUsage (a Messages body's) and to
// the stream translator as message_start's and message_delta's. Neither
// panics; what they report adds up as docs/cost.md says (the prompt is
// input_tokens plus both cache counts, the total the prompt plus the
// output) without overflowing, costs a finite amount that is not negative,
// and the translator says BadUsage whenever a count it reads is not a
// whole number of at most 16 digits, instead of leaving it out.
func FuzzUsage(f *testing.F) {
	for _, s := range usageSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		b = bytes.ReplaceAll(bytes.ReplaceAll(b, []byte("\n"), []byte(" ")), []byte("\r"), []byte(" "))
		body := []byte(`{"id":"msg_1","type":"message","content":[],"usage":` + string(b) + "}")
		if u, ok := BodyUsage(body); ok {
			var m messageUsage
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatalf("BodyUsage(%q) = %+v from a usage encoding/json does not read: %v", b, u, err)
			}
			if sane(m.InputTokens, m.OutputTokens, m.CacheCreation, m.CacheRead) {
				want := Usage{PromptTokens: m.InputTokens + m.CacheCreation + m.CacheRead, CompletionTokens: m.OutputTokens,
					CachedTokens: m.CacheRead, CacheWriteTokens: m.CacheCreation}
				want.TotalTokens = want.PromptTokens + want.CompletionTokens
				if u != want {
					t.Fatalf("BodyUsage(%q) = %+v, want %+v", b, u, want)
				}
				holdCost(t, u)
			}
		}

		tr := NewStreamTranslator("m", 1, true)
		start := `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"usage":` +
			string(b) + "}}"
		delta := `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":` + string(b) + "}"
		var out []byte
		var err error
		for _, ev := range [][2]string{{"message_start", start}, {"message_delta", delta}, {"message_stop", `{"type":"message_stop"}`}} {
			if out, err = tr.Event(out, []byte(ev[0]), []byte(ev[1])); err != nil {
				break
			}
		}
		u, ok := tr.Usage()
		if !ok {
			return
		}
		if u.PromptTokens < 0 || u.CompletionTokens < 0 || u.CachedTokens < 0 || u.CacheWriteTokens < 0 ||
			u.TotalTokens != u.PromptTokens+u.CompletionTokens || u.CachedTokens+u.CacheWriteTokens > u.PromptTokens {
			t.Fatalf("stream usage of %q: %+v does not add up", b, u)
		}
		holdCost(t, u)
		if err == nil && !tr.BadUsage() && !countsPlain(b) {
			t.Fatalf("stream usage of %q: a count that is not a whole number was left out, usage %+v", b, u)
		}
	})
}

func sane(ns ...int64) bool {
	for _, n := range ns {
		if n < 0 || n > pricing.MaxTokens {
			return false
		}
	}
	return true
}

// countsPlain reports whether every member of object b the translator
// reads as a count (by its exact key) is a run of at most 16 digits or
// null; true as well for what is not one JSON object.
func countsPlain(b []byte) bool {
	var ms map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(b))
	if dec.Decode(&ms) != nil || ms == nil || bytes.Contains(b, []byte(`\`)) {
		return true // not judged: the event was not an object, or keys are escaped
	}
	// Duplicates: the map keeps the last, the translator reads each in
	// turn; judge only objects without duplicated count keys.
	for _, k := range []string{"input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"} {
		if bytes.Count(b, []byte(strconv.Quote(k))) > 1 {
			return true
		}
		v, ok := ms[k]
		if !ok || string(v) == "null" {
			continue
		}
		if _, isCount := parseCount(v); !isCount {
			return false
		}
	}
	return true
}

func holdCost(t *testing.T, u Usage) {
	t.Helper()
	pu := pricing.Usage{Input: u.PromptTokens, Output: u.CompletionTokens, CachedInput: u.CachedTokens, CacheWrite: u.CacheWriteTokens}
	for _, p := range []pricing.Price{{Input: 3, Output: 15, CachedInput: 0.3, CacheWrite: 3.75},
		{Input: math.NaN(), Output: math.Inf(1), CachedInput: -1, CacheWrite: math.MaxFloat64, Request: math.Inf(1)}} {
		if c := p.Cost(pu); c < 0 || math.IsNaN(c) || math.IsInf(c, 0) {
			t.Fatalf("usage %+v costs %v at %+v", u, c, p)
		}
	}
}
