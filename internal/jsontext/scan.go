package jsontext

// The scanners find a JSON value's end without decoding it, so request
// bodies can be passed on untouched and events read without reflection.
// Only the structure is tracked: on valid JSON the result is the value's
// end. They also run on provider bytes that may be anything (a body cut
// inside an escape, unbalanced brackets), so on any input the result stays
// within [i, len(b)] for any i <= len(b), and callers may always slice
// b[i:result].

// SkipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// SkipValue returns the index just past the JSON value starting at b[i].
func SkipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return SkipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = SkipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	default: // number, true, false, null
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}

// SkipString returns the index just past the string whose quote is at b[i],
// or len(b) when the string is not closed. An escape's backslash skips the
// next byte, which may be past the end: the loop's i then overshoots, so the
// end is returned rather than i. Bytes that are neither a quote nor a
// backslash are skipped four at a time: a request's messages are long
// strings, and a chat request is scanned before it is sent upstream.
func SkipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		for i+4 <= len(b) && notQuoteOrEscape[b[i]] && notQuoteOrEscape[b[i+1]] &&
			notQuoteOrEscape[b[i+2]] && notQuoteOrEscape[b[i+3]] {
			i += 4
		}
		if i >= len(b) {
			break
		}
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

var notQuoteOrEscape = func() (t [256]bool) {
	for c := range t {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()
