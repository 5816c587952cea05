package server_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/llmgw/gateway/internal/server"
)

// Sentinel provider keys in the shapes of several vendors' keys (none is
// real), and a header value the routes file sends with the first.
var echoKeys = []string{
	"sk-proj-SeNtInEl0penAi1234567890abcdefghijklmnopqrstuvWXYZ",                                      // OpenAI
	"sk-ant-api03-SeNtInElAnthr0pic1234567890abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRS-0123456AA", // Anthropic
	"gsk_SeNtInElGr0q1234567890abcdefghijklmnopqrstuvwxyzAB",                                          // Groq
	"xai-SeNtInElxA11234567890abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ01",                 // xAI
	"pplx-SeNtInElPp1x1234567890abcdefghijklmnopqrstuv",                                               // Perplexity
	"5e17e1a0c0ffee00d15ea5e0ba5eba11",                                                                // 32-char hex
	"5e17e1a0c0ffee00d15ea5e0ba5eba11deadbeefcafef00d0123456789abcdef",                                // 64-char hex
	"AIzaSeNtInElG00gle1234567890abcdefgh",                                                            // Google
}

const echoOrg = "org-SeNtInElOrgAn1zat10n0123"

// echoProvider is an OpenAI-format provider that echoes the key it was
// sent (and the organization header) in every kind of error, chosen by
// the upstream model: e400 a relayed 400, e401 a 401, epre a stream whose
// first event is an error object (failed over), estream a stream that
// breaks after its first chunk with an error event (relayed).
func echoProvider(t *testing.T) *httptest.Server {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Model string }
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &req)
		key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		masked := key[:12] + "****" + key[len(key)-4:]
		org := r.Header.Get("OpenAI-Organization")
		msg := func(text string) string {
			m, _ := json.Marshal(map[string]any{"error": map[string]any{
				"message": text, "type": "invalid_request_error", "code": "invalid_api_key"}})
			return string(m)
		}
		switch req.Model {
		case "e400":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, msg("Invalid request with key "+key+" ("+masked+", org "+org+")"))
		case "e401":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, msg("Incorrect API key provided: "+masked+". The key "+key[:10]+"... was sent as "+key+" by "+org))
		case "epre", "estream":
			w.Header().Set("Content-Type", "text/event-stream")
			if req.Model == "estream" {
				fmt.Fprint(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"e","choices":[{"index":0,"delta":{"content":"hi"}}]}`+"\n\n")
				w.(http.Flusher).Flush()
			}
			fmt.Fprint(w, "data: "+msg("key "+key+" was revoked ("+masked+")")+"\n\n")
		default:
			http.Error(w, "unknown model", http.StatusNotFound)
		}
	}))
	t.Cleanup(ts.Close)
	return ts
}

// echoRoutes has one provider per sentinel key, all on the echo
// provider, and the models that send each kind of error through them.
func echoRoutes(url string) string {
	var b strings.Builder
	b.WriteString("# %[1]s %[2]s %[3]s\nproviders:\n")
	for i, k := range echoKeys {
		fmt.Fprintf(&b, "  - name: p%d\n    base_url: %s/v1\n    api_keys: [%q]\n    max_concurrency: 4\n", i, url, k)
		if i == 0 {
			fmt.Fprintf(&b, "    headers: { OpenAI-Organization: %q }\n", echoOrg)
		}
	}
	b.WriteString("models:\n")
	for i := range echoKeys {
		for _, m := range []string{"e400", "estream"} {
			fmt.Fprintf(&b, "  - name: %s-%d\n    candidates:\n      - { provider: p%d, model: %s }\n", m, i, i, m)
		}
	}
	for _, m := range []string{"epre", "e401"} {
		fmt.Fprintf(&b, "  - name: %s-all\n    candidates:\n", m)
		for i := range echoKeys {
			fmt.Fprintf(&b, "      - { provider: p%d, model: %s, priority: %d }\n", i, m, i)
		}
	}
	return b.String()
}

// secretLeaks reports what of the configured secrets s holds: a whole
// value, or its first or last 8 bytes.
func secretLeaks(s string) []string {
	var out []string
	for _, v := range append([]string{echoOrg, "admin-SENTINEL-token"}, echoKeys...) {
		for _, part := range []string{v, v[:8], v[len(v)-8:]} {
			if strings.Contains(s, part) {
				out = append(out, part)
			}
		}
	}
	return out
}

// TestProviderKeysNeverStored protects the operator's provider keys from
// a provider that echoes them: whatever the key's shape (OpenAI,
// Anthropic, Groq, xAI, Perplexity, hex, Google) and however it is echoed
// (whole, cut, half-masked, with the organization header), in a 400 body
// relayed to the client, a 401 failed over, an error event before the
// commit point or one relayed after it, the key is not in the client's
// answer, the Postgres rows, the admin answers or the gateway's log.
func TestProviderKeysNeverStored(t *testing.T) {
	log := &syncBuffer{}
	echo := echoProvider(t)
	g := start(t, setup{db: true, log: log, routes: echoRoutes(echo.URL)})

	var ids []string
	check := func(what string, b []byte) {
		t.Helper()
		if l := secretLeaks(string(b)); l != nil {
			t.Errorf("%s holds %q: %s", what, l, b)
		}
		if !strings.Contains(string(b), "[REDACTED]") {
			t.Errorf("%s shows no [REDACTED] where the provider echoed a key: %s", what, b)
		}
	}
	for i := range echoKeys {
		resp, body := g.post(t, fmt.Sprintf(`{"model":"e400-%d","messages":[{"role":"user","content":"x"}]}`, i))
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("e400-%d: status %d, want the provider's 400 relayed: %s", i, resp.StatusCode, body)
		}
		check(fmt.Sprintf("the client's 400 from p%d", i), body)
		ids = append(ids, resp.Header.Get("X-Request-Id"))

		resp, body, err := g.postRaw(t, fmt.Sprintf(`{"model":"estream-%d","messages":[{"role":"user","content":"x"}],"stream":true}`, i))
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"content":"hi"`) {
			t.Fatalf("estream-%d: status %d (read error %v), want a committed stream: %s", i, resp.StatusCode, err, body)
		}
		check(fmt.Sprintf("the client's stream from p%d", i), body)
		ids = append(ids, resp.Header.Get("X-Request-Id"))
	}
	for _, m := range []string{"epre-all", "e401-all"} {
		resp, body := g.post(t, `{"model":"`+m+`","messages":[{"role":"user","content":"x"}],"stream":`+fmt.Sprint(m == "epre-all")+`}`)
		if resp.StatusCode != http.StatusBadGateway {
			t.Fatalf("%s: status %d, want 502 once every candidate failed: %s", m, resp.StatusCode, body)
		}
		if l := secretLeaks(string(body)); l != nil {
			t.Errorf("the client's 502 of %s holds %q: %s", m, l, body)
		}
		ids = append(ids, resp.Header.Get("X-Request-Id"))
	}

	for _, id := range ids {
		_, rows := g.ledger(t, id)
		for _, r := range rows {
			row := strings.Join([]string{r.Status, r.ErrorType, r.Message, r.Provider, r.Endpoint, r.KeyID, r.SkipReason}, " | ")
			if l := secretLeaks(row); l != nil {
				t.Errorf("request_candidates row of %s holds %q: %s", id, l, row)
			}
			if r.Status == "failed" && !strings.Contains(r.Message, "[REDACTED]") {
				t.Errorf("row %s: error_message %q shows no [REDACTED]", r, r.Message)
			}
		}
		code, b := g.get(t, "/admin/requests/"+id, true)
		if code != http.StatusOK {
			t.Fatalf("/admin/requests/%s: %d %s", id, code, b)
		}
		check("/admin/requests/"+id, b)
	}
	for _, path := range []string{"/admin/requests?limit=50", "/admin/health", "/admin/config"} {
		code, b := g.get(t, path, true)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", path, code, b)
		}
		if l := secretLeaks(string(b)); l != nil {
			t.Errorf("%s holds %q: %s", path, l, b)
		}
	}

	// Whatever a component logs through the gateway's logger, an error
	// carrying provider text included, loses the keys.
	g.Log.Warn("provider said", "err", errors.New("bad key "+echoKeys[2]), "body", echoKeys[5])
	g.shutdown(t)
	out := log.String()
	if l := secretLeaks(out); l != nil {
		t.Errorf("the gateway's log holds %q:\n%s", l, out)
	}
	if !strings.Contains(out, "bad key [REDACTED]") {
		t.Errorf("the log line of a key-carrying error was not redacted:\n%s", out)
	}
}

