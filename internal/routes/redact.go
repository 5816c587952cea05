package routes

import (
	"regexp"
	"strings"
)

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
