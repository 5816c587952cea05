package cache

import (
	"bytes"
	"cmp"
	"encoding/json"
	"slices"
	"strconv"

	"github.com/llmgw/gateway/internal/jsontext"
)

// jsonObject writes a JSON jsonObject member by member, in the order given: the
// stored answers and replayed events keep the order providers use (id
// first), which encoding/json's maps would sort away. Strings are written
// without HTML escapes, as providers write them.
type jsonObject struct {
	b []byte
	n int
}

func newObject(dst []byte) jsonObject { return jsonObject{b: append(dst, '{')} }

func (o *jsonObject) key(k string) {
	if o.n > 0 {
		o.b = append(o.b, ',')
	}
	o.n++
	o.b = append(jsontext.AppendString(o.b, k), ':')
}

// raw adds a member whose value is JSON already.
func (o *jsonObject) raw(k string, v []byte) {
	o.key(k)
	o.b = append(o.b, v...)
}

func (o *jsonObject) str(k, v string) {
	o.key(k)
	o.b = jsontext.AppendString(o.b, v)
}

func (o *jsonObject) int(k string, v int64) {
	o.key(k)
	o.b = strconv.AppendInt(o.b, v, 10)
}

func (o *jsonObject) end() []byte { return append(o.b, '}') }

// members adds m's members in sorted order, but for the keys in skip.
func (o *jsonObject) members(m map[string]json.RawMessage, skip ...string) {
	for _, k := range sortedKeys(m) {
		if !slices.Contains(skip, k) {
			o.raw(k, m[k])
		}
	}
}

func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	ks := make([]K, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// isNull reports whether a member's value is absent or null.
func isNull(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) == 0 || string(v) == "null"
}

// compact is v without insignificant whitespace: what goes into a stored
// answer is the same JSON however the provider spaced it.
func compact(v json.RawMessage) []byte {
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return v
	}
	return b.Bytes()
}
