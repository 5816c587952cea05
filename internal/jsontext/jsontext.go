// Package jsontext writes JSON string literals by appending to a byte slice,
// without reflection or allocation: the translators and the mock upstream
// build their events this way, once per stream event. It escapes what
// encoding/json escapes except the HTML characters (the output is not HTML).
//
// It also finds where a JSON value ends without decoding it (scan.go), and
// validates a document exactly as encoding/json.Valid does, several times
// faster (valid.go): both run on every request body before the upstream
// request is sent. It decodes nothing; the packages that read bodies decide
// what their values mean.
package jsontext

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string literal, quotes included.
func AppendString[S ~string | ~[]byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	dst = AppendEscaped(dst, s)
	return append(dst, '"')
}

// AppendEscaped appends the inside of s's JSON string literal: quote,
// backslash and control characters escaped, invalid UTF-8 written as U+FFFD
// (so the output is valid UTF-8 whatever the input), and U+2028 and U+2029
// escaped as encoding/json does, for clients that evaluate JSON as
// JavaScript. strconv.AppendQuote is no substitute: its \x and \U escapes
// are not JSON.
func AppendEscaped[S ~string | ~[]byte](dst []byte, s S) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(dst, s[start:]...)
}