// TestRedactionFollowsReload protects keys that arrive with a routes
// reload: the first request sent with a new key already has its echo
// redacted, and a key a later reload removes stays redacted (it may still
// be valid at its provider).
func TestRedactionFollowsReload(t *testing.T) {
	const freshKey = "xai-FReShKeyFr0mReload0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"
	log := &syncBuffer{}
	echo := echoProvider(t)
	g, write := startReloadable(t, setup{log: log})
	withFresh := strings.Replace(reloadRoutes[0], "models:\n", fmt.Sprintf(
		"  - { name: fresh, base_url: %q, api_keys: [%q], max_concurrency: 2 }\nmodels:\n"+
			"  - { name: fresh-e400, candidates: [{ provider: fresh, model: e400 }] }\n", echo.URL+"/v1", freshKey), 1)
	write(withFresh)
	if err := g.Reload(server.TriggerSignal); err != nil {
		t.Fatal(err)
	}
	resp, body := g.post(t, `{"model":"fresh-e400","messages":[{"role":"user","content":"x"}]}`)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "[REDACTED]") {
		t.Fatalf("status %d, want the provider's 400 with the key redacted: %s", resp.StatusCode, body)
	}
	for _, part := range []string{freshKey[:8], freshKey[len(freshKey)-8:]} {
		if strings.Contains(string(body), part) {
			t.Fatalf("the client's 400 holds %q of the reloaded key: %s", part, body)
		}
	}
	write(reloadRoutes[0])
	if err := g.Reload(server.TriggerSignal); err != nil {
		t.Fatal(err)
	}
	g.Log.Warn("late echo", "err", errors.New("key "+freshKey))
	g.shutdown(t)
	if out := log.String(); strings.Contains(out, freshKey[:8]) || !strings.Contains(out, "key [REDACTED]") {
		t.Fatalf("a key removed by a reload reached the log:\n%s", out)
	}
}
