package upstream

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/llmgw/gateway/internal/jsontext"
)

// MaxUsageTokens is the ceiling of one token count in a provider's usage:
// far above any context window or batch (the largest are a few million
// tokens), far below what overflows a counter (quota.MaxTokenCount is the
// same figure). A count outside [0, MaxUsageTokens] cannot be true.
const MaxUsageTokens = 1_000_000_000

// UsageError is a usage object a provider sent that cannot be read (a
// fraction, a number past int64, a string) or cannot be true (a count below
// 0 or above MaxUsageTokens). The answer is relayed as it is; the attempt's
// tokens are unknown (NULL in the ledger, nothing counted toward a token
// rate), and the attempt's record carries upstream_protocol_error with
// this message.
type UsageError struct {
	Detail string
}

func (e *UsageError) Error() string { return "impossible usage from the provider: " + e.Detail }

// CheckUsage is the rule every format's usage meets before it is counted
// or recorded: each count in [0, MaxUsageTokens], the cache counts within
// the prompt and the reasoning within the output they are part of.
func CheckUsage(u Usage) error {
	for _, c := range [...]struct {
		name string
		n    int64
	}{{"prompt_tokens", u.PromptTokens}, {"completion_tokens", u.CompletionTokens}, {"total_tokens", u.TotalTokens},
		{"cached_tokens", u.CachedTokens}, {"cache_write_tokens", u.CacheWriteTokens}, {"reasoning_tokens", u.ReasoningTokens}} {
		if c.n < 0 || c.n > MaxUsageTokens {
			return &UsageError{Detail: c.name + " " + strconv.FormatInt(c.n, 10) + " is outside [0, " +
				strconv.Itoa(MaxUsageTokens) + "]"}
		}
	}
	if u.CachedTokens+u.CacheWriteTokens > u.PromptTokens {
		return &UsageError{Detail: "cached tokens " + strconv.FormatInt(u.CachedTokens+u.CacheWriteTokens, 10) +
			" exceed prompt_tokens " + strconv.FormatInt(u.PromptTokens, 10)}
	}
	if u.ReasoningTokens > u.CompletionTokens {
		return &UsageError{Detail: "reasoning_tokens " + strconv.FormatInt(u.ReasoningTokens, 10) +
			" exceed completion_tokens " + strconv.FormatInt(u.CompletionTokens, 10)}
	}
	return nil
}

// errUnreadableUsage is a usage object present but not decodable as counts.
var errUnreadableUsage = &UsageError{Detail: "the usage object's counts are not whole numbers within int64"}

// usageCheck keeps a reader's first usage fault, for UsageError.
type usageCheck struct{ bad error }

// checked applies CheckUsage to a usage a reader is about to report. Once
// a fault was seen, no usage is reported: a stream's later event that
// reads well (an Anthropic message_delta after a message_start whose
// counts did not) would otherwise pass for the whole usage, its prompt
// billed as 0.
func (c *usageCheck) checked(u Usage, ok bool) (Usage, bool) {
	if !ok || c.bad != nil {
		return Usage{}, false
	}
	if err := CheckUsage(u); err != nil {
		if c.bad == nil {
			c.bad = err
		}
		return Usage{}, false
	}
	return u, true
}

// unreadable notes a usage object that did not decode.
func (c *usageCheck) unreadable() { c.fault(errUnreadableUsage) }

// fault notes a usage that cannot be true; the first one is kept.
func (c *usageCheck) fault(err error) {
	if c.bad == nil {
		c.bad = err
	}
}

// UsageError implements Reader.
func (c *usageCheck) UsageError() error { return c.bad }

// decodeUsage is json.Unmarshal of a usage object into a Usage, with
// encoding/json's result on every input. The objects providers send (token
// counts, objects of counts such as prompt_tokens_details, a cost as a
// float) are decoded here without reflection; anything this scanner is not
// sure of, such as an escaped key or an ASCII case variant of a field name
// (encoding/json matches keys case-insensitively), goes to encoding/json.
// On the stream's last chunk, encoding/json took about 2% of a stream's
// CPU in the gateway's profile.
func decodeUsage(val []byte) (Usage, bool) {
	if u, ok, sure := scanUsage(val); sure {
		return u, ok
	}
	return unmarshalUsage(val)
}

// chatUsageJSON is the chat (and embeddings) usage object as encoding/json
// reads it; the details objects are decoded on their own, so that one the
// gateway cannot read (a string, an array) costs only its own count.
type chatUsageJSON struct {
	PromptTokens      int64           `json:"prompt_tokens"`
	CompletionTokens  int64           `json:"completion_tokens"`
	TotalTokens       int64           `json:"total_tokens"`
	PromptDetails     json.RawMessage `json:"prompt_tokens_details"`
	CompletionDetails json.RawMessage `json:"completion_tokens_details"`
}

// unmarshalUsage is decodeUsage by encoding/json alone: the reference the
// scanner agrees with.
func unmarshalUsage(val []byte) (Usage, bool) {
	var j chatUsageJSON
	if json.Unmarshal(val, &j) != nil {
		return Usage{}, false
	}
	u := Usage{PromptTokens: j.PromptTokens, CompletionTokens: j.CompletionTokens, TotalTokens: j.TotalTokens}
	var pd struct {
		CachedTokens int64 `json:"cached_tokens"`
	}
	if json.Unmarshal(j.PromptDetails, &pd) == nil {
		u.CachedTokens = pd.CachedTokens
	}
	var cd struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	}
	if json.Unmarshal(j.CompletionDetails, &cd) == nil {
		u.ReasoningTokens = cd.ReasoningTokens
	}
	return u, true
}

