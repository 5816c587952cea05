package server_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

const readToken = "read-SENTINEL-token"

// adminDo sends an admin call with token ("" for none) and returns the
// status and body.
func (g *gateway) adminDo(t *testing.T, method, path, token, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, g.URL+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := g.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

type issuedKey struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Hint string `json:"hint"`
	Key  string `json:"key"`
}

// createKey issues a key on g, retrying while the store answers 503 (the
// report writer applies the migrations just after the start).
func (g *gateway) createKey(t *testing.T, body string) issuedKey {
	t.Helper()
	var k issuedKey
	eventually(t, 10*time.Second, "POST /admin/keys answers 201", func() (bool, string) {
		code, b := g.adminDo(t, http.MethodPost, "/admin/keys", "admin-SENTINEL-token", body)
		if code == http.StatusServiceUnavailable {
			return false, string(b)
		}
		if code != http.StatusCreated {
			t.Fatalf("create %s: %d %s", body, code, b)
		}
		if err := json.Unmarshal(b, &k); err != nil || !strings.HasPrefix(k.Key, "sk-gw-") || k.ID == "" {
			t.Fatalf("create answer %s", b)
		}
		return true, ""
	})
	return k
}

// chatWith sends a chat request with key and returns the status and body.
func (g *gateway) chatWith(t *testing.T, key string) (int, []byte) {
	t.Helper()
	resp, b := g.post(t, chatBody(false), "Authorization", "Bearer "+key)
	return resp.StatusCode, b
}

