package report

import (
	"math"
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/llmgw/gateway/internal/secret"
)

const (
	// maxMessageBytes bounds error_message: enough for an upstream's error summary,
	// small enough that a provider dumping a whole HTML page does not bloat the ledger.
	maxMessageBytes = 1024
	// maxFieldBytes bounds every other text column. None of them is legitimately
	// this long; the bound keeps one spool record far below maxSpoolRecord.
	maxFieldBytes = 1024
	// redactWindow is how much of a message is scanned for secrets. It is larger
	// than maxMessageBytes so that a token straddling the final cut is still
	// recognised as a whole, and small enough that a huge message costs little.
	redactWindow = 4 * maxMessageBytes
)

// secretPatterns match what looks like a credential in free text. Upstream error
// bodies sometimes echo the request's Authorization header or a key in a URL; the
// ledger is read by operators who must never see a key through it. False positives
// (an English word after "Bearer") are an acceptable price.
var secretPatterns = []struct {
	re   *regexp.Regexp
	repl string
}{
	// "Authorization: Bearer xxx", "authorization=xxx", JSON "authorization":"xxx".
	{regexp.MustCompile(`(?i)(authorization["']?\s*[:=]\s*["']?)(?:(?:bearer|basic|token)\s+)?[^\s"'&,;]+`), "${1}[REDACTED]"},
	{regexp.MustCompile(`(?i)\bbearer\s+[A-Za-z0-9._~+/=-]+`), "Bearer [REDACTED]"},
	// "api_key: xxx", "x-api-key=xxx", "access_token=xxx", "password: xxx".
	{regexp.MustCompile(`(?i)((?:api[_-]?key|access[_-]?token|refresh[_-]?token|client[_-]?secret|secret|password)["']?\s*[:=]\s*["']?)[^\s"'&,;]+`), "${1}[REDACTED]"},
	// Keys in query strings (Google style ?key=..., SAS signatures).
	{regexp.MustCompile(`(?i)([?&](?:key|token|sig|signature)=)[^&\s"']+`), "${1}[REDACTED]"},
	// Well-known key shapes: OpenAI/Anthropic "sk-...", Stripe-like "sk_live_...",
	// Google "AIza...", GitHub "ghp_...". '*' is included because providers echo
	// keys half-masked ("sk-abc123****xyz9"), which still fingerprints the key.
	{regexp.MustCompile(`\b(sk|rk|pk)[-_][A-Za-z0-9_*-]{6,}`), "${1}-[REDACTED]"},
	{regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{20,}`), "[REDACTED]"},
	{regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{20,}`), "[REDACTED]"},
	// Credentials in a URL's userinfo.
	{regexp.MustCompile(`(://)[^/\s@]+@`), "${1}[REDACTED]@"},
}

// secretTriggers are substrings (compared ASCII case-insensitively) of which
// every secretPatterns match contains at least one. Most strings contain none,
// and checking for them is far cheaper than running the regexps: without this
// filter redaction was 60% of the writer's CPU time.
var secretTriggers = []string{
	"authorization", "bearer", "key", "token", "secret", "password", "sig",
	"sk-", "sk_", "rk-", "rk_", "pk-", "pk_", "aiza", "gh", "://",
}

// redactSecrets replaces anything that looks like a credential.
func redactSecrets(s string) string {
	if !mayHoldSecret(s) {
		return s
	}
	for _, p := range secretPatterns {
		s = p.re.ReplaceAllString(s, p.repl)
	}
	return s
}

