package secret

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// Sentinel keys in the shapes of several vendors' keys (none is real).
const (
	keyOpenAI     = "sk-proj-SeNtInEl0penAi1234567890abcdefghijklmnopqrstuvWXYZ"
	keyAnthropic  = "sk-ant-api03-SeNtInElAnthr0pic1234567890abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRS-0123456AA"
	keyGroq       = "gsk_SeNtInElGr0q1234567890abcdefghijklmnopqrstuvwxyzAB"
	keyXAI        = "xai-SeNtInElxA11234567890abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ01"
	keyPerplexity = "pplx-SeNtInElPp1x1234567890abcdefghijklmnopqrstuv"
	keyHex32      = "5e17e1a0c0ffee00d15ea5e0ba5eba11"
	keyHex64      = "5e17e1a0c0ffee00d15ea5e0ba5eba11deadbeefcafef00d0123456789abcdef"
	keyGoogle     = "AIzaSeNtInElG00gle1234567890abcdefgh"
)

var sentinels = []string{keyOpenAI, keyAnthropic, keyGroq, keyXAI, keyPerplexity, keyHex32, keyHex64, keyGoogle}

// leaks reports the sentinels, or 8-byte heads or tails of them, in s.
func leaks(s string, values ...string) []string {
	var out []string
	for _, v := range values {
		for _, part := range []string{v, v[:EchoLen], v[len(v)-EchoLen:]} {
			if strings.Contains(s, part) {
				out = append(out, part)
			}
		}
	}
	return out
}

// TestRedactorEchoes protects the by-value contract: whatever form a
// provider echoes a configured key in (whole, cut, half-masked, inside
// JSON), no 8 bytes of its head or tail survive; text without one is left
// as it is.
func TestRedactorEchoes(t *testing.T) {
	r := NewRedactor(sentinels...)
	for _, k := range sentinels {
		head, tail := k[:12], k[len(k)-4:]
		tests := []struct{ name, in, want string }{
			{"whole", "Incorrect API key provided: " + k + ".", "Incorrect API key provided: [REDACTED]."},
			{"json", `{"error":{"message":"invalid key ` + k + `"}}`, `{"error":{"message":"invalid key [REDACTED]"}}`},
			{"prefix", "key " + k[:10] + " is invalid", "key [REDACTED] is invalid"},
			{"suffix", "key ending " + k[len(k)-9:] + " revoked", "key ending [REDACTED] revoked"},
			{"masked", "Incorrect API key provided: " + head + "****" + tail + ". See docs", "Incorrect API key provided: [REDACTED]. See docs"},
			{"masked dots", "key " + head + "..." + tail, "key [REDACTED]"},
			{"masked ellipsis", "key " + head + "…" + tail, "key [REDACTED]"},
			{"masked tail", "key ****" + k[len(k)-10:], "key ****[REDACTED]"},
			{"head and tail", k[:8] + "...." + k[len(k)-8:], "[REDACTED]"},
			{"twice", k + " " + k, "[REDACTED] [REDACTED]"},
			{"glued", "x" + k + "y", "x[REDACTED]y"},
			{"cut at the end", "body: " + k[:len(k)-3], "body: [REDACTED]"},
		}
		for _, tt := range tests {
			got := r.Redact(tt.in)
			if got != tt.want {
				t.Errorf("%s/%s: Redact(%q) = %q, want %q", k[:4], tt.name, tt.in, got, tt.want)
			}
			if l := leaks(got, sentinels...); l != nil {
				t.Errorf("%s/%s: %q still holds %q", k[:4], tt.name, got, l)
			}
			if b := r.RedactBytes([]byte(tt.in)); string(b) != tt.want {
				t.Errorf("%s/%s: RedactBytes = %q, want %q", k[:4], tt.name, b, tt.want)
			}
		}
	}
}

