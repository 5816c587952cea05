package server_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// A provider stream that ends cleanly (EOF at an event boundary) before its
// format's last event is a cut, not a complete answer, whatever the route
// and whichever translator serves it (STYLE habit 6): before the commit
// point it fails over, after it the client gets its route's error frame
// and the row is stream_interrupted. The one leniency is an OpenAI chat
// stream that said why it finished (finish_reason) and then ended without
// [DONE]: its answer is whole, so it ends as a success.

// cleanEndCase is one route served by one provider format.
type cleanEndCase struct {
	name   string
	path   string
	body   string // %s: the model
	format string // the primary's format; the backup is openai unless backupFormat says
	backup string // the backup's format
	// frame is in the client's body when the gateway ended the stream with
	// its error frame; final is the client format's last event, which must
	// then be absent.
	frame, final string
}

var cleanEndCases = []cleanEndCase{
	{"chat-pass", "/v1/chat/completions", `{"model":%q,"messages":[{"role":"user","content":"hi"}],"stream":true}`,
		"openai", "openai", `"code":"stream_interrupted"`, "[DONE]"},
	{"chat-from-anthropic", "/v1/chat/completions", `{"model":%q,"messages":[{"role":"user","content":"hi"}],"stream":true}`,
		"anthropic", "openai", `"code":"stream_interrupted"`, "[DONE]"},
	{"messages-from-openai", "/v1/messages", `{"model":%q,"max_tokens":64,"messages":[{"role":"user","content":"hi"}],"stream":true}`,
		"openai", "anthropic", "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\"", "message_stop"},
	{"messages-pass", "/v1/messages", `{"model":%q,"max_tokens":64,"messages":[{"role":"user","content":"hi"}],"stream":true}`,
		"anthropic", "openai", "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\"", "message_stop"},
	{"responses-pass", "/v1/responses", `{"model":%q,"input":"hi","stream":true}`,
		"openai", "openai", "event: error\ndata: {\"type\":\"error\",\"code\":\"stream_interrupted\"", "response.completed"},
}

// cleanEndRoutes gives each case two models: NAME, whose primary commits on
// its first event (the default), and NAME-held, whose primary holds ten
// events, more than a stream cut after two chunks sends. Every model has
// providers of its own, so no case's failures cool another's.
func cleanEndRoutes() string {
	var b strings.Builder
	b.WriteString("providers:\n")
	key := map[string]string{"primary": "${PRIMARY_KEY}", "backup": "${BACKUP_KEY}"}
	url := map[string]string{"primary": "%[1]s/v1", "backup": "%[2]s/v1"}
	prov := func(name, format, mock, extra string) {
		fmt.Fprintf(&b, "  - { name: %s, format: %s, base_url: %q, api_keys: [%q], max_concurrency: 4%s }\n",
			name, format, url[mock], key[mock], extra)
	}
	for _, c := range cleanEndCases {
		prov(c.name+"-p", c.format, "primary", "")
		prov(c.name+"-held-p", c.format, "primary", ", stream_commit: { events: 10 }")
		prov(c.name+"-b", c.backup, "backup", "")
		prov(c.name+"-held-b", c.backup, "backup", "")
	}
	b.WriteString("models:\n")
	for _, c := range cleanEndCases {
		for _, m := range []string{c.name, c.name + "-held"} {
			fmt.Fprintf(&b, "  - { name: %s, candidates: [{ provider: %s-p }, { provider: %s-b, priority: 1 }] }\n", m, m, m)
		}
	}
	return b.String()
}

