package keys

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

func TestNewSecretShapeAndHint(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		s, err := NewSecret()
		if err != nil {
			t.Fatal(err)
		}
		body, ok := strings.CutPrefix(s, SecretPrefix)
		if !ok {
			t.Fatalf("%q lacks the prefix", s)
		}
		raw, err := base64.RawURLEncoding.DecodeString(body)
		if err != nil || len(raw) != 32 {
			t.Fatalf("%q: not 32 bytes of unpadded base64url (%d, %v)", s, len(raw), err)
		}
		if seen[s] {
			t.Fatal("a secret came twice")
		}
		seen[s] = true
		h := Hint(s)
		if !strings.HasPrefix(h, SecretPrefix+body[:4]+"…") || !strings.HasSuffix(h, body[len(body)-4:]) {
			t.Fatalf("hint %q of %q", h, s)
		}
		if strings.Contains(h, body[4:len(body)-4]) {
			t.Fatalf("hint %q holds the secret's middle", h)
		}
		if len(DigestHex(s)) != 64 {
			t.Fatal("digest hex length")
		}
	}
}

func TestAllowedGlobs(t *testing.T) {
	for _, c := range []struct {
		models []string
		model  string
		want   bool
	}{
		{nil, "anything", true},
		{[]string{}, "anything", true},
		{[]string{"gpt-4o"}, "gpt-4o", true},
		{[]string{"gpt-4o"}, "gpt-4o-mini", false},
		{[]string{"gpt-4o*"}, "gpt-4o-mini", true},
		{[]string{"gpt-4o*"}, "gpt-4", false},
		{[]string{"*"}, "x/y", true},
		{[]string{"openai/*"}, "openai/gpt-4o", true},
		{[]string{"openai/*"}, "anthropic/claude", false},
		{[]string{"*-mini"}, "gpt-4o-mini", true},
		{[]string{"a*b*c"}, "axxbyyc", true},
		{[]string{"a*b*c"}, "axxbyy", false},
		{[]string{"claude-*", "gpt-*"}, "gpt-5", true},
	} {
		if got := AllowedBy(c.models, c.model); got != c.want {
			t.Errorf("AllowedBy(%q, %q) = %v, want %v", c.models, c.model, got, c.want)
		}
	}
}

func TestSetLookupStates(t *testing.T) {
	now := time.Now()
	past, future := now.Add(-time.Minute), now.Add(time.Hour)
	mk := func(id, secret string) Key { return Key{ID: id, Name: id, Digest: Digest(secret)} }
	live := mk("live", "s-live")
	revoked := mk("revoked", "s-revoked")
	revoked.RevokedAt = &past
	expired := mk("expired", "s-expired")
	expired.ExpiresAt = &past
	rotated := mk("rotated", "s-new")
	rotated.Previous, rotated.HasPrevious, rotated.PreviousExpiresAt = Digest("s-old"), true, &future
	ended := mk("ended", "s-new2")
	ended.Previous, ended.HasPrevious, ended.PreviousExpiresAt = Digest("s-old2"), true, &past
	s := NewSet([]Key{live, revoked, expired, rotated, ended}, func(k *Key) any { return k.ID })
	for secret, want := range map[string]Status{
		"s-live": Valid, "s-revoked": Revoked, "s-expired": Expired, "s-new": Valid, "s-old": Valid,
		"s-new2": Valid, "s-old2": Expired, "nope": Unknown,
	} {
		d := Digest(secret)
		m := s.Lookup(&d, now)
		if m.Status != want {
			t.Errorf("%s: %v, want %v", secret, m.Status, want)
		}
		if want == Valid && (m.Key == nil || m.View != m.Key.ID) {
			t.Errorf("%s: match %+v without its key and view", secret, m)
		}
		if want != Valid && m.Key != nil {
			t.Errorf("%s: a refused match carries its key", secret)
		}
	}
	// with replaces one key and leaves s as it was.
	r2 := revoked
	r2.RevokedAt = nil
	s2 := s.with("revoked", &r2, nil)
	d := Digest("s-revoked")
	if s.Lookup(&d, now).Status != Revoked || s2.Lookup(&d, now).Status != Valid {
		t.Fatal("with changed the old set or did not change the new one")
	}
	if s2.Len() != s.Len() {
		t.Fatalf("len %d, want %d", s2.Len(), s.Len())
	}
}
