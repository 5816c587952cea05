package server_test

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestAbsurdUsageKeepsReplicaShared protects a replica sharing limits
// through Redis from a provider that reports total_tokens
// 9223372036854775807 to a client with tokens_per_minute: the answer is
// relayed, the ledger row has no tokens and says upstream_protocol_error
// (the candidate row too, still a success), and the replica stays out of
// degraded mode (gateway_quota_degraded 0, /readyz quota shared); before,
// Redis's INCRBY overflowed and the replica went degraded.
func TestAbsurdUsageKeepsReplicaShared(t *testing.T) {
	const body = `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},` +
		`"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":9223372036854775807}}`
	huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(huge.Close)
	var b [6]byte
	_, _ = rand.Read(b[:])
	client := "absurd-" + hex.EncodeToString(b[:]) // its own Redis keys
	routes := `
providers:
  - name: primary
    base_url: ` + huge.URL + `/v1
    api_keys: ["${PRIMARY_KEY}"]
    max_concurrency: 8
%[3]s
models:
  - { name: gpt-4o-mini, candidates: [{ provider: primary }] }
clients:
  - { name: ` + client + `, key_sha256: "` + sha(limitedToken) + `", tokens_per_minute: 1000 }
`
	g := start(t, setup{routes: routes, db: true, env: map[string]string{"GATEWAY_REDIS_URL": "redis://127.0.0.1:6379/11"}})
	for i := range 2 {
		resp, got := g.post(t, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer "+limitedToken)
		if resp.StatusCode != http.StatusOK || string(got) != body {
			t.Fatalf("request %d: %d %s, want 200 and the provider's body", i, resp.StatusCode, got)
		}
		req, rows := g.ledger(t, resp.Header.Get("X-Request-Id"))
		if req.TotalTokens != nil || req.ErrorType == nil || *req.ErrorType != "upstream_protocol_error" || req.Status != "success" {
			t.Errorf("request %d row: tokens %v, error_type %v, status %s; want NULL tokens, upstream_protocol_error, success",
				i, req.TotalTokens, req.ErrorType, req.Status)
		}
		if len(rows) != 1 || rows[0].Status != "success" || rows[0].ErrorType != "upstream_protocol_error" ||
			!strings.Contains(rows[0].Message, "total_tokens 9223372036854775807") {
			t.Errorf("request %d candidate rows %+v", i, rows)
		}
	}
	if _, m := g.get(t, "/metrics", false); !strings.Contains(string(m), "\ngateway_quota_degraded 0\n") {
		t.Errorf("gateway_quota_degraded is not 0 after the absurd usage")
	} else if !strings.Contains(string(m), "\ngateway_quota_releases_dropped_total 0\n") {
		// Exported from start, as a counter operators alert on at zero.
		t.Errorf("gateway_quota_releases_dropped_total is not exported as 0")
	}
	if _, r := g.get(t, "/readyz", false); !strings.Contains(string(r), `"quota":"shared"`) {
		t.Errorf("/readyz %s, want quota shared", r)
	}
}