// isFingerprintLabel reports whether s has the planner's key id shape,
// "key<index>-<8 hex>", which cannot hold a credential. The shape contains
// the trigger "key", so without this check every candidate record ran all the
// redaction regexps (a third of the gateway's allocations under load).
func isFingerprintLabel(s string) bool {
	rest, ok := strings.CutPrefix(s, "key")
	if !ok {
		return false
	}
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	if i == 0 || i > 4 || len(rest) != i+1+8 || rest[i] != '-' {
		return false
	}
	for _, c := range rest[i+1:] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func mayHoldSecret(s string) bool {
	for _, t := range secretTriggers {
		if containsFoldASCII(s, t) {
			return true
		}
	}
	return false
}

// containsFoldASCII reports whether s contains the lower-case ASCII string sub,
// ignoring ASCII case in s, without allocating.
func containsFoldASCII(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		j := 0
		for ; j < len(sub); j++ {
			c := s[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != sub[j] {
				break
			}
		}
		if j == len(sub) {
			return true
		}
	}
	return false
}

// cleanText makes s safe for a Postgres text column: valid UTF-8 (Postgres rejects
// invalid sequences with an error that would fail the whole batch), no NUL bytes
// (which text cannot hold at all), and at most max bytes, cut on a rune boundary.
// The common case, an already clean short string, returns s without allocating.
func cleanText(s string, max int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	}
	return truncateUTF8(s, max)
}

// truncateUTF8 cuts a valid UTF-8 string to at most max bytes without splitting a
// rune.
func truncateUTF8(s string, max int) string {
	if len(s) <= max {
		return s
	}
	i := max
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}

// cleanMessage prepares an error message for storage: clean, redacted, 1 KiB.
// The known secrets go first, by value (red; nil for none), then whatever
// else looks like a credential (the shape rules, a second net for keys the
// gateway was never told: a client's, another account's).
func cleanMessage(s string, red *secret.Redactor) string {
	if s == "" {
		return s
	}
	s = cleanText(s, redactWindow)
	s = red.Redact(s)
	s = redactSecrets(s)
	return truncateUTF8(s, maxMessageBytes)
}

// cleanField is cleanText for the other text columns, with the known
// secrets removed: none of them should hold one, but a client's request id
// or a misconfigured label is text the gateway does not control. The scan
// skips strings shorter than a key's echo at once.
func cleanField(s string, red *secret.Redactor) string {
	s = cleanText(s, maxFieldBytes)
	if r := red.Redact(s); r != s {
		// A cut echo of a non-ASCII secret may leave half a rune.
		s = cleanText(r, maxFieldBytes)
	}
	return s
}

// originOf reduces an endpoint to scheme://host[:port]. The gateway is expected
// to pass an origin already; this is the writer's own defence so that a path,
// a query (Azure api-version, a ?key=) or userinfo never reaches the ledger.
func originOf(s string) string {
	if s == "" {
		return s
	}
	if i := strings.Index(s, "://"); i > 0 && !strings.ContainsAny(s[i+3:], "/?#@") {
		return s // already an origin
	}
	if u, err := url.Parse(s); err == nil && u.Scheme != "" && u.Host != "" {
		return u.Scheme + "://" + u.Host
	}
	// Not a parseable absolute URL. Strip conservatively: everything up to the last
	// '@' may be credentials (a password may even contain '/'), and everything
	// from the first '/', '?' or '#' after the host is path or query.
	scheme := ""
	if i := strings.Index(s, "://"); i >= 0 {
		scheme, s = s[:i+3], s[i+3:]
	}
	if at := strings.LastIndexByte(s, '@'); at >= 0 {
		s = s[at+1:]
	}
	if end := strings.IndexAny(s, "/?#"); end >= 0 {
		s = s[:end]
	}
	return scheme + s
}

// nonNegative maps negative durations (clock steps, bugs) to zero, which is stored
// as NULL rather than as a nonsensical negative latency.
func nonNegative(d time.Duration) time.Duration {
	return max(d, 0)
}

// fitsInt32 reports whether v fits a Postgres integer column; a value that does
// not would fail the whole batch with "out of range".
func fitsInt32(v int) bool {
	return v >= math.MinInt32 && v <= math.MaxInt32
}

