package upstream

import (
	"bytes"
	"encoding/json"

	"github.com/llmgw/gateway/internal/jsontext"
)

// EventIsError reports whether an event's data is a JSON object whose first
// key is "error": how OpenAI-compatible providers report a failure inside a
// stream that already answered 200.
func EventIsError(ev []byte) bool { return isErrorData(eventData(ev)) }

// isErrorData is EventIsError on the event's data.
func isErrorData(d []byte) bool {
	i := jsontext.SkipSpace(d, 0)
	if i >= len(d) || d[i] != '{' {
		return false
	}
	i = jsontext.SkipSpace(d, i+1)
	return bytes.HasPrefix(d[i:], []byte(`"error"`))
}

// EventIsDone reports whether an event is the stream's terminating
// "data: [DONE]".
func EventIsDone(ev []byte) bool { return isDoneData(eventData(ev)) }

// isDoneData is EventIsDone on the event's data.
func isDoneData(d []byte) bool { return bytes.Equal(bytes.TrimSpace(d), []byte("[DONE]")) }

// Usage is the token accounting of a response.
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
	// The counts cost needs (docs/cost.md): cache reads and writes, which
	// PromptTokens includes (the whole prompt, in every format), and
	// reasoning, which CompletionTokens includes. Not members of the chat
	// usage object itself: OpenAI nests them in *_tokens_details.
	CachedTokens     int64 `json:"-"`
	CacheWriteTokens int64 `json:"-"`
	ReasoningTokens  int64 `json:"-"`
}

var usageKey = []byte(`"usage"`)

// EventUsage extracts usage from a chunk that carries it (OpenAI sends it in
// the last chunk when stream_options.include_usage is set). The cheap
// substring test keeps ordinary chunks from being decoded, and on the chunk
// that has one only the usage object itself is: the chunk is walked key by
// key at its top level, as encoding/json would pick its "usage" member, and
// the object alone is decoded (decodeUsage; decoding the whole last chunk
// with encoding/json was about 1.5% of a stream's CPU). On valid JSON the
// result is encoding/json's; a chunk that is not valid JSON past its usage
// object may still yield it.
func EventUsage(ev []byte) (Usage, bool) {
	u, _, ok := dataUsage(eventData(ev))
	return u, ok
}

// dataUsage is EventUsage on the event's data that also reports whether
// the chunk had a usage object at all (found), so that one that does not
// decode is told from none.
func dataUsage(d []byte) (u Usage, found, ok bool) {
	if !hasUsageObject(d) {
		return Usage{}, false, false
	}
	val, ok := memberValue(d, usageKey)
	if !ok || len(val) == 0 || val[0] != '{' {
		return Usage{}, false, false // absent, null or not an object
	}
	u, ok = decodeUsage(val)
	return u, true, ok
}

// memberValue returns the value of the last top-level member of the JSON
// object in b whose key is exactly key (quotes included), as encoding/json
// keeps the last of duplicate keys. false: b is not an object whose members
// can be walked, or has no such key. Every step moves past at least one
// byte, so any input ends the walk.
func memberValue(b, key []byte) ([]byte, bool) {
	_, vs, ve, ok := memberSpan(b, key)
	if !ok {
		return nil, false
	}
	return b[vs:ve], true
}

// memberSpan is the walk behind memberValue, which also gives where the member starts: the
// key's quote at ks, the value at b[vs:ve]. vs < ve whenever ok.
func memberSpan(b, key []byte) (ks, vs, ve int, ok bool) {
	i := jsontext.SkipSpace(b, 0)
	if i == len(b) || b[i] != '{' {
		return 0, 0, 0, false
	}
	for i++; ; i++ { // i is past '{' or ','
		i = jsontext.SkipSpace(b, i)
		if i == len(b) || b[i] != '"' {
			return ks, vs, ve, ok && i < len(b) && b[i] == '}'
		}
		start := i
		end := jsontext.SkipString(b, i)
		k := b[i:end]
		i = jsontext.SkipSpace(b, end)
		if i == len(b) || b[i] != ':' {
			return 0, 0, 0, false
		}
		i = jsontext.SkipSpace(b, i+1)
		vend := jsontext.SkipValue(b, i)
		if bytes.Equal(k, key) && vend > i {
			ks, vs, ve, ok = start, i, vend, true
		}
		i = jsontext.SkipSpace(b, vend)
		if i == len(b) {
			return 0, 0, 0, false
		}
		switch b[i] {
		case ',':
			continue
		case '}':
			return ks, vs, ve, ok
		default:
			return 0, 0, 0, false
		}
	}
}

// hasUsageObject reports whether b holds "usage" followed by an object.
// OpenAI sends "usage":null in every chunk when include_usage is set; only
// the last chunk's object is worth decoding.
func hasUsageObject(b []byte) bool {
	for {
		i := bytes.Index(b, usageKey)
		if i < 0 {
			return false
		}
		b = b[i+len(usageKey):]
		// SkipSpace is JSON's whitespace: an event's data holds '\n' where
		// data lines were joined, and BodyUsage accepts any of it around the
		// colon.
		if j := jsontext.SkipSpace(b, 0); j < len(b) && b[j] == ':' {
			if j = jsontext.SkipSpace(b, j+1); j < len(b) && b[j] == '{' {
				return true
			}
		}
	}
}

// BodyUsage extracts usage from a chat completion JSON object.
func BodyUsage(b []byte) (Usage, bool) {
	var v struct {
		Usage *Usage `json:"usage"`
	}
	if json.Unmarshal(b, &v) != nil || v.Usage == nil {
		return Usage{}, false
	}
	return *v.Usage, true
}

// TailUsage extracts usage from the tail of a non-streaming body, where
// OpenAI-compatible providers put it; the body itself is never buffered whole.
// The tail is whatever the provider sent, valid JSON or not, and is read
// without ever indexing past its end. As encoding/json would read the whole
// body, the last "usage" key decides: a later "usage":null means no usage.
// Nesting is not tracked, so a "usage" key inside a later object would be
// taken for the body's; no provider puts one there.
func TailUsage(tail []byte) (Usage, bool) {
	end := len(tail)
	for {
		i := bytes.LastIndex(tail[:end], usageKey)
		if i < 0 {
			return Usage{}, false
		}
		end = i
		val, ok := keyValue(tail, i)
		if !ok {
			continue
		}
		if len(val) == 0 || val[0] != '{' {
			return Usage{}, false
		}
		// SkipValue stops at the object's closing brace, or at the end of a
		// cut tail, which decodeUsage then refuses; no json.Decoder per
		// response.
		return decodeUsage(val[:jsontext.SkipValue(val, 0)])
	}
}

// keyValue returns what follows the colon after the "usage" at b[i], or false
// when that "usage" is not a key: its quote is escaped (a string value that
// ends in \"usage), or no colon follows (an array element, a value, a cut).
func keyValue(b []byte, i int) ([]byte, bool) {
	if i > 0 && b[i-1] == '\\' {
		return nil, false
	}
	j := jsontext.SkipSpace(b, i+len(usageKey))
	if j == len(b) || b[j] != ':' {
		return nil, false
	}
	return b[jsontext.SkipSpace(b, j+1):], true
}
