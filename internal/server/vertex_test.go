package server_test

import (
	"encoding/json"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmgw/gateway/internal/mockupstream"
	"github.com/llmgw/gateway/internal/server"
)

// vertexRoutes: the primary mock as a vertex provider (tier 0; base_url
// overrides the regional host), the backup as an openai one (tier 1). %[3]s
// is the service-account key file, written by vertexSetup's prepare.
const vertexRoutes = `
providers:
  - name: vx
    format: vertex
    base_url: %[1]s
    vertex: { project: mock-project, location: us-central1 }
    credentials_file: %[3]s
    max_concurrency: 8
    health: { failures: 1, cooldown: 1m }
  - name: backup
    base_url: %[2]s/v1
    api_keys: ["${BACKUP_KEY}"]
    max_concurrency: 8
models:
  - name: gemini-2.5-flash
    candidates:
      - { provider: vx, model: gemini-2.5-flash, priority: 0 }
      - { provider: backup, model: up-backup-mini, priority: 1 }
  - name: gemini-2.5-pro
    candidates:
      - { provider: vx, model: gemini-2.5-pro, priority: 0 }
      - { provider: backup, model: up-backup-mini, priority: 1 }
`

const vertexPath = "/v1/projects/mock-project/locations/us-central1/publishers/google/models/gemini-2.5-flash:"

// vertexSetup is a setup whose primary mock issues the tokens of a fresh
// service account; pem receives the account's private key, as the key
// file holds it.
func vertexSetup(t *testing.T, s setup, pemKey *string) setup {
	creds := filepath.Join(t.TempDir(), "sa.json")
	s.routes, s.primaryExtra, s.db = vertexRoutes, creds, true
	s.prepare = func(g *gateway) {
		b, _, err := g.Primary.VertexServiceAccount(g.PrimaryURL+mockupstream.PathToken, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(creds, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if pemKey != nil {
			var f struct {
				PrivateKey string `json:"private_key"`
			}
			if err := json.Unmarshal(b, &f); err != nil || f.PrivateKey == "" {
				t.Fatalf("the key file: %v", err)
			}
			*pemKey = f.PrivateKey
		}
	}
	return s
}

// TestVertexProvider: chat clients, stream and not, reach a vertex
// candidate: the answer and usage reach the client, the rows and the cost
// at the built-in gemini price; the request went to the project's model
// path with a bearer token from the token endpoint, fetched once and
// reused by every later request.
func TestVertexProvider(t *testing.T) {
	const cached, reasoning = 4, 3
	g := start(t, vertexSetup(t, setup{primary: mockupstream.Behavior{CachedTokens: cached, ReasoningTokens: reasoning}}, nil))
	const want = "Hello from primary chunk 1 2 3"
	for _, tc := range []struct {
		name, body string
		want       []string
	}{
		{"chat", `{"model":"gemini-2.5-flash","messages":[{"role":"user","content":"hi"}]}`,
			[]string{`"content":"` + want + `"`, `"finish_reason":"stop"`, `"reasoning_tokens":3`, `"cached_tokens":4`}},
		{"chat stream", `{"model":"gemini-2.5-flash","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`,
			[]string{`"content":"Hello from primary chunk 1"`, `"finish_reason":"stop"`, `"reasoning_tokens":3`, "data: [DONE]"}},
		{"messages", `{"model":"gemini-2.5-flash","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`,
			[]string{`"text":"` + want + `"`, `"stop_reason":"end_turn"`, `"output_tokens":6`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := "/v1/chat/completions"
			if tc.name == "messages" {
				path = "/v1/messages"
			}
			resp, body, err := g.postStream(t, path, tc.body)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %v: %s", resp.StatusCode, err, body)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(body), w) {
					t.Errorf("%s not in the answer: %s", w, body)
				}
			}
			id := resp.Header.Get("X-Request-Id")
			req, rows := g.ledger(t, id)
			wantRows(t, rows, "success/200/(vx)", "unused/0/(backup)")
			c := g.costOf(t, id)
			if req.PromptTokens == nil || req.TotalTokens == nil || c.cost == nil {
				t.Fatalf("request row: prompt %s total %s cost %s", ip(req.PromptTokens), ip(req.TotalTokens), fp(c.cost))
			}
			completion := *req.TotalTokens - *req.PromptTokens
			cost := (float64(*req.PromptTokens-cached)*gemIn + cached*gemCached + float64(completion)*gemOut) / 1e6
			if completion != 3+reasoning || math.Abs(*c.cost-cost) > 1e-12 {
				t.Fatalf("completion %d cost %s, want 6 and %v (the gemini price)", completion, fp(c.cost), cost)
			}
		})
	}
	for _, m := range []string{"generateContent", "streamGenerateContent"} {
		last, ok := g.Primary.LastRequestAt(vertexPath + m)
		if !ok {
			t.Fatalf("no request at %s", vertexPath+m)
		}
		if a := last.Header.Get("Authorization"); !strings.HasPrefix(a, "Bearer mock-vertex-token-") || last.Header.Get("X-Goog-Api-Key") != "" {
			t.Fatalf("%s: Authorization %q x-goog-api-key %q", m, a, last.Header.Get("X-Goog-Api-Key"))
		}
	}
	for range 3 {
		if resp, b := g.post(t, vertexChat(false)); resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
	}
	if n := g.Primary.TokenCalls(); n != 1 {
		t.Fatalf("%d token requests for 6 model requests, want 1: the token is cached", n)
	}
	if n := g.Backup.Stats().Requests; n != 0 {
		t.Fatalf("the backup got %d requests", n)
	}
}