// sanitizeCandidate cleans c in place and reports why it cannot be stored at all
// ("" when it can). now fills a missing CreatedAt; red holds the secrets the
// gateway knows (nil: none).
func sanitizeCandidate(c *Candidate, now time.Time, red *secret.Redactor) (reject string) {
	if _, ok := candidateRank[c.Status]; !ok {
		return "unknown candidate status"
	}
	if c.RequestID == uuid.Nil {
		return "nil request id"
	}
	if c.Index < 0 || c.RetryIndex < 0 || !fitsInt32(c.Index) || !fitsInt32(c.RetryIndex) {
		return "candidate index out of range"
	}
	c.Provider = cleanField(c.Provider, red)
	c.Endpoint = cleanField(originOf(c.Endpoint), red)
	if c.KeyID != "" && !isFingerprintLabel(c.KeyID) {
		// A key id is meant to be a label or fingerprint; redact in case a caller
		// passed the key itself.
		c.KeyID = cleanText(redactSecrets(cleanField(c.KeyID, red)), maxFieldBytes)
	}
	c.Model = cleanField(c.Model, red)
	c.SkipReason = cleanField(c.SkipReason, red)
	c.ErrorType = cleanField(c.ErrorType, red)
	c.ErrorMessage = cleanMessage(c.ErrorMessage, red)
	if !fitsInt32(c.StatusCode) || c.StatusCode < 0 {
		c.StatusCode = 0
	}
	c.Latency = nonNegative(c.Latency)
	c.FirstByte = nonNegative(c.FirstByte)
	if c.CreatedAt.IsZero() {
		c.CreatedAt = now
	}
	c.HasCost, c.CostUSD = cleanCost(c.HasCost, c.CostUSD)
	return ""
}

// maxCostUSD bounds a stored cost: no single request costs a billion
// dollars; a larger figure is a bug or a hostile usage, stored as unknown.
const maxCostUSD = 1e9

// cleanCost keeps a cost only when it is a finite amount from 0 to
// maxCostUSD; anything else is stored as unknown (NULL).
func cleanCost(has bool, usd float64) (bool, float64) {
	if !has || math.IsNaN(usd) || usd < 0 || usd > maxCostUSD {
		return false, 0
	}
	return true, usd
}

// sanitizeRequest is sanitizeCandidate for requests.
func sanitizeRequest(r *Request, now time.Time, red *secret.Redactor) (reject string) {
	if _, ok := requestRank[r.Status]; !ok {
		return "unknown request status"
	}
	if r.ID == uuid.Nil {
		return "nil request id"
	}
	r.ClientRequestID = cleanField(r.ClientRequestID, red)
	r.Model = cleanField(r.Model, red)
	r.Replica = cleanField(r.Replica, red)
	r.Client = cleanField(r.Client, red)
	r.Team = cleanField(r.Team, red)
	r.Priority = cleanField(r.Priority, red)
	r.ErrorType = cleanField(r.ErrorType, red)
	if !fitsInt32(r.StatusCode) || r.StatusCode < 0 {
		r.StatusCode = 0
	}
	if !fitsInt32(r.CandidateCount) || r.CandidateCount < 0 {
		r.CandidateCount = 0
	}
	r.Latency = nonNegative(r.Latency)
	r.FirstByte = nonNegative(r.FirstByte)
	if r.CreatedAt.IsZero() {
		r.CreatedAt = now
	}
	r.HasCost, r.CostUSD = cleanCost(r.HasCost, r.CostUSD)
	r.HasSaved, r.SavedUSD = cleanCost(r.HasSaved, r.SavedUSD)
	switch r.Cache {
	case "", CacheHit, CacheMiss, CacheBypass:
	default:
		r.Cache = "" // a value the column does not know is no result
	}
	return ""
}

// sanitize cleans rec in place; see sanitizeCandidate.
func (rec *record) sanitize(now time.Time, red *secret.Redactor) (reject string) {
	switch rec.kind {
	case kindRequest:
		return sanitizeRequest(&rec.req, now, red)
	case kindCandidate:
		return sanitizeCandidate(&rec.cand, now, red)
	default:
		return "unknown record kind"
	}
}
