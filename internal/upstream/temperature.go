package upstream

import (
	"strconv"

	"github.com/llmgw/gateway/internal/jsontext"
)

// Temperature is the client's top-level temperature, found by scanning the
// body when asked: only a traced attempt asks (gen_ai.request.temperature),
// so the parse every request goes through stays as it is. ok is false when
// the body sets none, or not as a number.
func (r *ChatRequest) Temperature() (t float64, ok bool) {
	b := r.Body
	i := jsontext.SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return 0, false
	}
	for i++; ; {
		i = jsontext.SkipSpace(b, i)
		if i >= len(b) || b[i] != '"' {
			return 0, false
		}
		k := i
		i = jsontext.SkipString(b, i)
		key := b[k:i]
		i = jsontext.SkipSpace(b, i)
		if i >= len(b) || b[i] != ':' {
			return 0, false
		}
		v := jsontext.SkipSpace(b, i+1)
		i = jsontext.SkipValue(b, v)
		if string(key) == `"temperature"` {
			t, err := strconv.ParseFloat(string(b[v:i]), 64)
			return t, err == nil
		}
		i = jsontext.SkipSpace(b, i)
		if i >= len(b) || b[i] != ',' {
			return 0, false
		}
		i++
	}
}
