package jsontext

// Valid reports whether b is one JSON value with optional whitespace around
// it. It accepts exactly what encoding/json.Valid accepts (FuzzValid holds
// the two to that), nesting limit included, at three to four times its
// speed: a request body is validated before the upstream request is sent,
// so for a long conversation the validation is part of the first chunk's
// wait (docs/benchmarks.md). Like encoding/json.Valid, it does not check
// that strings are UTF-8.
func Valid(b []byte) bool {
	i, ok := validValue(b, SkipSpace(b, 0), 0)
	return ok && SkipSpace(b, i) == len(b)
}

// ValidValue returns the index just past the valid JSON value starting at
// b[i], or false when there is none. depth is how many objects and arrays
// around it are already open, for the nesting limit: a caller walking a
// document's top-level object itself passes 1, and the document is valid
// exactly when encoding/json.Valid says so. It lets one pass both validate
// a request and find its members' values.
func ValidValue(b []byte, i, depth int) (int, bool) { return validValue(b, i, depth) }

// maxDepth is encoding/json's nesting limit: 10000 open objects and arrays
// are valid, one more is not.
const maxDepth = 10000

// validValue returns the index just past the valid value starting at b[i],
// inside depth open containers, or false. It walks objects and arrays with
// an explicit stack of their opening bytes, so depth costs memory, not Go
// stack.
func validValue(b []byte, i, depth int) (int, bool) {
	var buf [64]byte
	stack := buf[:0]
	var ok bool
value:
	if i >= len(b) {
		return i, false
	}
	switch c := b[i]; c {
	case '"':
		if i, ok = validString(b, i); !ok {
			return i, false
		}
	case '{', '[':
		if depth+len(stack) >= maxDepth {
			return i, false
		}
		stack = append(stack, c)
		i = SkipSpace(b, i+1)
		if i < len(b) && b[i] == c+2 { // '}' is '{'+2, ']' is '['+2
			stack = stack[:len(stack)-1]
			i++
			break
		}
		if c == '{' {
			if i, ok = validKey(b, i); !ok {
				return i, false
			}
		}
		goto value
	case 't':
		if i, ok = validLiteral(b, i, "true"); !ok {
			return i, false
		}
	case 'f':
		if i, ok = validLiteral(b, i, "false"); !ok {
			return i, false
		}
	case 'n':
		if i, ok = validLiteral(b, i, "null"); !ok {
			return i, false
		}
	default:
		if i, ok = validNumber(b, i); !ok {
			return i, false
		}
	}
	// A value ended: close containers, or go on to the next member.
	for len(stack) > 0 {
		i = SkipSpace(b, i)
		if i >= len(b) {
			return i, false
		}
		top := stack[len(stack)-1]
		switch b[i] {
		case ',':
			i = SkipSpace(b, i+1)
			if top == '{' {
				if i, ok = validKey(b, i); !ok {
					return i, false
				}
			}
			goto value
		case top + 2:
			stack = stack[:len(stack)-1]
			i++
		default:
			return i, false
		}
	}
	return i, true
}

// validKey checks an object key and its colon at b[i] and returns the index
// of the member's value (whitespace skipped).
func validKey(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return i, false
	}
	i, ok := validString(b, i)
	if !ok {
		return i, false
	}
	i = SkipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return i, false
	}
	return SkipSpace(b, i+1), true
}

// plainByte marks the string bytes that need no look: not a quote, not a
// backslash, not a control character. Bytes from 0x80 are plain, as they
// are to encoding/json.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// validString returns the index just past the valid string whose quote is
// at b[i]. Long strings (a conversation's messages) are most of a request
// body, so the plain bytes are skipped four at a time.
func validString(b []byte, i int) (int, bool) {
	i++
	for {
		for i+4 <= len(b) && plainByte[b[i]] && plainByte[b[i+1]] && plainByte[b[i+2]] && plainByte[b[i+3]] {
			i += 4
		}
		if i >= len(b) {
			return i, false
		}
		switch c := b[i]; {
		case plainByte[c]:
			i++
		case c == '"':
			return i + 1, true
		case c == '\\':
			if i+1 >= len(b) {
				return i, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return i, false
				}
				i += 6
			default:
				return i, false
			}
		default: // a control character
			return i, false
		}
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// validLiteral checks true, false or null at b[i].
func validLiteral(b []byte, i int, lit string) (int, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, false
	}
	return i + len(lit), true
}

// validNumber checks -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at b[i].
func validNumber(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = skipDigits(b, i+1)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		j := skipDigits(b, i+1)
		if j == i+1 {
			return j, false
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
			return j, false
		}
		i = j
	}
	return i, true
}

func skipDigits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}
