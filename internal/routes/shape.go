package routes

import (
	"encoding"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// maxShapeVisits bounds the walk over aliases and merge keys, which can
// expand exponentially; yaml's own decoder has a similar guard, which this
// walk runs before. A real routes file has a few thousand values.
const maxShapeVisits = 1 << 17

// shapeChecker walks the parsed document against the Go types it decodes
// into and reports the first unknown field, repeated key or value of the
// wrong kind with its YAML path and line. yaml's own errors name Go types
// ("field api_key not found in type routes.ProviderConfig") and echo
// values, which may be keys. After a clean walk, Node.Decode cannot fail on
// shape, and lines holds the line of every path written in the file.
type shapeChecker struct {
	lines  lineIndex
	visits int
}

var (
	yamlUnmarshaler = reflect.TypeFor[yaml.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

func (c *shapeChecker) check(n *yaml.Node, t reflect.Type, path string) error {
	if c.visits++; c.visits > maxShapeVisits {
		return shapeErr(path, n, ": the file expands too many aliases")
	}
	for hops := 0; n.Kind == yaml.AliasNode; hops++ {
		if n.Alias == nil || hops > 100 {
			return shapeErr(path, n, ": an alias does not resolve")
		}
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil // an empty value leaves the zero value, as yaml does
	}
	pt := reflect.PointerTo(t)
	switch {
	case t == reflect.TypeFor[AuthConfig]() && n.Kind == yaml.MappingNode:
		// auth is a style name or {header: NAME}: the mapping is checked
		// like any other, its one field by name.
		return c.structMapping(n, reflect.TypeFor[authHeader](), path, nil)
	case t == reflect.TypeFor[AuthConfig]() && n.Kind != yaml.ScalarNode:
		return shapeErr(path, n, ": expected bearer, x-api-key, none or {header: NAME}, got "+nodeKindName(n))
	case pt.Implements(yamlUnmarshaler):
		if n.Kind != yaml.ScalarNode {
			return wrongKind(path, n, t)
		}
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			return shapeErr(path, n, ": "+err.Error())
		}
		return nil
	case pt.Implements(textUnmarshaler):
		// secret.String: any scalar is a key; yaml passes the raw text.
		return checkString(path, n, t)
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return wrongKind(path, n, t)
		}
		return c.structMapping(n, t, path, nil)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return wrongKind(path, n, t)
		}
		for i, item := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			if _, ok := c.lines[p]; !ok {
				c.lines[p] = item.Line
			}
			if err := c.check(item, t.Elem(), p); err != nil {
				return err
			}
		}
		return nil
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return wrongKind(path, n, t)
		}
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				return shapeErr(path, k, ": every key must be a plain string")
			}
			p := childPath(path, k.Value)
			if first, dup := seen[k.Value]; dup {
				return shapeErr(p, k, fmt.Sprintf(" is set twice (first at line %d)", first))
			}
			seen[k.Value] = k.Line
			c.lines[p] = k.Line
			if err := c.check(v, t.Elem(), p); err != nil {
				return err
			}
		}
		return nil
	case reflect.String:
		return checkString(path, n, t)
	case reflect.Int:
		if n.Kind != yaml.ScalarNode {
			return wrongKind(path, n, t)
		}
		var i int
		if n.ShortTag() != "!!int" || n.Decode(&i) != nil {
			hint := ""
			if _, err := strconv.Atoi(n.Value); err == nil && n.ShortTag() == "!!str" {
				hint = " (write it without quotes)"
			}
			return shapeErr(path, n, fmt.Sprintf(": %s is not a whole number%s", quoteShort(n.Value), hint))
		}
		return nil
	case reflect.Float64:
		// A price or a budget: 3 and 2.5 are both numbers; .nan and .inf
		// pass here and are refused by the validator, which names the range.
		if n.Kind != yaml.ScalarNode {
			return wrongKind(path, n, t)
		}
		var f float64
		if tag := n.ShortTag(); (tag != "!!int" && tag != "!!float") || n.Decode(&f) != nil {
			hint := ""
			if _, err := strconv.ParseFloat(strings.TrimSpace(n.Value), 64); err == nil &&
				n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
				hint = " (write it without quotes)"
			}
			return shapeErr(path, n, fmt.Sprintf(": %s is not a number%s", quoteShort(n.Value), hint))
		}
		return nil
	case reflect.Pointer: // an optional value (stream_usage): checked as itself
		return c.check(n, t.Elem(), path)
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
			return shapeErr(path, n, fmt.Sprintf(": %s is not true or false", quoteShort(n.Value)))
		}
		return nil
	}
	// Not reached for the types of Routes; kept so a new field type fails
	// loudly here rather than with a Go type name from yaml.
	return shapeErr(path, n, fmt.Sprintf(": unsupported value for %s", t))
}

