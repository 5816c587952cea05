package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// crossCloudRoutes: the primary mock as a bedrock provider (SigV4 with the
// sentinel credentials), the backup mock as a gemini one; br-then-gem
// tries AWS first, gem-then-br Google first.
const crossCloudRoutes = `
providers:
` + brProvider + `  - name: gem
    format: gemini
    base_url: %[2]s/v1beta
    api_keys: ["${BACKUP_KEY}"]
    max_concurrency: 8
models:
  - name: br-then-gem
    candidates:
      - { provider: br, model: "anthropic.claude-3-5-haiku-20241022-v1:0", priority: 0 }
      - { provider: gem, model: gemini-2.5-flash, priority: 1 }
  - name: gem-then-br
    candidates:
      - { provider: gem, model: gemini-2.5-flash, priority: 0 }
      - { provider: br, model: "anthropic.claude-3-5-haiku-20241022-v1:0", priority: 1 }
`

// TestCrossCloudFailover: a model whose candidates are on two clouds fails
// over between them in either order, stream and not: a Bedrock
// ThrottlingException (429) hands the request to Gemini, a Gemini 503
// UNAVAILABLE hands it to Bedrock. The client sees only the second cloud's
// 200 answer; the rows say which cloud failed with which status and which
// answered.
func TestCrossCloudFailover(t *testing.T) {
	for _, tc := range []struct {
		name, model      string
		primary, backup  mockupstream.Behavior // primary is bedrock, backup gemini
		answer, upstream string                // who answers, and the path it answered at
		rows             []string
	}{
		{"bedrock 429 to gemini", "br-then-gem",
			mockupstream.Behavior{Status: http.StatusTooManyRequests}, mockupstream.Behavior{},
			"Hello from backup", "/v1beta/models/gemini-2.5-flash:",
			[]string{"failed/429/upstream_http_error(br)", "success/200/(gem)"}},
		{"gemini 503 to bedrock", "gem-then-br",
			mockupstream.Behavior{}, mockupstream.Behavior{Status: http.StatusServiceUnavailable},
			"Hello from primary", "/model/anthropic.claude-3-5-haiku-20241022-v1:0/",
			[]string{"failed/503/upstream_http_error(gem)", "success/200/(br)"}},
	} {
		for _, stream := range []bool{false, true} {
			name := tc.name
			if stream {
				name += " stream"
			}
			t.Run(name, func(t *testing.T) {
				s := bedrockSetup(setup{primary: tc.primary, backup: tc.backup})
				s.routes = crossCloudRoutes
				g := start(t, s)
				resp, b, err := g.postStream(t, "/v1/chat/completions", brChat(tc.model, stream, ""))
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Fatalf("%d %v: %s", resp.StatusCode, err, b)
				}
				if !strings.Contains(string(b), tc.answer+" chunk 1") || !strings.Contains(string(b), `"finish_reason":"stop"`) ||
					strings.Contains(string(b), `"error"`) || strings.Contains(string(b), "mock error") {
					t.Fatalf("the answer is not %s's alone: %s", tc.answer, b)
				}
				if stream && !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
					t.Fatalf("stream not ended: %s", b)
				}
				if !strings.Contains(string(b), `"model":"`+tc.model+`"`) {
					t.Fatalf("the answer does not name the client's model: %s", b)
				}
				_, rows := g.ledger(t, resp.Header.Get("X-Request-Id"))
				wantRows(t, rows, tc.rows...)
				op := map[bool]string{false: "generateContent", true: "streamGenerateContent"}[stream]
				if strings.HasPrefix(tc.upstream, "/model/") {
					op = map[bool]string{false: "converse", true: "converse-stream"}[stream]
				}
				mock := map[bool]*mockupstream.Server{true: g.Backup, false: g.Primary}[tc.answer == "Hello from backup"]
				if _, ok := mock.LastRequestAt(tc.upstream + op); !ok {
					t.Fatalf("no request reached %s%s", tc.upstream, op)
				}
			})
		}
	}
}
