package routes

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// FieldError is a mistake at one place of the routes file. It matches
// ErrInvalid with errors.Is; errors.As gives the path and line.
type FieldError struct {
	Path string // YAML path, e.g. providers[0].base_url; "" for the file as a whole
	Line int    // 1-based line in the file; 0 when the path is not written in it
	Msg  string // starts with Path; never holds a key
}

// ErrInvalid marks every validation failure of the routes file.
var ErrInvalid = errors.New("invalid routes")

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