// checkString accepts any scalar yaml can turn into a string. An explicit
// tag that does not fit (!!int on "abc") is reported without the value,
// which may be a key.
func checkString(path string, n *yaml.Node, t reflect.Type) error {
	if n.Kind != yaml.ScalarNode {
		return wrongKind(path, n, t)
	}
	var s string
	if err := n.Decode(&s); err != nil {
		return shapeErr(path, n, fmt.Sprintf(": the value tagged %s is not %s", quoteShort(n.Tag), kindName(t)))
	}
	return nil
}

// structMapping checks one mapping against struct type t. Keys written in n
// come first; merge keys (<<: *anchor) follow and may not override them, as
// in yaml. chain holds the merged mappings being walked, to stop a merge
// that includes itself.
func (c *shapeChecker) structMapping(n *yaml.Node, t reflect.Type, path string, chain []*yaml.Node) error {
	fields := yamlFields(t)
	seen := map[string]int{}
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return shapeErr(path, k, ": every key must be a plain field name")
		}
		if k.Value == "<<" && k.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		f, ok := fields[k.Value]
		if !ok {
			return shapeErr(path, k, ": unknown field "+quoteShort(k.Value)+suggest(k.Value, slices.Sorted(maps.Keys(fields))))
		}
		p := childPath(path, k.Value)
		if first, dup := seen[k.Value]; dup {
			return shapeErr(p, k, fmt.Sprintf(" is set twice (first at line %d)", first))
		}
		seen[k.Value] = k.Line
		if _, ok := c.lines[p]; !ok {
			c.lines[p] = k.Line
		}
		if err := c.check(v, f.Type, p); err != nil {
			return err
		}
	}
	for _, m := range merges {
		var sources []*yaml.Node
		switch m.Kind {
		case yaml.SequenceNode:
			sources = m.Content
		default:
			sources = []*yaml.Node{m}
		}
		for _, s := range sources {
			if c.visits++; c.visits > maxShapeVisits {
				return shapeErr(path, s, ": the file expands too many aliases")
			}
			for hops := 0; s.Kind == yaml.AliasNode && s.Alias != nil && hops <= 100; hops++ {
				s = s.Alias
			}
			if s.Kind != yaml.MappingNode {
				return shapeErr(path, s, ": a merge key (<<) must name a mapping")
			}
			if s == n || slices.Contains(chain, s) {
				return shapeErr(path, s, ": a merge key (<<) includes its own mapping")
			}
			if err := c.structMapping(s, t, path, append(chain, n)); err != nil {
				return err
			}
		}
	}
	return nil
}

// fieldCache holds yamlFields per struct type: the walk asks once per
// mapping, and reflection per call made a large file slow to check.
var fieldCache sync.Map // reflect.Type -> map[string]reflect.StructField

// yamlFields maps the YAML names of t's fields to the fields.
func yamlFields(t reflect.Type) map[string]reflect.StructField {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.StructField)
	}
	out := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f
	}
	fieldCache.Store(t, out)
	return out
}

func shapeErr(path string, n *yaml.Node, msg string) *FieldError {
	where := path
	if where == "" {
		where = "top level"
		msg = strings.TrimPrefix(msg, " ")
		if !strings.HasPrefix(msg, ":") {
			msg = ": " + msg
		}
	}
	return &FieldError{Path: path, Line: n.Line, Msg: where + msg}
}

func wrongKind(path string, n *yaml.Node, t reflect.Type) *FieldError {
	return shapeErr(path, n, fmt.Sprintf(": expected %s, got %s", kindName(t), nodeKindName(n)))
}

// kindName says what a user writes for a field of type t.
func kindName(t reflect.Type) string {
	switch {
	case t == reflect.TypeFor[Duration]():
		return "a duration (like 250ms or 30s)"
	case reflect.PointerTo(t).Implements(textUnmarshaler), t.Kind() == reflect.String:
		return "a string"
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "a mapping (key: value lines or { ... })"
	case reflect.Slice:
		return "a list (- item lines or [ ... ])"
	case reflect.Int:
		return "a whole number"
	case reflect.Float64:
		return "a number"
	}
	return t.String()
}

// nodeKindName describes what was written, never the value itself: the
// value may be a key.
func nodeKindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	switch n.ShortTag() {
	case "!!int", "!!float":
		return "a number"
	case "!!bool":
		return "true/false"
	}
	return "a string"
}