// TestRedactorKeepsText protects the other side: ordinary text, short
// values and 7-byte fragments of a key are not touched, and nothing is
// copied when nothing is found.
func TestRedactorKeepsText(t *testing.T) {
	r := NewRedactor(append([]string{"short", ""}, sentinels...)...)
	for _, s := range []string{
		"", "short", "a short message", "the upstream stream was interrupted",
		`{"error":{"message":"Rate limit reached for gpt-4o-mini","type":"rate_limit_error"}}`,
		"gsk_ is a Groq key prefix", "5e17e1a", keyGroq[:7] + " " + keyGroq[len(keyGroq)-7:],
		"request 0193b2c4-5e17-7e1a-8c0f-fee00d15ea5e failed",
	} {
		if got := r.Redact(s); got != s {
			t.Errorf("Redact(%q) = %q, want it unchanged", s, got)
		}
	}
	b := []byte("nothing to see here, nothing at all")
	if got := r.RedactBytes(b); &got[0] != &b[0] {
		t.Error("RedactBytes copied a clean slice")
	}
	var none *Redactor
	if got := none.Redact(keyGroq); got != keyGroq {
		t.Errorf("nil Redactor changed %q", got)
	}
	if got := NewRedactor().Redact(keyGroq); got != keyGroq {
		t.Errorf("empty Redactor changed %q", got)
	}
}