// waitChat waits up to within for a request with key to answer want.
func (g *gateway) waitChat(t *testing.T, key string, want int, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		code, b := g.chatWith(t, key)
		if code == want {
			return time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("after %s: %d %s, want %d", within, code, b, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestAPIKeysAcrossGateways: two gateways sharing one database; keys
// issued, changed, rotated and revoked through A's admin API take effect
// on B within a second, and no answer, log or audit row holds a secret
// but the one that issued it.
func TestAPIKeysAcrossGateways(t *testing.T) {
	logA := &syncBuffer{}
	a := start(t, setup{db: true, log: logA, env: map[string]string{"GATEWAY_ADMIN_READ_TOKEN": readToken}})
	b := start(t, setup{env: map[string]string{"GATEWAY_DATABASE_URL": a.DatabaseURL, "GATEWAY_ADMIN_READ_TOKEN": readToken}})
	var secrets []string

	// The read token reads but never writes; no token goes in a URL.
	if code, body := a.adminDo(t, http.MethodPost, "/admin/keys", readToken, `{"name":"x"}`); code != http.StatusForbidden ||
		decodeError(t, body).Error.Type != "permission_error" {
		t.Fatalf("write with the read token: %d %s", code, body)
	}
	if code, _ := a.adminDo(t, http.MethodGet, "/admin/keys?token=admin-SENTINEL-token", "", ""); code != http.StatusUnauthorized {
		t.Fatalf("token in the query: %d", code)
	}
	if code, _ := a.adminDo(t, http.MethodGet, "/admin/keys?x=admin-SENTINEL-token", "admin-SENTINEL-token", ""); code != http.StatusUnauthorized {
		t.Fatalf("token as a query value: %d", code)
	}

	// A first key, once both gateways follow the database.
	warm := a.createKey(t, `{"name":"warm"}`)
	secrets = append(secrets, warm.Key)
	// With a key issued, the API is no longer open (on B, once it has
	// loaded the keys: until then it knows of none).
	b.waitChat(t, "sk-gw-nope", http.StatusUnauthorized, 10*time.Second)
	b.waitChat(t, warm.Key, http.StatusOK, time.Second)
	if code, body := b.chatWith(t, "sk-gw-nope"); code != http.StatusUnauthorized || decodeError(t, body).Error.Code != "invalid_api_key" {
		t.Fatalf("unknown key: %d %s", code, body)
	}
	if resp, _ := b.post(t, chatBody(false)); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no key: %d", resp.StatusCode)
	}

	// Created on A, accepted by B within a second.
	web := a.createKey(t, `{"name":"web","team":"search","budget":{"usd":5,"per":"day"},"metadata":{"owner":"ana"}}`)
	secrets = append(secrets, web.Key)
	t.Logf("created on A, accepted on B after %s", b.waitChat(t, web.Key, http.StatusOK, time.Second))

	// Field errors name the field; a case-variant or unknown member is refused.
	for body, param := range map[string]string{`{"name":"a","Name":"b"}`: "name", `{"name":"a","colour":"red"}`: "colour",
		`{"name":"a","budget":{"usd":-1,"per":"day"}}`: "budget.usd", `{}`: "name"} {
		code, got := a.adminDo(t, http.MethodPost, "/admin/keys", "admin-SENTINEL-token", body)
		e := decodeError(t, got)
		if code != http.StatusBadRequest || e.Error.Param == nil || *e.Error.Param != param {
			t.Errorf("create %s: %d %s, want 400 naming %s", body, code, got, param)
		}
	}

	// The allowlist: a model outside it is 403, and /v1/models leaves it out.
	narrow := a.createKey(t, `{"name":"narrow","models":["claude-*"]}`)
	secrets = append(secrets, narrow.Key)
	b.waitChat(t, narrow.Key, http.StatusForbidden, time.Second)
	code, body := b.chatWith(t, narrow.Key)
	if e := decodeError(t, body); code != http.StatusForbidden || e.Error.Type != "permission_error" || e.Error.Code != "model_not_allowed" {
		t.Fatalf("model outside the list: %d %s", code, body)
	}
	models := func(key string) string {
		req, _ := http.NewRequest(http.MethodGet, b.URL+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := b.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, _ := io.ReadAll(resp.Body)
		return string(got)
	}
	if m := models(narrow.Key); strings.Contains(m, "gpt-4o-mini") {
		t.Fatalf("/v1/models for the narrow key: %s", m)
	}
	if m := models(web.Key); !strings.Contains(m, "gpt-4o-mini") {
		t.Fatalf("/v1/models for an open key: %s", m)
	}
	// PATCH widens it; B follows.
	if code, body := a.adminDo(t, http.MethodPatch, "/admin/keys/"+narrow.ID, "admin-SENTINEL-token", `{"models":["gpt-4o*"]}`); code != http.StatusOK {
		t.Fatalf("patch: %d %s", code, body)
	}
	b.waitChat(t, narrow.Key, http.StatusOK, time.Second)

	// Rotation with a 2s grace: both secrets work, then the old one is expired.
	code, body = a.adminDo(t, http.MethodPost, "/admin/keys/"+web.ID+"/rotate", "admin-SENTINEL-token", `{"grace":"2s"}`)
	var rotated issuedKey
	if code != http.StatusOK || json.Unmarshal(body, &rotated) != nil || rotated.Key == "" || rotated.Key == web.Key {
		t.Fatalf("rotate: %d %s", code, body)
	}
	secrets = append(secrets, rotated.Key)
	b.waitChat(t, rotated.Key, http.StatusOK, time.Second)
	if code, _ := b.chatWith(t, web.Key); code != http.StatusOK {
		t.Fatalf("old secret within the grace: %d", code)
	}
	b.waitChat(t, web.Key, http.StatusUnauthorized, 3*time.Second)
	if _, body := b.chatWith(t, web.Key); !strings.Contains(decodeError(t, body).Error.Message, "expired") {
		t.Fatalf("old secret after the grace: %s", body)
	}

	// Expiry.
	at := time.Now().Add(1500 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	short := a.createKey(t, `{"name":"short","expires_at":"`+at+`"}`)
	secrets = append(secrets, short.Key)
	b.waitChat(t, short.Key, http.StatusOK, time.Second)
	b.waitChat(t, short.Key, http.StatusUnauthorized, 3*time.Second)
	if _, body := b.chatWith(t, short.Key); !strings.Contains(decodeError(t, body).Error.Message, "expired") {
		t.Fatalf("expired key: %s", body)
	}

	// Revoked on A, refused on B within a second, saying so.
	if code, body := a.adminDo(t, http.MethodDelete, "/admin/keys/"+narrow.ID, "admin-SENTINEL-token", ""); code != http.StatusOK {
		t.Fatalf("revoke: %d %s", code, body)
	}
	t.Logf("revoked on A, refused on B after %s", b.waitChat(t, narrow.Key, http.StatusUnauthorized, time.Second))
	if _, body := b.chatWith(t, narrow.Key); !strings.Contains(decodeError(t, body).Error.Message, "revoked") {
		t.Fatalf("revoked key: %s", body)
	}

	// Reads, with the read token too: the record, its budget, the audit.
	eventually(t, 3*time.Second, "the key's budget in GET /admin/keys/{id}", func() (bool, string) {
		code, body := b.adminDo(t, http.MethodGet, "/admin/keys/"+web.ID, readToken, "")
		var d struct {
			Budgets []struct {
				LimitUSD float64 `json:"limit_usd"`
			} `json:"budgets"`
		}
		_ = json.Unmarshal(body, &d)
		return code == http.StatusOK && len(d.Budgets) == 1 && d.Budgets[0].LimitUSD == 5, string(body)
	})
	var reads []byte
	for _, path := range []string{"/admin/keys", "/admin/keys?team=search", "/admin/keys?revoked=true", "/admin/keys/" + web.ID, "/admin/audit?limit=50", "/admin/budgets"} {
		code, body := b.adminDo(t, http.MethodGet, path, readToken, "")
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
		reads = append(reads, body...)
	}
	if !strings.Contains(string(reads), `"action":"rotate"`) || !strings.Contains(string(reads), `"actor":"admin:`) {
		t.Fatalf("the audit lacks the rotation or its actor: %s", reads)
	}
	if strings.Contains(string(reads), `"key":`) || strings.Contains(string(reads), "SENTINEL-token") {
		t.Fatal("a read holds a key member or an admin token")
	}
	if code, body := a.adminDo(t, http.MethodGet, "/admin/keys?revoked=maybe", readToken, ""); code != http.StatusBadRequest {
		t.Fatalf("revoked=maybe: %d %s", code, body)
	}
	// The secret sentinel: issued secrets appear in no read, no log line.
	logs := logA.String()
	for _, s := range secrets {
		if strings.Contains(string(reads), s) || strings.Contains(logs, s) || strings.Contains(logs, s[6:]) {
			t.Fatalf("the secret %s… leaked into a read or a log", s[:10])
		}
	}
	if code, body := a.get(t, "/metrics", false); code == http.StatusOK {
		for _, s := range secrets {
			if strings.Contains(string(body), s[6:]) {
				t.Fatal("a secret in /metrics")
			}
		}
	}
}

// closedDSN is a database URL on a loopback port nothing listens on.
func closedDSN(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return "postgres://postgres@" + addr + "/none?sslmode=disable&connect_timeout=1"
}

// TestAPIKeysWithPostgresDown: writes answer 503 store_unavailable, and a
// gateway started while Postgres is down serves the keys of the snapshot
// its last run left, refusing the revoked one.
func TestAPIKeysWithPostgresDown(t *testing.T) {
	spool := t.TempDir()
	up := start(t, setup{db: true, env: map[string]string{"GATEWAY_SPOOL_DIR": spool}})
	live := up.createKey(t, `{"name":"live"}`)
	eventually(t, 5*time.Second, "/readyz says the keys follow Postgres", func() (bool, string) {
		_, body := up.get(t, "/readyz", false)
		return strings.Contains(string(body), `"keys":"ok"`), string(body)
	})
	gone := up.createKey(t, `{"name":"gone"}`)
	if code, body := up.adminDo(t, http.MethodDelete, "/admin/keys/"+gone.ID, "admin-SENTINEL-token", ""); code != http.StatusOK {
		t.Fatalf("revoke: %d %s", code, body)
	}
	up.waitChat(t, gone.Key, http.StatusUnauthorized, time.Second)
	up.shutdown(t) // the syncer writes the snapshot as it stops

	down := start(t, setup{env: map[string]string{"GATEWAY_SPOOL_DIR": spool, "GATEWAY_DATABASE_URL": closedDSN(t)}})
	if code, body := down.get(t, "/readyz", false); code != http.StatusOK || !strings.Contains(string(body), `"keys":"snapshot"`) {
		t.Fatalf("/readyz serving the snapshot: %d %s", code, body)
	}
	if code, body := down.chatWith(t, live.Key); code != http.StatusOK {
		t.Fatalf("snapshot key with Postgres down: %d %s", code, body)
	}
	if code, body := down.chatWith(t, gone.Key); code != http.StatusUnauthorized || !strings.Contains(string(body), "revoked") {
		t.Fatalf("revoked snapshot key with Postgres down: %d %s", code, body)
	}
	code, body := down.adminDo(t, http.MethodPost, "/admin/keys", "admin-SENTINEL-token", `{"name":"new"}`)
	if e := decodeError(t, body); code != http.StatusServiceUnavailable || e.Error.Code != "store_unavailable" {
		t.Fatalf("create with Postgres down: %d %s", code, body)
	}
	code, body = down.adminDo(t, http.MethodDelete, "/admin/keys/"+live.ID, "admin-SENTINEL-token", "")
	if code != http.StatusServiceUnavailable {
		t.Fatalf("revoke with Postgres down: %d %s", code, body)
	}
	if code, _ := down.chatWith(t, live.Key); code != http.StatusOK {
		t.Fatal("a failed revoke changed something")
	}
}

// TestAPIKeysBesideRoutesClients: routes-file clients keep working beside
// API keys; a key cannot take a routes-file client's name; a key's limits
// apply like a client's (its rate window, its concurrency gate).
func TestAPIKeysBesideRoutesClients(t *testing.T) {
	g := start(t, setup{db: true, routes: clientRoutes})
	code, body := http.StatusServiceUnavailable, []byte(nil)
	eventually(t, 10*time.Second, "the key store answers", func() (bool, string) {
		code, body = g.adminDo(t, http.MethodPost, "/admin/keys", "admin-SENTINEL-token", `{"name":"app-1"}`)
		return code != http.StatusServiceUnavailable, string(body)
	})
	if e := decodeError(t, body); code != http.StatusConflict || e.Error.Code != "name_taken" {
		t.Fatalf("a key named like a routes-file client: %d %s", code, body)
	}
	k := g.createKey(t, `{"name":"limited","requests_per_minute":1,"max_concurrency":3}`)
	g.waitChat(t, k.Key, http.StatusOK, time.Second)
	if code, body := g.chatWith(t, k.Key); code != http.StatusTooManyRequests || decodeError(t, body).Error.Code != "rate_limit_exceeded" {
		t.Fatalf("second request in the minute: %d %s", code, body)
	}
	if code, _ := g.chatWith(t, "app-1-SENTINEL-token"); code != http.StatusOK {
		t.Fatalf("routes-file client beside API keys: %d", code)
	}
	code, body = g.adminDo(t, http.MethodGet, "/admin/keys/"+k.ID, "admin-SENTINEL-token", "")
	var d struct {
		Concurrency *struct {
			Limit int `json:"limit"`
		} `json:"concurrency"`
		Rates *struct {
			Requests *struct {
				Limit     int   `json:"limit"`
				Used      int   `json:"used"`
				ResetInMS int64 `json:"reset_in_ms"`
			} `json:"requests_per_minute"`
			Tokens *struct{} `json:"tokens_per_minute"`
		} `json:"rates"`
	}
	if code != http.StatusOK || json.Unmarshal(body, &d) != nil || d.Concurrency == nil || d.Concurrency.Limit != 3 {
		t.Fatalf("GET the key: %d %s", code, body)
	}
	// The minute's one request is used (the refused one is not counted),
	// and reading it counted nothing.
	for range 2 {
		code, body = g.adminDo(t, http.MethodGet, "/admin/keys/"+k.ID, "admin-SENTINEL-token", "")
		if err := json.Unmarshal(body, &d); err != nil || d.Rates == nil || d.Rates.Requests == nil || d.Rates.Tokens != nil ||
			d.Rates.Requests.Limit != 1 || d.Rates.Requests.Used != 1 || d.Rates.Requests.ResetInMS <= 0 || d.Rates.Requests.ResetInMS > 60000 {
			t.Fatalf("the key's rate use: %d %s", code, body)
		}
	}
}

// TestAPIKeyBudgetRefusal: an API key's budget holds like a routes-file
// client's (TestBudgetRefusal): 0.004 a request against 0.01 a day, so the
// fourth request is refused before reaching the provider, naming the key.
func TestAPIKeyBudgetRefusal(t *testing.T) {
	oa, calls := countedCostProvider(t)
	an := costProvider(t)
	g := start(t, setup{routes: costRoutes(oa.URL, an.URL), db: true})
	k := g.createKey(t, `{"name":"key-costly","budget":{"usd":0.01,"per":"day"}}`)
	g.waitChat(t, "sk-gw-nope", http.StatusUnauthorized, 5*time.Second) // the key set is in
	eventually(t, 3*time.Second, "the key's budget is set", func() (bool, string) {
		_, body := g.adminDo(t, http.MethodGet, "/admin/budgets", "admin-SENTINEL-token", "")
		return strings.Contains(string(body), `"key-costly"`), string(body)
	})
	const body = `{"model":"m-oa","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`
	ok := 0
	var last []byte
	for range 10 {
		resp, got := g.post(t, body, "Authorization", "Bearer "+k.Key)
		if resp.StatusCode != http.StatusOK {
			last = got
			if resp.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("%d %s", resp.StatusCode, got)
			}
			break
		}
		ok++
	}
	e := decodeError(t, last)
	if ok != 3 || e.Error.Code != "budget_exceeded" || !strings.Contains(e.Error.Message, "client key-costly, day") {
		t.Fatalf("%d answered, then %s", ok, last)
	}
	before := calls.Load()
	if resp, _ := g.post(t, body, "Authorization", "Bearer "+k.Key); resp.StatusCode != http.StatusTooManyRequests || calls.Load() != before {
		t.Fatalf("the next request: %d, provider calls %d -> %d", resp.StatusCode, before, calls.Load())
	}
}
