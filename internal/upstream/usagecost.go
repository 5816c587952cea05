package upstream

import (
	"bytes"

	"github.com/llmgw/gateway/internal/jsontext"
)

var costKey = []byte(`"cost"`)

// WithUsageCost appends to dst the JSON object obj with "cost": usd (a
// JSON number, written by the caller) inside its top-level "usage" object,
// as OpenRouter reports cost: a client with cost_in_usage reads it where it
// reads its tokens. A cost the provider put there is replaced: the number
// is the gateway's. ok is false, and dst is returned as it was, when obj
// has no usage object (absent, null, or not an object): the answer is then
// relayed unchanged.
func WithUsageCost(dst, obj []byte, usd string) ([]byte, bool) {
	_, vs, ve, ok := memberSpan(obj, usageKey)
	if !ok || obj[vs] != '{' || !jsontext.Valid(obj[vs:ve]) {
		return dst, false // only a well-formed usage object is edited
	}
	usage := obj[vs:ve]
	dst = append(dst, obj[:vs]...)
	if _, cs, ce, has := memberSpan(usage, costKey); has {
		dst = append(dst, usage[:cs]...)
		dst = append(dst, usd...)
		dst = append(dst, usage[ce:]...)
	} else {
		closing := bytes.LastIndexByte(usage, '}')
		body := bytes.TrimSpace(usage[1:closing])
		dst = append(dst, usage[:closing]...)
		if len(body) > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, costKey...)
		dst = append(dst, ':')
		dst = append(dst, usd...)
		dst = append(dst, usage[closing:]...)
	}
	return append(dst, obj[ve:]...), true
}