// TestRedactorOverlapping protects keys that share a head (one key a
// prefix of another, two keys of one account): the longest echo wins and
// no fragment of either is left.
func TestRedactorOverlapping(t *testing.T) {
	a := "gsk_SAMEHEAD0123456789"
	b := a + "EXTENDEDabcdefgh"
	r := NewRedactor(a, b)
	for in, want := range map[string]string{
		"k=" + b + ";":      "k=[REDACTED];",
		"k=" + a + ";":      "k=[REDACTED];",
		"k=" + a + b + ";":  "k=[REDACTED];",
		"k=" + b[:12] + "…": "k=[REDACTED]…",
	} {
		if got := r.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRedactorEncodedForms protects byte-level scans of encoded answers
// (JSON, quoted log values, URLs): a secret with characters these escape
// is still found there.
func TestRedactorEncodedForms(t *testing.T) {
	pw := `p@ss"w<o>rd/with&more`
	r := NewRedactor(pw)
	j, _ := json.Marshal(map[string]string{"m": "db said " + pw})
	for _, in := range []string{string(j), "postgres://u:p%40ss%22w%3Co%3Erd%2Fwith&more@host/db", `msg="db said p@ss\"w<o>rd/with&more"`} {
		if got := r.Redact(in); strings.Contains(got, "w<o>rd") || strings.Contains(got, "w\\u003co") || strings.Contains(got, "%3Co%3Erd") {
			t.Errorf("Redact(%q) = %q, the password is still there", in, got)
		}
	}
}

// TestRedactorSwap protects reloads: Set replaces the values at once.
func TestRedactorSwap(t *testing.T) {
	r := NewRedactor(keyGroq)
	r.Set(keyXAI)
	if got := r.Redact(keyXAI); got != Marker {
		t.Errorf("new value not redacted: %q", got)
	}
	if got := r.Redact(keyGroq); got != keyGroq {
		t.Errorf("Set kept the old value: %q", got)
	}
}

// TestLogHandlerRedacts protects the logs: no line holds a known value,
// whether in the message, a string, an error, a group or a bound
// attribute, and a clean line is passed on unchanged.
func TestLogHandlerRedacts(t *testing.T) {
	var buf bytes.Buffer
	r := NewRedactor(sentinels...)
	log := slog.New(NewLogHandler(slog.NewJSONHandler(&buf, nil), r)).With("bound", "k="+keyHex32)
	log.Info("provider said "+keyGroq, "body", `{"error":"bad key `+keyXAI+`"}`,
		"err", errors.New("upstream: "+keyPerplexity), "raw", []byte(keyAnthropic),
		slog.Group("g", "inner", keyGoogle, "n", 3), "s", struct{ K string }{keyOpenAI}, "count", 7)
	out := buf.String()
	if l := leaks(out, sentinels...); l != nil {
		t.Fatalf("log line holds %q:\n%s", l, out)
	}
	for _, want := range []string{`"count":7`, `"n":3`, `"bound":"k=[REDACTED]"`, `"msg":"provider said [REDACTED]"`} {
		if !strings.Contains(out, want) {
			t.Errorf("log line lacks %s:\n%s", want, out)
		}
	}
	buf.Reset()
	slog.New(NewLogHandler(slog.NewJSONHandler(&buf, nil), r)).Info("clean", "a", "b", "err", errors.New("x"))
	if !strings.Contains(buf.String(), `"msg":"clean","a":"b","err":"x"`) {
		t.Errorf("clean line changed: %s", buf.String())
	}
}

// FuzzRedact: whatever the text around it, a value embedded in it never
// survives, and Redact never panics.
func FuzzRedact(f *testing.F) {
	for _, s := range []string{"", "a", "****", "…", keyGroq[:9], "x" + keyGroq[:8] + "*" + keyGroq[len(keyGroq)-1:]} {
		f.Add(s, s)
	}
	r := NewRedactor(sentinels...)
	f.Fuzz(func(t *testing.T, before, after string) {
		for _, k := range sentinels[:3] {
			got := r.Redact(before + k + after)
			if strings.Contains(got, k) {
				t.Fatalf("Redact kept %q in %q", k, got)
			}
		}
		_ = r.Redact(before + after)
	})
}

// BenchmarkRedact measures the scan of a provider's 1 KiB error body with
// no key in it, against 40 known values: the cost every failed attempt's
// record pays.
func BenchmarkRedact(b *testing.B) {
	var values []string
	for i := range 5 {
		for _, k := range sentinels {
			values = append(values, k[:len(k)-1]+string(rune('a'+i)))
		}
	}
	r := NewRedactor(values...)
	msg := strings.Repeat(`{"error":{"message":"The server had an error processing your request.","type":"server_error"}} `, 11)[:1024]
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if r.Redact(msg) != msg {
			b.Fatal("changed")
		}
	}
}

// BenchmarkLogHandler measures what the redacting handler adds to an
// access log line (9 attributes, no secret in them) in front of a JSON
// handler: "bare" is the JSON handler alone.
func BenchmarkLogHandler(b *testing.B) {
	var values []string
	for i := range 5 {
		for _, k := range sentinels {
			values = append(values, k[:len(k)-1]+string(rune('a'+i)))
		}
	}
	r := NewRedactor(values...)
	inner := slog.NewJSONHandler(io.Discard, nil)
	for name, h := range map[string]slog.Handler{"bare": inner, "redacting": NewLogHandler(inner, r)} {
		log := slog.New(h)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				log.LogAttrs(context.Background(), slog.LevelInfo, "request",
					slog.String("request_id", "0193b2c4-5e17-7e1a-8c0f-fee00d15ea5e"), slog.String("client", "team-a"),
					slog.String("model", "gpt-4o-mini"), slog.String("route", "chat"), slog.Bool("stream", true),
					slog.String("status", "success"), slog.Int("code", 200), slog.String("error_type", ""),
					slog.Float64("duration_ms", 812.5))
			}
		})
	}
}

// holdHandler counts the holds it is given, as logsink.Handler holds lines.
type holdHandler struct {
	slog.Handler
	holds, releases int
}

func (h *holdHandler) Hold()          { h.holds++ }
func (h *holdHandler) Release() error { h.releases++; return nil }

// TestLogHandlerKeepsHold protects the access log's batched writes: the
// hold of the handler beneath stays reachable through the redacting one.
func TestLogHandlerKeepsHold(t *testing.T) {
	inner := &holdHandler{Handler: slog.NewTextHandler(io.Discard, nil)}
	h := slog.New(NewLogHandler(inner, NewRedactor(keyGroq))).Handler()
	hold, ok := h.(interface {
		Hold()
		Release() error
	})
	if !ok {
		t.Fatal("the redacting handler hides the hold")
	}
	hold.Hold()
	_ = hold.Release()
	if inner.holds != 1 || inner.releases != 1 {
		t.Fatalf("holds %d, releases %d; want 1 and 1", inner.holds, inner.releases)
	}
	NewLogHandler(slog.NewTextHandler(io.Discard, nil), nil).Hold() // no hold beneath: nothing to do
}
