package report

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/llmgw/gateway/internal/secret"
)

// TestOriginOf protects the "endpoint origin only" contract: no path, query,
// fragment or credential ever reaches the ledger.
func TestOriginOf(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://api.openai.com", "https://api.openai.com"},
		{"http://127.0.0.1:9001", "http://127.0.0.1:9001"},
		{"https://api.openai.com/v1/chat/completions", "https://api.openai.com"},
		{"https://x.openai.azure.com/openai/deployments/d?api-version=2024-10-21", "https://x.openai.azure.com"},
		{"https://generativelanguage.googleapis.com/v1?key=AIzaSECRET", "https://generativelanguage.googleapis.com"},
		{"https://user:s3cret@host:8443/path", "https://host:8443"},
		{"https://user:pa/ss@host/v1", "https://host"},        // unescaped '/' in a password
		{"https://user:p%zz@host/v1", "https://host"},         // unparseable escape
		{"api.example.com/v1/chat", "api.example.com"},        // no scheme
		{"tok@api.example.com:443/v1", "api.example.com:443"}, // no scheme, userinfo
		{"http://host#frag", "http://host"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := originOf(tt.in); got != tt.want {
			t.Errorf("originOf(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestCleanMessage protects the error_message contract: 1 KiB on a rune
// boundary, valid UTF-8 without NUL, and no credentials.
func TestCleanMessage(t *testing.T) {
	secrets := []string{
		"Authorization: Bearer abc.def-123_xyz",
		`{"error":"invalid key sk-proj-AbCdEf0123456789xyz"}`,
		"bad key sk-ant-api03-abcdefghijklmnop",
		"header x-api-key: 0123456789abcdef0123",
		"GET https://host/v1?key=AIzaSyA-0123456789abcdefghijklmnopqrs&alt=json",
		"connect https://admin:hunter2hunter2@db.internal:5432 refused",
		`{"api_key": "plainsecretvalue"}`,
		"token ghp_0123456789abcdefghijABCDEFGHIJ0123 expired",
		"authorization=Basic dXNlcjpwYXNzd29yZA==",
		"Incorrect API key provided: sk-abc123********************xyz9. You can find it at https://platform.openai.com/account/api-keys.",
	}
	leaks := []string{"abc.def-123_xyz", "AbCdEf0123456789xyz", "abcdefghijklmnop", "0123456789abcdef0123",
		"AIzaSyA-0123456789", "hunter2hunter2", "plainsecretvalue", "ghp_0123456789", "dXNlcjpwYXNzd29yZA", "xyz9"}
	for i, s := range secrets {
		got := cleanMessage(s, nil)
		if strings.Contains(got, leaks[i]) {
			t.Errorf("cleanMessage(%q) = %q, still contains %q", s, got, leaks[i])
		}
		if !strings.Contains(got, "REDACTED") {
			t.Errorf("cleanMessage(%q) = %q, want a [REDACTED] marker", s, got)
		}
	}
	// Ordinary messages survive untouched.
	for _, s := range []string{"upstream returned 503 Service Unavailable", "Stream first byte timeout",
		"dial tcp 127.0.0.1:9001: connect: connection refused", "task-queue overloaded, risk-free retry"} {
		if got := cleanMessage(s, nil); got != s {
			t.Errorf("cleanMessage(%q) = %q, want it unchanged", s, got)
		}
	}

	long := strings.Repeat("é", 2000) // 2 bytes per rune: the cut must not split one
	got := cleanMessage(long, nil)
	if len(got) > maxMessageBytes || !utf8.ValidString(got) || len(got) < maxMessageBytes-1 {
		t.Errorf("long message: %d bytes, valid UTF-8 %v; want <= %d, valid", len(got), utf8.ValidString(got), maxMessageBytes)
	}
	dirty := "a\x00b\xffc"
	if got := cleanMessage(dirty, nil); strings.ContainsRune(got, 0) || !utf8.ValidString(got) || !strings.HasPrefix(got, "a") {
		t.Errorf("cleanMessage(%q) = %q, want NUL and invalid bytes replaced", dirty, got)
	}
	// A token straddling the 1 KiB cut is redacted before the cut.
	straddle := strings.Repeat("x ", 505) + "sk-" + strings.Repeat("A", 40)
	if got := cleanMessage(straddle, nil); strings.Contains(got, "sk-AAAA") {
		t.Errorf("token at the cut leaked: %q", got[len(got)-20:])
	}
}

// TestCleanTextNoAllocForCleanInput keeps the common path cheap.
func TestCleanTextNoAllocForCleanInput(t *testing.T) {
	s := "gpt-4o-mini"
	if n := testing.AllocsPerRun(100, func() { _ = cleanText(s, maxFieldBytes) }); n != 0 {
		t.Errorf("cleanText allocates %v times for a clean string, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = originOf("https://api.openai.com") }); n != 0 {
		t.Errorf("originOf allocates %v times for an origin, want 0", n)
	}
}

// TestSanitizeRejects: records that Postgres would refuse are rejected before
// they can poison a batch.
func TestSanitizeRejects(t *testing.T) {
	now := baseTime
	good := Candidate{RequestID: uuid.New(), Status: CandidatePending}
	tests := []struct {
		name string
		mod  func(*Candidate)
	}{
		{"unknown status", func(c *Candidate) { c.Status = "exploded" }},
		{"nil request id", func(c *Candidate) { c.RequestID = uuid.Nil }},
		{"negative index", func(c *Candidate) { c.Index = -1 }},
		{"huge retry index", func(c *Candidate) { c.RetryIndex = 1 << 40 }},
	}
	for _, tt := range tests {
		c := good
		tt.mod(&c)
		if reject := sanitizeCandidate(&c, now, nil); reject == "" {
			t.Errorf("%s: accepted, want rejected", tt.name)
		}
	}
	c := good
	if reject := sanitizeCandidate(&c, now, nil); reject != "" || !c.CreatedAt.Equal(now) {
		t.Errorf("good record: reject %q, CreatedAt %v; want accepted with CreatedAt defaulted", reject, c.CreatedAt)
	}
	r := Request{ID: uuid.New(), Status: "weird"}
	if reject := sanitizeRequest(&r, now, nil); reject == "" {
		t.Error("request with unknown status accepted")
	}
}

// TestSanitizedRecordsInsert protects the promise that no record can fail an
// insert: NUL bytes, invalid UTF-8, huge messages, secrets and a URL with path
// and credentials all go through Postgres and come back cleaned.
func TestSanitizedRecordsInsert(t *testing.T) {
	dsn := migratedURL(t)
	w, _ := newTestWriter(t, dsn, func(o *Options) { o.AutoMigrate = true })
	w.Start(context.Background())
	id := uuid.New()
	w.RecordCandidate(Candidate{
		RequestID: id, Status: CandidateFailed, StatusCode: 1 << 40, // out of int range: stored NULL
		Provider:     "prov\x00ider",
		Endpoint:     "https://user:hunter2@api.example.com:8443/v1/chat?api-version=1",
		KeyID:        "sk-live-0123456789abcdefghij",
		Model:        "m\xff\xfe",
		ErrorType:    ErrorTypeUpstreamHTTP,
		ErrorMessage: "Bearer abcdefghijklmnop rejected \x00 \xc3" + strings.Repeat("z", 5000),
	})
	w.RecordRequest(Request{ID: id, Status: RequestFailed, Client: "c\x00", ClientRequestID: "r\xff"})
	waitFor(t, "rows written", 10*time.Second, func() bool { return w.Stats().Written == 2 })

	got, ok := readCandidate(t, dsn, candidateKey{requestID: id})
	if !ok {
		t.Fatal("candidate row missing")
	}
	if got.Endpoint != "https://api.example.com:8443" {
		t.Errorf("endpoint = %q, want the origin only", got.Endpoint)
	}
	if strings.Contains(got.KeyID, "0123456789abcdefghij") {
		t.Errorf("key_id = %q, still holds the key", got.KeyID)
	}
	if got.StatusCode != nil {
		t.Errorf("status_code = %d, want NULL for an out-of-range value", *got.StatusCode)
	}
	msg := *got.ErrorMessage
	if len(msg) > maxMessageBytes || strings.Contains(msg, "abcdefghijklmnop") || strings.ContainsRune(msg, 0) {
		t.Errorf("error_message (%d bytes) not cleaned: %.80q", len(msg), msg)
	}
	if strings.ContainsRune(got.Provider, 0) {
		t.Errorf("provider = %q, want NUL replaced", got.Provider)
	}
}

// TestSecretTriggersCoverPatterns keeps the cheap pre-filter honest: every
// string a pattern would redact contains a trigger.
func TestSecretTriggersCoverPatterns(t *testing.T) {
	samples := []string{
		"AUTHORIZATION: xyz", "BeArEr abcdef", "API-KEY=abc", "Access_Token: x", "refresh-token=x",
		"client_secret=x", "PASSWORD: x", "?sig=abc", "&signature=x", "sk-abcdefgh", "sk_live_abcdefgh",
		"rk-abcdefgh", "pk_abcdefgh", "AIzaSyA0123456789abcdefghij", "ghp_0123456789abcdefghij", "gho_0123456789abcdefghijk",
		"http://u:p@h",
	}
	for _, s := range samples {
		if redactSecrets(s) == s {
			t.Errorf("%q not redacted", s)
		}
		if !mayHoldSecret(s) {
			t.Errorf("%q has no trigger but matches a pattern", s)
		}
	}
	if mayHoldSecret("primary#0") {
		t.Error("an ordinary key label trips the filter")
	}
}

func TestIsFingerprintLabel(t *testing.T) {
	for in, want := range map[string]bool{
		"key0-5085f53e": true, "key12-00000000": true, "key0-5085F53E": false, "key-5085f53e": false,
		"key0-5085f53": false, "key0-5085f53ee": false, "sk-5085f53e": false, "key0-sk-abcdef": false, "": false,
	} {
		if got := isFingerprintLabel(in); got != want {
			t.Errorf("isFingerprintLabel(%q) = %v, want %v", in, got, want)
		}
	}
}

// TestSanitizeRedactsKnownKeys protects the ledger from keys the shape
// rules do not know (Groq, xAI, Perplexity, hex): the writer's Redactor
// removes every configured key by value, whole or echoed in part, from
// error_message and from every other text column, before a record is
// written or spooled.
func TestSanitizeRedactsKnownKeys(t *testing.T) {
	keys := []string{
		"gsk_TestGr0qKey1234567890abcdefghijklmnopqrstuvwxyzAB",
		"xai-TestxAIKey1234567890abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ01",
		"pplx-TestPp1xKey1234567890abcdefghijklmnopqrstuv",
		"0123456789abcdef0123456789abcdef",
		"0123456789abcdef0123456789abcdef0123456789abcdeffedcba9876543210",
	}
	red := secret.NewRedactor(keys...)
	now := time.Now()
	for _, k := range keys {
		c := Candidate{RequestID: uuid.New(), Status: CandidateFailed, KeyID: "label " + k,
			Model: "m-" + k[:10], ErrorMessage: `{"error":{"message":"Incorrect API key provided: ` + k[:12] + "****" + k[len(k)-4:] +
				`"}} and later ` + k}
		r := Request{ID: uuid.New(), Status: RequestFailed, ClientRequestID: k}
		if reject := sanitizeCandidate(&c, now, red); reject != "" {
			t.Fatal(reject)
		}
		if reject := sanitizeRequest(&r, now, red); reject != "" {
			t.Fatal(reject)
		}
		for _, got := range []string{c.ErrorMessage, c.KeyID, c.Model, r.ClientRequestID} {
			for _, part := range []string{k[:8], k[len(k)-8:]} {
				if strings.Contains(got, part) {
					t.Errorf("stored %q still holds %q of key %s…", got, part, k[:4])
				}
			}
		}
		if !strings.Contains(c.ErrorMessage, "Incorrect API key provided: [REDACTED]") {
			t.Errorf("error_message = %q, want the echo replaced by [REDACTED]", c.ErrorMessage)
		}
	}
}
