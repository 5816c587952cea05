package routes

import (
	"bytes"
	"encoding"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// FieldError is a mistake at one place of the routes file. It matches
// ErrInvalid with errors.Is; errors.As gives the path and line.
type FieldError struct {
	Path string // YAML path, e.g. providers[0].base_url; "" for the file as a whole
	Line int    // 1-based line in the file; 0 when the path is not written in it
	Msg  string // starts with Path; never holds a key
}

func (e *FieldError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	}
	return e.Msg
}

// Is makes every FieldError an ErrInvalid without putting the
// sentinel's text into the message.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

// lineIndex maps each YAML path written in the file to its line, so that a
// check made after decoding (on Go values) can still point at the file.
type lineIndex map[string]int

// line returns the line of path, or of its closest written ancestor: a
// missing field is reported at the mapping that lacks it.
func (ix lineIndex) line(path string) int {
	for path != "" {
		if l, ok := ix[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return ix[""]
}

// childPath names a mapping entry: a.b for plain names, a["x y"] otherwise.
func childPath(parent, key string) string {
	if plainKey.MatchString(key) {
		if parent == "" {
			return key
		}
		return parent + "." + key
	}
	return parent + "[" + strconv.Quote(key) + "]"
}

var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

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

// quoteShort quotes a value that is safe to show (a field name, a number,
// a duration), cut so a stray paste cannot flood the message.
func quoteShort(s string) string { return quoteCut(s, 64) }

func quoteCut(s string, limit int) string {
	if r := []rune(s); len(r) > limit {
		s = string(r[:limit]) + "..."
	}
	return strconv.Quote(s)
}

// suggest returns ` (did you mean "x"?)` when name is a near miss of one of
// the known names: the same after dropping case, '-' and '_', within a
// small edit distance, or contained in exactly one of them.
func suggest(name string, known []string) string {
	norm := func(s string) string {
		return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(s))
	}
	n := norm(name)
	if n == "" {
		return ""
	}
	best, bestD := "", 3
	var containing []string
	for _, k := range known {
		d := editDistance(n, norm(k))
		if d < bestD {
			best, bestD = k, d
		}
		if len(n) >= 3 && strings.Contains(norm(k), n) {
			containing = append(containing, k)
		}
	}
	if best == "" && len(containing) == 1 {
		best = containing[0]
	}
	if best == "" || (bestD == 2 && len(n) <= 4 && len(containing) != 1) {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// yamlSyntaxLine splits yaml's "yaml: line 3: did not find expected key".
var yamlSyntaxLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntaxError turns a yaml parse error of the file b into a FieldError for
// the whole file, on the line of the problem (problemLine). b is nil for
// errors that are not the parser's (alias expansion), whose line is kept.
func syntaxError(b []byte, err error) *FieldError {
	msg := err.Error()
	if m := yamlSyntaxLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		if b != nil && len(b) <= maxProblemSearch {
			line = problemLine(b, line, m[2])
		}
		return &FieldError{Line: line, Msg: "not valid YAML: " + m[2]}
	}
	return &FieldError{Msg: "not valid YAML: " + strings.TrimPrefix(msg, "yaml: ")}
}

// maxProblemSearch bounds the files problemLine searches: it parses about
// log2(lines) prefixes, which for a file near MaxFileBytes would hold
// a reload for seconds. Real routes files are a few KiB.
const maxProblemSearch = 1 << 20

// problemLine finds the line a YAML syntax problem is on. yaml reports the
// line of its context mark when it has one (where the enclosing block or
// flow began, counted from 0), which for an indentation mistake on line 4
// of a list that starts on line 2 is "line 1"; the problem's own mark is
// not exported. The parser stops at the first problem, so the shortest
// prefix of whole lines that fails with the same problem ends on the line
// where the parser met it; the search starts at the reported line, which
// is never after it. from is that line; the result is 1-based.
func problemLine(b []byte, from int, problem string) int {
	var ends []int // ends[i] is the offset just after line i+1
	for i, c := range b {
		if c == '\n' {
			ends = append(ends, i+1)
		}
	}
	if len(ends) == 0 || ends[len(ends)-1] != len(b) {
		ends = append(ends, len(b))
	}
	fails := func(lines int) bool {
		var n yaml.Node
		err := yaml.NewDecoder(bytes.NewReader(b[:ends[lines-1]])).Decode(&n)
		if err == nil {
			return false
		}
		m := yamlSyntaxLine.FindStringSubmatch(err.Error())
		return m != nil && m[2] == problem
	}
	lo, hi := max(from, 1), len(ends)
	if lo > hi || !fails(hi) {
		return from
	}
	for lo < hi { // the shortest failing prefix within [lo, hi]
		mid := lo + (hi-lo)/2
		if fails(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// varUse is one ${VAR} reference met while expanding a value.
type varUse struct {
	Name      string
	Set       bool // the variable exists in the environment
	Empty     bool // it exists but is empty
	Defaulted bool // ${VAR:-default} fell back to its default
}

// expansion records where an expanded value came from, so an error about
// the value can name the variable that made it so.
type expansion struct {
	vars []varUse
}

// origin renders " (it comes from ${X}, which is not set)" for a value that
// had references, or "" for a literal one.
func (x expansion) origin() string {
	if len(x.vars) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(" (it comes from ")
	for i, u := range x.vars {
		ref := "${" + u.Name + "}"
		state := ""
		switch {
		case !u.Set:
			state = ", which is not set"
		case u.Empty:
			state = ", which is empty"
		}
		if u.Defaulted {
			ref = "the default of " + ref
		}
		if i > 0 {
			b.WriteString(" and ")
		}
		b.WriteString(ref + state)
		if state != "" && i < len(x.vars)-1 {
			b.WriteString(",") // "${A}, which is not set, and ${B}"
		}
	}
	b.WriteString(")")
	return b.String()
}

// secretParam matches query parameter names whose values are credentials.
var secretParam = regexp.MustCompile(`(?i)(key|token|secret|passw|pwd|sig|auth|credential|session)`)

// looksLikeKey guesses whether a URL part is a credential: the common key
// prefixes, a long mixed-case alphanumeric token, or a long hex string.
// Deployment names and dates (lower case, dashes) stay readable.
func looksLikeKey(s string) bool {
	if len(s) >= 8 && (strings.HasPrefix(s, "sk-") || strings.HasPrefix(s, "sk_")) {
		return true
	}
	var upper, lower, digit, hex, other int
	for _, r := range s {
		switch {
		case r >= 'A' && r <= 'Z':
			upper++
		case r >= 'a' && r <= 'z':
			lower++
		case r >= '0' && r <= '9':
			digit++
		default:
			other++
		}
		if (r >= '0' && r <= '9') || (r >= 'a' && r <= 'f') || (r >= 'A' && r <= 'F') || r == '-' {
			hex++
		}
	}
	if len(s) >= 20 && upper > 0 && lower > 0 && digit > 0 {
		return true
	}
	return len(s) >= 32 && hex == len(s) && digit > 0
}

const redactedPart = "REDACTED"

// RedactURL returns raw fit to show in an error or in check-config: the userinfo password,
// userinfo, path segments and query or fragment values that look like keys,
// and every configured key wherever it occurs are replaced. It works on the
// text rather than url.Parse because the URL being reported may not parse.
func RedactURL(raw string, keys []string) string {
	rest := raw
	var b strings.Builder
	if i := strings.Index(rest, "://"); i >= 0 {
		b.WriteString(rest[:i+3])
		rest = rest[i+3:]
		end := strings.IndexAny(rest, "/?#")
		if end < 0 {
			end = len(rest)
		}
		authority := rest[:end]
		if at := strings.LastIndex(authority, "@"); at >= 0 {
			user, _, hasPass := strings.Cut(authority[:at], ":")
			if looksLikeKey(user) {
				user = redactedPart
			}
			b.WriteString(user)
			if hasPass {
				b.WriteString(":" + redactedPart)
			}
			b.WriteString("@")
			authority = authority[at+1:]
		}
		b.WriteString(authority)
		rest = rest[end:]
	}
	rest, fragment, hasFragment := strings.Cut(rest, "#")
	path, query, hasQuery := strings.Cut(rest, "?")
	segs := strings.Split(path, "/")
	for i, s := range segs {
		if looksLikeKey(s) {
			segs[i] = redactedPart
		}
	}
	b.WriteString(strings.Join(segs, "/"))
	if hasQuery {
		pairs := strings.Split(query, "&")
		for i, p := range pairs {
			name, value, hasValue := strings.Cut(p, "=")
			switch {
			case hasValue && (secretParam.MatchString(name) || looksLikeKey(value)):
				pairs[i] = name + "=" + redactedPart
			case !hasValue && looksLikeKey(name):
				pairs[i] = redactedPart
			}
		}
		b.WriteString("?" + strings.Join(pairs, "&"))
	}
	if hasFragment {
		if looksLikeKey(fragment) || strings.Contains(fragment, "=") {
			fragment = redactedPart
		}
		b.WriteString("#" + fragment)
	}
	out := b.String()
	for _, k := range keys {
		out = strings.ReplaceAll(out, k, redactedPart)
	}
	return out
}
