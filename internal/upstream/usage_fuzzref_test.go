package upstream

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/llmgw/gateway/internal/pricing"
)

// The specification the usage fuzz targets (usage_fuzz_test.go) hold the
// readers to, written from encoding/json's rules rather than from the
// readers: a usage object's members in order, a field matched by its exact
// name or else case-insensitively, the last match winning, null leaving a
// count as it was, and anything but a whole number within int64 making the
// object unreadable.

// refMember is one member of a JSON object, in order.
type refMember struct {
	key string
	val json.RawMessage
}

// refMembers returns the members of b when b is exactly one JSON object.
func refMembers(b []byte) ([]refMember, bool) {
	if !json.Valid(b) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	var out []refMember
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		k, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		out = append(out, refMember{k, v})
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, false
	}
	_, err := dec.Token()
	return out, err == io.EOF
}

// refExact makes refField match exact names only, as the stream
// translators' scanners do; encoding/json folds case.
var refExact bool

// refField is the field of names a key lands in, as encoding/json picks it:
// the exact name, else one equal under case folding.
func refField(key string, names []string) string {
	for _, n := range names {
		if key == n {
			return n
		}
	}
	if refExact {
		return ""
	}
	for _, n := range names {
		if strings.EqualFold(key, n) {
			return n
		}
	}
	return ""
}

