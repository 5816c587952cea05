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
// or recorded: each count in [0, MaxUsageTokens].
func CheckUsage(u Usage) error {
	for _, c := range [...]struct {
		name string
		n    int64
	}{{"prompt_tokens", u.PromptTokens}, {"completion_tokens", u.CompletionTokens}, {"total_tokens", u.TotalTokens}} {
		if c.n < 0 || c.n > MaxUsageTokens {
			return &UsageError{Detail: c.name + " " + strconv.FormatInt(c.n, 10) + " is outside [0, " +
				strconv.Itoa(MaxUsageTokens) + "]"}
		}
	}
	return nil
}

// errUnreadableUsage is a usage object present but not decodable as counts.
var errUnreadableUsage = &UsageError{Detail: "the usage object's counts are not whole numbers within int64"}

// usageCheck keeps a reader's first usage fault, for UsageError.
type usageCheck struct{ bad error }

// checked applies CheckUsage to a usage a reader is about to report.
func (c *usageCheck) checked(u Usage, ok bool) (Usage, bool) {
	if !ok {
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
func (c *usageCheck) unreadable() {
	if c.bad == nil {
		c.bad = errUnreadableUsage
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
	var u Usage
	if json.Unmarshal(val, &u) != nil {
		return Usage{}, false
	}
	return u, true
}

var (
	promptTokensKey     = []byte("prompt_tokens")
	completionTokensKey = []byte("completion_tokens")
	totalTokensKey      = []byte("total_tokens")
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
		case bytes.EqualFold(key, promptTokensKey), bytes.EqualFold(key, completionTokensKey),
			bytes.EqualFold(key, totalTokensKey):
			return Usage{}, false, false // encoding/json would match it
		}
		if field != nil {
			if i, sure = scanCount(b, i, field); !sure {
				return Usage{}, false, false
			}
		} else if i, sure = jsontext.ValidValue(b, i, 1); !sure {
			return Usage{}, false, false // encoding/json would refuse the object
		}
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
