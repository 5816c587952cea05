package upstream

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/llmgw/gateway/internal/jsontext"
)

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

// maxUsageDepth bounds the nesting scanUsage follows before it leaves the
// object to encoding/json.
const maxUsageDepth = 8

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
		} else if i, sure = skipStrict(b, i, 0); !sure {
			return Usage{}, false, false
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
	end, ok := scanNumber(b, i)
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
		return 0, false
	}
	*field = n
	return end, true
}

// scanNumber returns the end of the JSON number at b[i]:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = skipDigits(b, i)
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		j := skipDigits(b, i+1)
		if j == i+1 {
			return 0, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := skipDigits(b, i)
		if j == i {
			return 0, false
		}
		i = j
	}
	return i, true
}

func skipDigits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// skipStrict returns the end of the valid JSON value at b[i], the value of
// a member Usage does not have. Strings are taken only without escapes (any
// byte from 0x20 up, as encoding/json's scanner takes them); deeper than
// maxUsageDepth is not sure.
func skipStrict(b []byte, i, depth int) (int, bool) {
	if i == len(b) || depth > maxUsageDepth {
		return 0, false
	}
	switch c := b[i]; {
	case c == '"':
		for j := i + 1; j < len(b); j++ {
			switch c := b[j]; {
			case c == '"':
				return j + 1, true
			case c == '\\' || c < 0x20:
				return 0, false
			}
		}
		return 0, false
	case c == '{' || c == '[':
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		i = jsontext.SkipSpace(b, i+1)
		if i < len(b) && b[i] == closer {
			return i + 1, true
		}
		for {
			if c == '{' {
				_, end, plain := scanKey(b, i)
				if !plain {
					return 0, false
				}
				i = jsontext.SkipSpace(b, end)
				if i == len(b) || b[i] != ':' {
					return 0, false
				}
				i = jsontext.SkipSpace(b, i+1)
			}
			end, ok := skipStrict(b, i, depth+1)
			if !ok {
				return 0, false
			}
			i = jsontext.SkipSpace(b, end)
			if i == len(b) {
				return 0, false
			}
			switch b[i] {
			case ',':
				i = jsontext.SkipSpace(b, i+1)
			case closer:
				return i + 1, true
			default:
				return 0, false
			}
		}
	case c == '-' || (c >= '0' && c <= '9'):
		return scanNumber(b, i)
	}
	for _, lit := range [...]string{"null", "true", "false"} {
		if bytes.HasPrefix(b[i:], []byte(lit)) {
			return i + len(lit), true
		}
	}
	return 0, false
}