var (
	promptTokensKey      = []byte("prompt_tokens")
	completionTokensKey  = []byte("completion_tokens")
	totalTokensKey       = []byte("total_tokens")
	promptDetailsKey     = []byte("prompt_tokens_details")
	completionDetailsKey = []byte("completion_tokens_details")
	cachedTokensKey      = []byte("cached_tokens")
	reasoningTokensKey   = []byte("reasoning_tokens")
)

// scanUsage decodes a usage object strictly. sure is false when the result
// might differ from encoding/json's; ok is false when encoding/json would
// fail (only reported when sure).
func scanUsage(b []byte) (u Usage, ok, sure bool) {
	i := jsontext.SkipSpace(b, 0)
	if i == len(b) || b[i] != '{' {
		return Usage{}, false, false
	}
	i = jsontext.SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return Usage{}, jsontext.SkipSpace(b, i+1) == len(b), true
	}
	for {
		key, end, plain := scanKey(b, i)
		if !plain {
			return Usage{}, false, false
		}
		i = jsontext.SkipSpace(b, end)
		if i == len(b) || b[i] != ':' {
			return Usage{}, false, false
		}
		i = jsontext.SkipSpace(b, i+1)
		var field *int64
		switch {
		case bytes.Equal(key, promptTokensKey):
			field = &u.PromptTokens
		case bytes.Equal(key, completionTokensKey):
			field = &u.CompletionTokens
		case bytes.Equal(key, totalTokensKey):
			field = &u.TotalTokens
		case bytes.Equal(key, promptDetailsKey):
			if i, sure = scanDetail(b, i, cachedTokensKey, &u.CachedTokens); !sure {
				return Usage{}, false, false
			}
			goto next
		case bytes.Equal(key, completionDetailsKey):
			if i, sure = scanDetail(b, i, reasoningTokensKey, &u.ReasoningTokens); !sure {
				return Usage{}, false, false
			}
			goto next
		case bytes.EqualFold(key, promptTokensKey), bytes.EqualFold(key, completionTokensKey),
			bytes.EqualFold(key, totalTokensKey), bytes.EqualFold(key, promptDetailsKey),
			bytes.EqualFold(key, completionDetailsKey):
			return Usage{}, false, false // encoding/json would match it
		}
		if field != nil {
			if i, sure = scanCount(b, i, field); !sure {
				return Usage{}, false, false
			}
		} else if i, sure = jsontext.ValidValue(b, i, 1); !sure {
			return Usage{}, false, false // encoding/json would refuse the object
		}
	next:
		i = jsontext.SkipSpace(b, i)
		if i == len(b) {
			return Usage{}, false, false
		}
		switch b[i] {
		case ',':
			i = jsontext.SkipSpace(b, i+1)
		case '}':
			if jsontext.SkipSpace(b, i+1) != len(b) {
				return Usage{}, false, true // more after the object
			}
			return u, true, true
		default:
			return Usage{}, false, false
		}
	}
}

// scanKey reads the key at b[i]. plain is false unless it is a string of
// printable ASCII without escapes, which is the only kind scanUsage matches
// itself.
func scanKey(b []byte, i int) (key []byte, end int, plain bool) {
	if i == len(b) || b[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return b[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// scanCount stores the integer at b[i] in field; null leaves field as it
// is, as encoding/json does. Any other value, or a number with a fraction
// or an exponent (an error for an int64 in encoding/json), is not sure.
func scanCount(b []byte, i int, field *int64) (int, bool) {
	if bytes.HasPrefix(b[i:], []byte("null")) {
		return i + 4, true
	}
	end, ok := jsontext.ValidValue(b, i, 1)
	if !ok {
		return 0, false
	}
	for _, c := range b[i:end] {
		if c == '.' || c == 'e' || c == 'E' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(string(b[i:end]), 10, 64)
	if err != nil {
		return 0, false // not a number, or out of range
	}
	*field = n
	return end, true
}

// scanDetail reads a details object at b[i] (prompt_tokens_details) for
// its one count named key into field, as unmarshalUsage would: a later
// details member replaces an earlier one whole, null leaves the count at
// zero. sure is false on anything else (a case variant of key, an escaped
// key, a count that is not a plain integer, a value that is not an
// object).
func scanDetail(b []byte, i int, key []byte, field *int64) (int, bool) {
	*field = 0
	if bytes.HasPrefix(b[i:], []byte("null")) {
		return i + 4, true
	}
	if i == len(b) || b[i] != '{' {
		return 0, false
	}
	i = jsontext.SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		k, end, plain := scanKey(b, i)
		if !plain {
			return 0, false
		}
		i = jsontext.SkipSpace(b, end)
		if i == len(b) || b[i] != ':' {
			return 0, false
		}
		i = jsontext.SkipSpace(b, i+1)
		var ok bool
		switch {
		case bytes.Equal(k, key):
			if i, ok = scanCount(b, i, field); !ok {
				return 0, false
			}
		case bytes.EqualFold(k, key):
			return 0, false
		default:
			if i, ok = jsontext.ValidValue(b, i, 1); !ok {
				return 0, false
			}
		}
		i = jsontext.SkipSpace(b, i)
		if i == len(b) {
			return 0, false
		}
		switch b[i] {
		case ',':
			i = jsontext.SkipSpace(b, i+1)
		case '}':
			return i + 1, true
		default:
			return 0, false
		}
	}
}
