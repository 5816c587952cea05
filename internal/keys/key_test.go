package keys

import (
	"encoding/base64"
	"reflect"
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
		if want == Valid && (m.ID() == "" || m.Name() != m.ID() || m.View != m.ID()) {
			t.Errorf("%s: match %+v without its key and view", secret, m)
		}
		if want != Valid && (m.ID() != "" || m.View != nil || m.Models() != nil) {
			t.Errorf("%s: a refused match carries its key", secret)
		}
	}
	// with replaces one key and leaves s as it was.
	r2 := revoked
	r2.RevokedAt = nil
	s2 := s.with("revoked", &r2)
	d := Digest("s-revoked")
	if s.Lookup(&d, now).Status != Revoked || s2.Lookup(&d, now).Status != Valid {
		t.Fatal("with changed the old set or did not change the new one")
	}
	if s2.Len() != s.Len() {
		t.Fatalf("len %d, want %d", s2.Len(), s.Len())
	}
}

// A view is compiled at a key's first request, once per set; a changed
// key gets a fresh view, the others keep theirs across the change.
func TestSetViewsCompiledAtFirstUse(t *testing.T) {
	now := time.Now()
	compiled := map[string]int{}
	compile := func(k *Key) any {
		compiled[k.ID]++
		return k.ID + "/" + k.Team
	}
	a := Key{ID: "a", Name: "a", Team: "red", Digest: Digest("s-a")}
	b := Key{ID: "b", Name: "b", Team: "red", Digest: Digest("s-b")}
	s := NewSet([]Key{a, b}, compile)
	if len(compiled) != 0 {
		t.Fatalf("views compiled at load: %v", compiled)
	}
	da, db := Digest("s-a"), Digest("s-b")
	for range 3 {
		if v := s.Lookup(&da, now).View; v != "a/red" {
			t.Fatalf("view %v", v)
		}
	}
	if compiled["a"] != 1 || compiled["b"] != 0 {
		t.Fatalf("compiled %v, want a once", compiled)
	}
	b.Team = "blue"
	s2 := s.with("b", &b)
	if v := s2.Lookup(&da, now).View; v != "a/red" || compiled["a"] != 1 {
		t.Fatalf("a's view %v after another key's change, compiled %v", v, compiled)
	}
	if v := s2.Lookup(&db, now).View; v != "b/blue" {
		t.Fatalf("the changed key's view %v, want its new team", v)
	}
	if v := s.Lookup(&db, now).View; v != "b/red" {
		t.Fatalf("the old set's view %v, want the old team", v)
	}
}

// What a set keeps of a key is the key, slim: every field the request
// path, the budgets and the snapshot read comes back as it went in.
func TestSetKeepsSlimRecord(t *testing.T) {
	exp := time.Date(2027, 1, 2, 3, 4, 5, 6, time.UTC)
	rev, prevExp := exp.Add(time.Hour), exp.Add(-time.Hour)
	in := Key{ID: "0190c0de-0000-7000-8000-000000000001", Name: "search-web", Team: "search", Hint: "sk-gw-x…y",
		Models: []string{"gpt-4o*", "claude-*"}, Priority: "batch", MaxConcurrency: 3, RequestsPerMinute: 600,
		TokensPerMinute: 9000, Budget: &Budget{USD: 20.5, Per: "day"}, CostInUsage: true, ExpiresAt: &exp,
		RevokedAt: &rev, PreviousExpiresAt: &prevExp, Metadata: map[string]string{"owner": "ana"},
		Digest: Digest("s1"), Previous: Digest("s0"), HasPrevious: true}
	got := NewSet([]Key{in}, nil).Get(in.ID)
	want := in
	want.Hint, want.Metadata = "", nil
	if !reflect.DeepEqual(*got, want) {
		t.Fatalf("kept\n%+v\nwant\n%+v", *got, want)
	}
	bare := Key{ID: "b", Name: "b", Digest: Digest("s2")}
	if got := NewSet([]Key{bare}, nil).Get("b"); !reflect.DeepEqual(*got, bare) {
		t.Fatalf("kept %+v, want %+v", *got, bare)
	}
}

// TestSetLookupFarExpiry: a key that expires past 2262, where a time no
// longer fits in int64 nanoseconds (9999-12-31 is a common "never"), is
// valid, not expired in 1816; so is its rotated-out secret's end.
func TestSetLookupFarExpiry(t *testing.T) {
	never := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	k := Key{ID: "k", Name: "k", Digest: Digest("s-far"), ExpiresAt: &never,
		Previous: Digest("s-far-old"), HasPrevious: true, PreviousExpiresAt: &never}
	s := NewSet([]Key{k}, func(k *Key) any { return k.ID })
	for _, secret := range []string{"s-far", "s-far-old"} {
		d := Digest(secret)
		if st := s.Lookup(&d, time.Now()).Status; st != Valid {
			t.Errorf("%s with expires_at %v: %v, want valid", secret, never, st)
		}
	}
}
