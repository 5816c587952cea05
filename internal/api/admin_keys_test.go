package api

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/keys"
	"github.com/llmgw/gateway/internal/secret"
)

const testReadToken = "read-test-token"

// downStore is a key store whose Postgres is away: every call fails.
type downStore struct{ calls int }

func (d *downStore) err() error {
	d.calls++
	return fmt.Errorf("%w: dial refused", keys.ErrUnavailable)
}
func (d *downStore) Create(context.Context, string, keys.Change) (keys.Key, string, error) {
	return keys.Key{}, "", d.err()
}
func (d *downStore) Get(context.Context, string) (keys.Key, error) { return keys.Key{}, d.err() }
func (d *downStore) List(context.Context, keys.Filter) ([]keys.Key, error) {
	return nil, d.err()
}
func (d *downStore) Update(context.Context, string, string, keys.Change) (keys.Key, error) {
	return keys.Key{}, d.err()
}
func (d *downStore) Rotate(context.Context, string, string, time.Duration) (keys.Key, string, error) {
	return keys.Key{}, "", d.err()
}
func (d *downStore) Revoke(context.Context, string, string) (keys.Key, error) {
	return keys.Key{}, d.err()
}
func (d *downStore) Audit(context.Context, int) ([]keys.AuditEntry, error) { return nil, d.err() }

func keysServer(t *testing.T, st KeyStore) *Server {
	t.Helper()
	s := adminServer(t, nil)
	return New(Options{Planner: s.opts.Planner, Admission: admission.New(admission.Config{}),
		AdminToken: secret.New(testAdminToken), AdminReadToken: secret.New(testReadToken), PProf: true,
		KeyStore: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

func adminCall(s *Server, method, target, token, body string) (int, string) {
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// TestReadTokenMatrix: the read token reads every /admin route and is
// refused every write and the profiles; a token in a query string is
// refused even when right; a body is checked before the store is asked.
func TestReadTokenMatrix(t *testing.T) {
	st := &downStore{}
	s := keysServer(t, st)
	for _, c := range []struct {
		method, path, token, body string
		want                      int
		code                      string
	}{
		{"GET", "/admin/admission", testReadToken, "", 200, ""},
		{"GET", "/admin/keys", testReadToken, "", 503, codeStoreUnavailable},
		{"POST", "/admin/keys", testReadToken, `{"name":"a"}`, 403, codeReadOnlyToken},
		{"PATCH", "/admin/keys/x", testReadToken, `{"name":"a"}`, 403, codeReadOnlyToken},
		{"DELETE", "/admin/keys/x", testReadToken, "", 403, codeReadOnlyToken},
		{"POST", "/admin/keys/x/rotate", testReadToken, "", 403, codeReadOnlyToken},
		{"GET", "/debug/pprof/goroutine", testReadToken, "", 403, codeReadOnlyToken},
		{"GET", "/admin/keys?token=" + testAdminToken, "", "", 401, codeInvalidAPIKey},
		{"GET", "/admin/keys?access_token=whatever", testAdminToken, "", 401, codeInvalidAPIKey},
		{"GET", "/admin/keys?team=" + testReadToken, testAdminToken, "", 401, codeInvalidAPIKey},
		{"POST", "/admin/keys", testAdminToken, `{"name":"a","Team":"b"}`, 400, codeInvalidRequest},
		{"POST", "/admin/keys/x/rotate", testAdminToken, `{"grace":"forever"}`, 400, codeInvalidRequest},
		{"POST", "/admin/keys", testAdminToken, `{"name":"a"}`, 503, codeStoreUnavailable},
		{"GET", "/admin/audit?limit=0", testAdminToken, "", 400, codeInvalidRequest},
		{"GET", "/admin/audit", testAdminToken, "", 503, codeStoreUnavailable},
	} {
		code, body := adminCall(s, c.method, c.path, c.token, c.body)
		if code != c.want || (c.code != "" && !strings.Contains(body, `"code":"`+c.code+`"`)) {
			t.Errorf("%s %s: %d %s, want %d %s", c.method, c.path, code, body, c.want, c.code)
		}
	}
	if st.calls != 3 {
		t.Errorf("the store was asked %d times, want 3 (the refused calls never reach it)", st.calls)
	}
}

// TestKeysOffWithoutDatabase: without a store the routes answer 404.
func TestKeysOffWithoutDatabase(t *testing.T) {
	s := adminServer(t, nil)
	if code, body := adminCall(s, "GET", "/admin/keys", testAdminToken, ""); code != 404 || !strings.Contains(body, "GATEWAY_DATABASE_URL") {
		t.Fatalf("%d %s", code, body)
	}
}

// TestAuthenticateKeyStates: what the request path answers for each state
// of an API key, and that a lookup of a valid key allocates nothing
// beyond the digest.
func TestAuthenticateKeyStates(t *testing.T) {
	past := time.Now().Add(-time.Minute)
	mk := func(name, sec string) keys.Key {
		return keys.Key{ID: name, Name: name, Digest: keys.Digest(sec), Models: []string{"gpt-*"}}
	}
	live, rev, exp := mk("live", "s1"), mk("rev", "s2"), mk("exp", "s3")
	rev.RevokedAt, exp.ExpiresAt = &past, &past
	c := keys.NewSet([]keys.Key{live, rev, exp}, CompileKey)
	s := New(Options{Planner: adminServer(t, nil).opts.Planner, Keys: staticKeys{c}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	rt := s.Routing()
	for sec, want := range map[string]string{"s1": "", "s2": msgRevokedKey, "s3": msgExpiredKey, "nope": msgInvalidKey, "": msgInvalidKey} {
		h := http.Header{}
		if sec != "" {
			h.Set("Authorization", "Bearer "+sec)
		}
		who, ok, msg := s.authenticate(rt, h)
		if ok != (want == "") || msg != want {
			t.Errorf("%q: ok %v msg %q, want %q", sec, ok, msg, want)
		}
		if ok && (who.name != "live" || !who.allows("gpt-4o") || who.allows("claude-3")) {
			t.Errorf("%q: caller %+v", sec, who)
		}
	}
	h := http.Header{"Authorization": {"Bearer s1"}}
	if n := testing.AllocsPerRun(100, func() { _, _, _ = s.authenticate(rt, h) }); n > 0 {
		t.Errorf("authenticate allocates %.0f times", n)
	}
}

type staticKeys struct{ s *keys.Set }

func (k staticKeys) Current() *keys.Set { return k.s }

// TestAdminWhoami: /admin/whoami tells the console whether its token may
// write; it needs a token like every admin route.
func TestAdminWhoami(t *testing.T) {
	s := keysServer(t, &downStore{})
	for _, c := range []struct {
		token string
		want  int
		body  string
	}{
		{testAdminToken, 200, `{"role":"admin"}`},
		{testReadToken, 200, `{"role":"read"}`},
		{"wrong", 401, "admin token is not valid"},
		{"", 401, "admin token required"},
	} {
		code, body := adminCall(s, "GET", "/admin/whoami", c.token, "")
		if code != c.want || !strings.Contains(body, c.body) {
			t.Errorf("token %q: %d %s, want %d %s", c.token, code, body, c.want, c.body)
		}
	}
	if code, _ := adminCall(s, "POST", "/admin/whoami", testAdminToken, ""); code != http.StatusMethodNotAllowed {
		t.Errorf("POST /admin/whoami: %d, want 405", code)
	}
}