// postStream posts body to path and reads the answer to its end; an
// aborted stream ends with a read error, returned too.
func (g *gateway) postStream(t *testing.T, path, body string, hdr ...string) (*http.Response, []byte, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, g.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := g.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// TestCleanEndBeforeFinalEvent protects issue 12: a provider stream that
// sends two of five chunks and then ends cleanly, without its final event,
// fails over before the commit point (the client gets the backup's answer;
// rows failed/502/stream_interrupted, then success) and after it ends with
// the client route's error frame, recorded stream_interrupted, never faked
// into a clean end (end_turn plus message_stop, or a [DONE]).
func TestCleanEndBeforeFinalEvent(t *testing.T) {
	g := start(t, setup{db: true, routes: cleanEndRoutes(),
		primary: mockupstream.Behavior{Identity: "primary", Chunks: 5, EndAfterChunks: 2},
		backup:  mockupstream.Behavior{Identity: "backup", Chunks: 2}})
	for _, c := range cleanEndCases {
		t.Run(c.name+"/before commit", func(t *testing.T) {
			m := c.name + "-held"
			resp, body, err := g.postStream(t, c.path, fmt.Sprintf(c.body, m))
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d, read error %v: %s", resp.StatusCode, err, body)
			}
			if !strings.Contains(string(body), "Hello from backup") || strings.Contains(string(body), "primary") ||
				!strings.Contains(string(body), c.final) || strings.Contains(string(body), c.frame) {
				t.Fatalf("the client did not get the backup's whole answer alone:\n%s", body)
			}
			req, rows := g.ledger(t, resp.Header.Get("X-Request-Id"))
			wantRows(t, rows, "failed/502/stream_interrupted("+m+"-p)", "success/200/("+m+"-b)")
			if req.Status != "success" {
				t.Fatalf("request %s, want success", req.Status)
			}
		})
		t.Run(c.name+"/after commit", func(t *testing.T) {
			resp, body, _ := g.postStream(t, c.path, fmt.Sprintf(c.body, c.name))
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			if !strings.Contains(string(body), "Hello from primary") || !strings.Contains(string(body), c.frame) ||
				strings.Contains(string(body), c.final) || strings.Contains(string(body), "end_turn") {
				t.Fatalf("the cut stream did not end with the error frame alone:\n%s", body)
			}
			if !strings.HasSuffix(string(body), "\n\n") || strings.LastIndex(string(body), c.frame) < strings.LastIndex(string(body), "Hello") {
				t.Fatalf("the error frame is not the stream's last event:\n%s", body)
			}
			req, rows := g.ledger(t, resp.Header.Get("X-Request-Id"))
			wantRows(t, rows, "failed/502/stream_interrupted("+c.name+"-p)", "unused/0/("+c.name+"-b)")
			if req.Status != "failed" || *req.StatusCode != http.StatusBadGateway {
				t.Fatalf("request %s %d, want failed 502", req.Status, *req.StatusCode)
			}
		})
	}
}

// TestCleanEndAfterFinishReason protects the documented leniency: an OpenAI
// chat stream whose last chunk gave its finish_reason and then ended
// without the usage chunk and [DONE] is a whole answer, passed through as
// it ended or translated with its stop_reason and message_stop, and
// recorded success, whether it ends before its commit point or after.
func TestCleanEndAfterFinishReason(t *testing.T) {
	g := start(t, setup{db: true, routes: cleanEndRoutes(),
		primary: mockupstream.Behavior{Identity: "primary", Chunks: 2, EndAfterChunks: 2, Usage: true}})
	for _, c := range cleanEndCases {
		if c.format != "openai" || c.path == "/v1/responses" {
			continue // the leniency is chat's
		}
		for _, m := range []string{c.name, c.name + "-held"} {
			t.Run(m, func(t *testing.T) {
				resp, body, err := g.postStream(t, c.path, fmt.Sprintf(c.body, m))
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d, read error %v: %s", resp.StatusCode, err, body)
				}
				if !strings.Contains(string(body), "Hello from primary chunk 1 2") && !strings.Contains(string(body), `" 2"`) ||
					strings.Contains(string(body), c.frame) {
					t.Fatalf("body:\n%s", body)
				}
				if c.path == "/v1/messages" && (!strings.Contains(string(body), `"stop_reason":"end_turn"`) || !strings.Contains(string(body), "message_stop")) {
					t.Fatalf("the translated stream does not end with end_turn and message_stop:\n%s", body)
				}
				req, rows := g.ledger(t, resp.Header.Get("X-Request-Id"))
				wantRows(t, rows, "success/200/("+m+"-p)", "unused/0/("+m+"-b)")
				if req.Status != "success" {
					t.Fatalf("request %s, want success", req.Status)
				}
			})
		}
	}
}