// refInt reads a count as encoding/json reads an int64: a whole number
// without fraction or exponent within int64, or null (present false).
func refInt(v json.RawMessage) (n int64, present, ok bool) {
	s := string(v)
	if s == "null" {
		return 0, false, true
	}
	if strings.ContainsAny(s, ".eE") {
		return 0, false, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, true, err == nil
}

// refCounts reads the counts names of an object's members. readable is
// false when one of them is not a count.
func refCounts(ms []refMember, names []string) (counts map[string]int64, readable bool) {
	counts = map[string]int64{}
	readable = true
	for _, m := range ms {
		f := refField(m.key, names)
		if f == "" {
			continue
		}
		n, present, ok := refInt(m.val)
		if !ok {
			readable = false
		} else if present {
			counts[f] = n
		}
	}
	return counts, readable
}

// refRaw is the last raw value of the member that lands in field name.
func refRaw(ms []refMember, name string) json.RawMessage {
	var v json.RawMessage
	for _, m := range ms {
		if refField(m.key, []string{name}) == name {
			v = m.val
		}
	}
	return v
}

// refDetail reads a details object's one count (prompt_tokens_details'
// cached_tokens): a details value that is not an object, or whose count
// does not read, counts 0, as the readers document.
func refDetail(ms []refMember, details, count string) int64 {
	dm, ok := refMembers(refRaw(ms, details))
	if !ok {
		return 0
	}
	c, readable := refCounts(dm, []string{count})
	if !readable {
		return 0
	}
	return c[count]
}

var chatCountNames = []string{"prompt_tokens", "completion_tokens", "total_tokens"}

// refChat is what a chat or embeddings reader must report for usage object
// b: readable is false when b is not an object of counts; the usage is then
// refused, as it is when it fails CheckUsage.
func refChat(b []byte) (u Usage, isObject, readable bool) {
	ms, ok := refMembers(b)
	if !ok {
		return Usage{}, false, false
	}
	c, readable := refCounts(ms, chatCountNames)
	u = Usage{PromptTokens: c["prompt_tokens"], CompletionTokens: c["completion_tokens"], TotalTokens: c["total_tokens"],
		CachedTokens:    refDetail(ms, "prompt_tokens_details", "cached_tokens"),
		ReasoningTokens: refDetail(ms, "completion_tokens_details", "reasoning_tokens")}
	return u, true, readable
}

var (
	wideCountNames = []string{"prompt_tokens", "completion_tokens", "total_tokens", "input_tokens", "output_tokens",
		"cache_creation_input_tokens", "cache_read_input_tokens"}
	wideDetailNames = [][2]string{{"prompt_tokens_details", "cached_tokens"}, {"input_tokens_details", "cached_tokens"},
		{"completion_tokens_details", "reasoning_tokens"}, {"output_tokens_details", "reasoning_tokens"}}
	messagesCountNames = []string{"input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"}
	chatDetails        = wideDetailNames[0:1:1]
)

// refSane reports whether usage object b is an object whose counts names
// (and details' counts) are whole numbers within [0, MaxUsageTokens]: a
// reader that reports a usage from b must find it so, whichever of those
// counts it uses. null, for a stream event's usage, is no usage and sane.
func refSane(b []byte, names []string, details [][2]string) bool {
	if string(b) == "null" {
		return true
	}
	ms, ok := refMembers(b)
	if !ok {
		return false
	}
	c, readable := refCounts(ms, names)
	if !readable {
		return false
	}
	for _, n := range c {
		if n < 0 || n > MaxUsageTokens {
			return false
		}
	}
	for _, d := range details {
		if n := refDetail(ms, d[0], d[1]); n < 0 || n > MaxUsageTokens {
			return false
		}
	}
	return true
}

// refWide is the usage a Responses or Anthropic reader must report for a
// sane usage object b, as docs/cost.md tabulates it: the prompt is
// prompt_tokens, or input_tokens with Anthropic's cache counts added back.
func refWide(b []byte) Usage {
	ms, _ := refMembers(b)
	c, _ := refCounts(ms, wideCountNames)
	u := Usage{PromptTokens: c["prompt_tokens"], CompletionTokens: c["completion_tokens"], TotalTokens: c["total_tokens"]}
	if u.PromptTokens == 0 {
		u.PromptTokens = c["input_tokens"] + c["cache_creation_input_tokens"] + c["cache_read_input_tokens"]
	}
	if u.CompletionTokens == 0 {
		u.CompletionTokens = c["output_tokens"]
	}
	if u.TotalTokens == 0 {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	u.CachedTokens = c["cache_read_input_tokens"] + refDetail(ms, "prompt_tokens_details", "cached_tokens") +
		refDetail(ms, "input_tokens_details", "cached_tokens")
	u.CacheWriteTokens = c["cache_creation_input_tokens"]
	u.ReasoningTokens = refDetail(ms, "completion_tokens_details", "reasoning_tokens") +
		refDetail(ms, "output_tokens_details", "reasoning_tokens")
	return u
}

// Prices a reported usage is costed at: the bounds, hostile numbers (which
// Cost clamps) and a real price, whose cost is checked exactly.
var (
	boundPrice   = pricing.Price{Input: pricing.MaxPrice, Output: pricing.MaxPrice, CachedInput: pricing.MaxPrice, CacheWrite: pricing.MaxPrice, Request: pricing.MaxRequest}
	hostilePrice = pricing.Price{Input: math.NaN(), Output: math.Inf(1), CachedInput: -1, CacheWrite: math.MaxFloat64, Request: math.Inf(-1)}
	realPrice    = pricing.Price{Input: 2.5, Output: 10, CachedInput: 1.25, CacheWrite: 3.75}
)

// maxCost is the most a usage can cost at the bounds: every input and
// every output token at MaxPrice, and the request fee.
const maxCost = 2*pricing.MaxTokens*pricing.MaxPrice/1e6 + pricing.MaxRequest

// holdUsage is what every reported usage meets: CheckUsage, and a cost at
// any price that is finite, not negative, not above maxCost, and exactly
// the docs' formula at a real price.
func holdUsage(t *testing.T, what string, u Usage, ok bool) {
	t.Helper()
	if !ok {
		return
	}
	if err := CheckUsage(u); err != nil {
		t.Fatalf("%s: reported %+v, which fails CheckUsage: %v", what, u, err)
	}
	pu := pricing.Usage{Input: u.PromptTokens, Output: u.CompletionTokens, CachedInput: u.CachedTokens,
		CacheWrite: u.CacheWriteTokens, Reasoning: u.ReasoningTokens}
	for _, p := range []pricing.Price{boundPrice, hostilePrice, realPrice} {
		if c := p.Cost(pu); !(c >= 0 && c <= maxCost) {
			t.Fatalf("%s: usage %+v costs %v at %+v", what, u, c, p)
		}
	}
	plain := u.PromptTokens - u.CachedTokens - u.CacheWriteTokens
	want := (float64(plain)*2.5 + float64(u.CachedTokens)*1.25 + float64(u.CacheWriteTokens)*3.75 + float64(u.CompletionTokens)*10) / 1e6
	if got := realPrice.Cost(pu); math.Abs(got-want) > 1e-9*math.Max(1, want) {
		t.Fatalf("%s: usage %+v costs %v, want %v", what, u, got, want)
	}
}

// addUsageSeeds gives f the usage objects providers send and the ones they
// must not: 10^15 tokens, negative counts, fractions, huge exponents,
// numbers past int64, duplicated keys, case variants and escaped keys.
func addUsageSeeds(f *testing.F) {
	for _, s := range []string{
		`{"prompt_tokens":1000,"completion_tokens":200,"total_tokens":1200,"prompt_tokens_details":{"cached_tokens":400},"completion_tokens_details":{"reasoning_tokens":50}}`,
		`{"input_tokens":1000,"input_tokens_details":{"cached_tokens":400},"output_tokens":200,"output_tokens_details":{"reasoning_tokens":50},"total_tokens":1200}`,
		`{"input_tokens":100,"cache_creation_input_tokens":100,"cache_read_input_tokens":2000,"output_tokens":50}`,
		`{"output_tokens":50}`,
		`{"prompt_tokens":8,"total_tokens":8}`,
		`{"prompt_tokens":1000000000000000,"completion_tokens":1,"total_tokens":1000000000000001}`,
		`{"input_tokens":1000000000000000,"output_tokens":1}`,
		`{"output_tokens":100000000000000000}`,
		`{"cache_read_input_tokens":1000000000000000,"input_tokens":1}`,
		`{"prompt_tokens":-1,"completion_tokens":2,"total_tokens":1}`,
		`{"input_tokens":-5,"cache_read_input_tokens":10,"output_tokens":1}`,
		`{"prompt_tokens":10,"input_tokens":-5}`,
		`{"completion_tokens":3,"output_tokens":-7}`,
		`{"prompt_tokens":10,"prompt_tokens_details":{"cached_tokens":-4}}`,
		`{"input_tokens":10,"input_tokens_details":{"cached_tokens":11}}`,
		`{"prompt_tokens":10,"prompt_tokens_details":{"cached_tokens":4},"input_tokens_details":{"cached_tokens":9223372036854775807}}`,
		`{"completion_tokens":1,"completion_tokens_details":{"reasoning_tokens":2}}`,
		`{"prompt_tokens":1.5,"completion_tokens":2}`,
		`{"prompt_tokens":1.0}`,
		`{"prompt_tokens":1e3}`,
		`{"output_tokens":1e308}`,
		`{"output_tokens":1E+400}`,
		`{"total_tokens":9223372036854775807}`,
		`{"total_tokens":9223372036854775808}`,
		`{"total_tokens":-9223372036854775808}`,
		`{"prompt_tokens":"12"}`,
		`{"prompt_tokens":true}`,
		`{"prompt_tokens":null,"completion_tokens":null}`,
		`{"prompt_tokens":5,"prompt_tokens":-5}`,
		`{"prompt_tokens":-5,"prompt_tokens":5}`,
		`{"Prompt_Tokens":-5}`,
		`{"prompt_tokens":5,"Prompt_Tokens":-5}`,
		`{"Prompt_Tokens":-5,"prompt_tokens":5}`,
		`{"INPUT_TOKENS":3,"Output_Tokens":4}`,
		`{"Cache_Read_Input_Tokens":-1,"input_tokens":1}`,
		`{"prompt_tokens_details":{"Cached_Tokens":-4},"prompt_tokens":1}`,
		`{"prompt\u005ftokens":-3}`,
		`{"inpu\u0074_tokens":7,"output_tokens":1}`,
		`{"prompt_tokens":3,"cost":1e308,"cost_details":{"upstream_inference_cost":-1}}`,
		`{"prompt_tokens":3,"prompt_tokens_details":null,"completion_tokens_details":"x"}`,
		`{}`, `null`, `[]`, `5`, `"usage"`, `{"prompt_tokens":`, ``,
	} {
		f.Add([]byte(s))
	}
}