// TestVertexTokenOutage: a token endpoint that fails is the provider's
// failure: the request fails over to the openai backup, and the vertex
// provider cools (health.failures 1), so the next request goes to the
// backup without asking for a token again. Google's errors on the model
// path are classified as gemini's: a 400 is relayed, a 503 fails over.
func TestVertexTokenOutage(t *testing.T) {
	g := start(t, vertexSetup(t, setup{}, nil))
	g.Primary.SetBehavior(mockupstream.Behavior{Identity: "primary", TokenStatus: http.StatusInternalServerError})
	resp, b := g.post(t, vertexChat(false))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "Hello from backup") {
		t.Fatalf("no failover: %d %s", resp.StatusCode, b)
	}
	_, rows := g.ledger(t, resp.Header.Get("X-Request-Id"))
	wantRows(t, rows, "failed/502/upstream_connect_error(vx)", "success/200/(backup)")
	if !strings.Contains(rows[0].Message, "access token") {
		t.Fatalf("the failure does not say it was the token: %q", rows[0].Message)
	}
	// The outage cooled the provider's model in /admin/health (failures: 1).
	var cooled bool
	for _, h := range g.health(t) {
		if h.Provider == "vx" && h.Model == "gemini-2.5-flash" {
			cooled = h.State == "cooling" && h.CooldownUntil != nil && h.LastErrorType == "upstream_connect_error"
		}
	}
	if !cooled {
		t.Fatalf("vx not cooling after the token outage: %v", g.health(t))
	}
	calls := g.Primary.TokenCalls()
	resp, b = g.post(t, vertexChat(false))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "Hello from backup") {
		t.Fatalf("second request: %d %s", resp.StatusCode, b)
	}
	if n := g.Primary.TokenCalls(); n != calls {
		t.Fatalf("a cooled provider asked for a token again (%d -> %d)", calls, n)
	}
	if n := g.Primary.Stats().Requests; n != 0 {
		t.Fatalf("the vertex model path got %d requests without a token", n)
	}
}

// TestVertexErrors: the model path's Google errors mean what gemini's do.
func TestVertexErrors(t *testing.T) {
	g := start(t, vertexSetup(t, setup{}, nil))
	g.Primary.SetBehavior(mockupstream.Behavior{Identity: "primary", Status: http.StatusBadRequest})
	resp, b := g.post(t, vertexChat(false))
	if e := decodeError(t, b); resp.StatusCode != http.StatusBadRequest || e.Error.Message != "mock error" {
		t.Fatalf("400: %d %s", resp.StatusCode, b)
	}
	_, rows := g.ledger(t, resp.Header.Get("X-Request-Id"))
	wantRows(t, rows, "failed/400/upstream_http_error(vx)", "unused/0/(backup)")
	g.Primary.SetBehavior(mockupstream.Behavior{Identity: "primary", Status: http.StatusServiceUnavailable})
	resp, b = g.post(t, vertexChat(false))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "Hello from backup") {
		t.Fatalf("503: %d %s", resp.StatusCode, b)
	}
	_, rows = g.ledger(t, resp.Header.Get("X-Request-Id"))
	wantRows(t, rows, "failed/503/upstream_http_error(vx)", "success/200/(backup)")
}

// TestVertexQuotaIsKeyScoped: 429 RESOURCE_EXHAUSTED speaks for the
// service account (its project's quota), as for a gemini key: it fails
// over, and the account cools at once (health.failures 1) for every
// model, so a request for another model does not try it either.
func TestVertexQuotaIsKeyScoped(t *testing.T) {
	g := start(t, vertexSetup(t, setup{}, nil))
	g.Primary.SetBehavior(mockupstream.Behavior{Identity: "primary", Status: http.StatusTooManyRequests})
	resp, b := g.post(t, vertexChat(false))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "Hello from backup") {
		t.Fatalf("429: %d %s", resp.StatusCode, b)
	}
	_, rows := g.ledger(t, resp.Header.Get("X-Request-Id"))
	wantRows(t, rows, "failed/429/upstream_http_error(vx)", "success/200/(backup)")
	before := g.Primary.Stats().Requests
	pro := strings.Replace(vertexChat(false), "gemini-2.5-flash", "gemini-2.5-pro", 1)
	if resp, b := g.post(t, pro); resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "Hello from backup") {
		t.Fatalf("after the 429: %d %s", resp.StatusCode, b)
	}
	if n := g.Primary.Stats().Requests; n != before {
		t.Fatalf("the cooled service account was tried again (%d -> %d requests)", before, n)
	}
}

