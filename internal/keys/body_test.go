package keys

import (
	"errors"
	"testing"
	"time"
)

func TestParseCreateRefusals(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct{ body, field string }{
		{`{}`, "name"},
		{`[]`, ""},
		{`{"name":"a"} x`, ""},
		{`{"name":"a","name":"b"}`, "name"},
		{`{"Name":"a"}`, "name"},
		{`{"nam\u0065":"a","NAME":"b"}`, "name"},
		{`{"name":"a","secret":"x"}`, "secret"},
		{`{"name":"a","coſt_in_usage":true}`, "cost_in_usage"},
		{`{"name":"a","key":"sk-gw-x"}`, "key"},
		{`{"name":""}`, "name"},
		{`{"name":" a"}`, "name"},
		{`{"name":1}`, "name"},
		{`{"name":"a","models":"gpt"}`, "models"},
		{`{"name":"a","models":[""]}`, "models"},
		{`{"name":"a","priority":"urgentish"}`, "priority"},
		{`{"name":"a","max_concurrency":-1}`, "max_concurrency"},
		{`{"name":"a","requests_per_minute":1.5}`, "requests_per_minute"},
		{`{"name":"a","tokens_per_minute":"9"}`, "tokens_per_minute"},
		{`{"name":"a","budget":{"usd":0,"per":"day"}}`, "budget.usd"},
		{`{"name":"a","budget":{"usd":5,"per":"year"}}`, "budget.per"},
		{`{"name":"a","budget":{"usd":5,"per":"day","x":1}}`, "budget.x"},
		{`{"name":"a","budget":{"USD":5,"per":"day"}}`, "budget.usd"},
		{`{"name":"a","cost_in_usage":"yes"}`, "cost_in_usage"},
		{`{"name":"a","expires_at":"tomorrow"}`, "expires_at"},
		{`{"name":"a","expires_at":"2025-01-01T00:00:00Z"}`, "expires_at"},
		{`{"name":"a","metadata":{"k":1}}`, "metadata"},
		{`{"name":"a","metadata":[]}`, "metadata"},
	} {
		_, err := ParseCreate([]byte(c.body), now)
		var fe *FieldError
		if !errors.As(err, &fe) {
			t.Errorf("%s: err %v, want a field error", c.body, err)
			continue
		}
		if fe.Field != c.field {
			t.Errorf("%s: field %q, want %q (%v)", c.body, fe.Field, c.field, err)
		}
	}
}

func TestParseCreateAndPatch(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c, err := ParseCreate([]byte(`{"name":"web","team":"search","models":["gpt-4o*"],"priority":"background",
		"max_concurrency":2,"requests_per_minute":60,"tokens_per_minute":1000,"budget":{"usd":20,"per":"day"},
		"cost_in_usage":true,"expires_at":"2027-01-01T00:00:00Z","metadata":{"owner":"ana"}}`), now)
	if err != nil {
		t.Fatal(err)
	}
	var k Key
	c.Apply(&k)
	if k.Name != "web" || k.Team != "search" || k.Models[0] != "gpt-4o*" || k.Priority != "background" ||
		k.MaxConcurrency != 2 || k.RequestsPerMinute != 60 || k.TokensPerMinute != 1000 ||
		k.Budget == nil || k.Budget.USD != 20 || k.Budget.Per != "day" || !k.CostInUsage ||
		k.ExpiresAt == nil || k.Metadata["owner"] != "ana" {
		t.Fatalf("applied: %+v", k)
	}
	if len(c.Fields()) != 11 {
		t.Fatalf("fields: %v", c.Fields())
	}
	p, err := ParsePatch([]byte(`{"budget":null,"expires_at":null}`), now)
	if err != nil {
		t.Fatal(err)
	}
	p.Apply(&k)
	if k.Budget != nil || k.ExpiresAt != nil || k.Name != "web" {
		t.Fatalf("patched: %+v", k)
	}
	if _, err := ParsePatch([]byte(`{}`), now); err == nil {
		t.Fatal("an empty patch was accepted")
	}
	for body, want := range map[string]time.Duration{"": DefaultGrace, `{}`: DefaultGrace, `{"grace":"0s"}`: 0, `{"grace":"2s"}`: 2 * time.Second} {
		if got, err := ParseRotate([]byte(body)); err != nil || got != want {
			t.Errorf("rotate %q: %v %v, want %v", body, got, err, want)
		}
	}
	for _, body := range []string{`{"grace":"-1s"}`, `{"grace":24}`, `{"Grace":"1s"}`, `{"grace":"1000h"}`} {
		if _, err := ParseRotate([]byte(body)); err == nil {
			t.Errorf("rotate %q accepted", body)
		}
	}
}

// FuzzAdminKeyBody: no admin body makes a parser panic, and every refusal
// is a field error (a 400 naming its field), never another kind.
func FuzzAdminKeyBody(f *testing.F) {
	for _, s := range []string{`{"name":"a"}`, `{"name":"a","budget":{"usd":1,"per":"day"}}`, `{"grace":"1s"}`,
		`{"models":["*"],"metadata":{"a":"b"}}`, `{"Name":"x"}`, `{"name":"a","name":"a"}`, `[`, `{"expires_at":null}`, ``} {
		f.Add([]byte(s))
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, b []byte) {
		check := func(err error) {
			var fe *FieldError
			if err != nil && !errors.As(err, &fe) {
				t.Fatalf("%q: %T %v, want a *FieldError", b, err, err)
			}
		}
		c, err := ParseCreate(b, now)
		check(err)
		if err == nil {
			var k Key
			c.Apply(&k)
			_ = c.Fields()
		}
		_, err = ParsePatch(b, now)
		check(err)
		_, err = ParseRotate(b)
		check(err)
	})
}