// TestVertexCredentialsNeverShown: the service account's private key and
// its access tokens appear in no client answer, row, admin answer or log
// line, the failed token fetch's included.
func TestVertexCredentialsNeverShown(t *testing.T) {
	// Two gateways: a token, once fetched, is good for an hour, so the
	// outage is met by a gateway that never had one.
	t.Run("token outage", func(t *testing.T) {
		vertexLeaks(t, true, mockupstream.Behavior{TokenStatus: http.StatusInternalServerError})
	})
	t.Run("model path", func(t *testing.T) {
		vertexLeaks(t, false, mockupstream.Behavior{}, mockupstream.Behavior{Status: http.StatusUnauthorized},
			mockupstream.Behavior{Status: http.StatusBadRequest})
	})
}

// vertexLeaks sends a stream and a non-stream request under each behavior
// of the primary and looks for the credentials everywhere they could show;
// outage: the token fetch failed, and the log must say so.
func vertexLeaks(t *testing.T, outage bool, behaviors ...mockupstream.Behavior) {
	log := &syncBuffer{}
	var key string
	g := start(t, vertexSetup(t, setup{log: log}, &key))
	var parts []string // the key's base64 lines: any of them would be a leak
	for _, l := range strings.Split(key, "\n") {
		if len(l) >= 40 && !strings.HasPrefix(l, "-----") {
			parts = append(parts, l[:40])
		}
	}
	if len(parts) < 10 {
		t.Fatalf("the key has %d lines", len(parts))
	}
	check := func(what, s string) {
		t.Helper()
		if strings.Contains(s, "mock-vertex-token") {
			t.Errorf("%s holds an access token: %s", what, s)
		}
		for _, p := range parts {
			if strings.Contains(s, p) || strings.Contains(s, strings.ReplaceAll(p, "/", `\/`)) {
				t.Errorf("%s holds the private key: %s", what, s)
				return
			}
		}
	}
	var ids []string
	for _, b := range behaviors {
		b.Identity = "primary"
		g.Primary.SetBehavior(b)
		for _, stream := range []bool{false, true} {
			resp, body, _ := g.postStream(t, "/v1/chat/completions", vertexChat(stream))
			check("the answer", string(body))
			for k, v := range resp.Header {
				check("the answer's header "+k, strings.Join(v, ","))
			}
			ids = append(ids, resp.Header.Get("X-Request-Id"))
		}
	}
	var allRows string
	for _, id := range ids {
		rows := g.rowsText(t, id)
		check("the rows of "+id, rows)
		allRows += rows
		_, b := g.get(t, "/admin/requests/"+id, true)
		check("/admin/requests/"+id, string(b))
	}
	for _, path := range []string{"/admin/config", "/admin/health"} {
		_, b := g.get(t, path, true)
		check(path, string(b))
	}
	g.shutdown(t)
	check("the gateway's log", log.String())
	if outage && (!strings.Contains(allRows, "access token for vx") || !strings.Contains(log.String(), "provider=vx")) {
		t.Fatal("the token outage reached neither the rows nor the log: the checks above prove little")
	}
}

// vertexChat is a chat request for the vertex route's model.
func vertexChat(stream bool) string {
	if stream {
		return `{"model":"gemini-2.5-flash","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	}
	return `{"model":"gemini-2.5-flash","messages":[{"role":"user","content":"hi"}]}`
}

// TestVertexReloadBadCredentials: a reload whose credentials_file is
// missing or not a service-account key fails naming the field, and the
// routes in service keep serving through their token.
func TestVertexReloadBadCredentials(t *testing.T) {
	s := vertexSetup(t, setup{}, nil)
	creds := s.primaryExtra
	g, write := startReloadable(t, s)
	with := func(path string) string { return strings.Replace(vertexRoutes, "%[3]s", path, 1) }
	write(with(creds))
	if err := g.Reload(server.TriggerSignal); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"type":"service_account"`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(t.TempDir(), "gone.json"), "no such file"},
		{bad, "not JSON"},
	} {
		write(with(tc.path))
		err := g.Reload(server.TriggerSignal)
		if err == nil || !strings.Contains(err.Error(), "providers[0].credentials_file") || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: Reload = %v", tc.path, err)
		}
		if cs := g.ConfigStatus(); cs.LastError == nil || !strings.Contains(cs.LastError.Message, "credentials_file") {
			t.Fatalf("%s: /admin/config last_error %+v", tc.path, cs.LastError)
		}
		resp, b := g.post(t, vertexChat(false))
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "Hello from primary") {
			t.Fatalf("%s: the routes in service stopped serving: %d %s", tc.path, resp.StatusCode, b)
		}
	}
}
