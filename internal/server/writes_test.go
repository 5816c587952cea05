package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/llmgw/gateway/internal/admission"
)

// stallRoutes: one provider whose one key admits four attempts at a time,
// with a short total; %[3]s is its timeouts line, so the total or the
// request's deadline can be the bound. The stalled requests' X-Mock-Chunks
// reaches the mock only because forward_headers allows it. The backup serves no model: the
// queued client below can only be served by the key the stalled ones hold.
const stallRoutes = `
providers:
  - name: primary
    base_url: %[1]s/v1
    api_keys: ["${PRIMARY_KEY}"]
    max_concurrency: 4
    queue_budget: 6s
    forward_headers: [X-Mock-Chunks]
%[3]s
  - name: backup
    base_url: %[2]s/v1
    api_keys: ["${BACKUP_KEY}"]
    max_concurrency: 1
models:
  - name: gpt-4o-mini
    candidates:
      - { provider: primary }
`

// stallToken is the client key of the subtest with a token rate.
const stallToken = "sk-client-stall"

func stallClients() string {
	sum := sha256.Sum256([]byte(stallToken))
	return "clients:\n  - { name: counted, key_sha256: \"" + hex.EncodeToString(sum[:]) + "\", tokens_per_minute: 1000000000 }\n"
}

// stopReading sends a chat request on a raw connection that never reads its
// answer. Its receive buffer is small, so the gateway's writes block as soon
// as the socket buffers are full; the provider is asked for an answer much
// larger than those (X-Mock-Chunks).
func stopReading(t *testing.T, g *gateway, stream bool, id string, hdr ...string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(g.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if err := conn.(*net.TCPConn).SetReadBuffer(4096); err != nil {
		t.Fatal(err)
	}
	body := chatBody(stream)
	extra := ""
	for i := 0; i+1 < len(hdr); i += 2 {
		extra += hdr[i] + ": " + hdr[i+1] + "\r\n"
	}
	if _, err := fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+
		"X-Request-Id: %s\r\nX-Mock-Chunks: 400000\r\n%sContent-Length: %d\r\n\r\n%s", id, extra, len(body), body); err != nil {
		t.Fatal(err)
	}
	return conn
}

// keyActive is how many attempts hold a slot of the primary's key.
func keyActive(g *gateway) int {
	n := 0
	for _, gs := range g.Scheduler.Stats().Targets {
		if gs.Gate == admission.TargetGate && gs.Label == "primary" {
			n += gs.Active
		}
	}
	return n
}

// TestClientsThatStopReadingFreeTheKey protects a key's slots from clients
// that stop reading their answers: four of them on a key of
// max_concurrency 4 must not starve the others past what bounds their
// attempts (the provider's timeouts.total, or the request's deadline),
// whatever GATEWAY_STREAM_WRITE_TIMEOUT (60s here) says, on every relay
// path (a stream, a body, a body held for a client's token count). The
// queued client is served within that bound plus 1s; each stalled request
// is recorded failed with client_write_timeout and the gates read zero.
func TestClientsThatStopReadingFreeTheKey(t *testing.T) {
	const bound = 1500 * time.Millisecond
	for _, tt := range []struct {
		name     string
		stream   bool
		timeouts string   // the primary's timeouts line
		hdr      []string // the stalled requests' extra headers
		counted  bool     // the client has a token rate
	}{
		{name: "stream total", stream: true, timeouts: "    timeouts: { total: 1500ms }"},
		{name: "body total", timeouts: "    timeouts: { total: 1500ms }"},
		{name: "counted body total", timeouts: "    timeouts: { total: 1500ms }", counted: true},
		{name: "stream deadline", stream: true, timeouts: "    timeouts: { total: 60s }",
			hdr: []string{"X-Gateway-Deadline", "1500ms"}},
		{name: "body deadline", timeouts: "    timeouts: { total: 60s }",
			hdr: []string{"X-Gateway-Deadline", "1500ms"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			routes := stallRoutes
			var auth []string
			if tt.counted {
				routes += stallClients()
				auth = []string{"Authorization", "Bearer " + stallToken}
			}
			g := start(t, setup{db: true, routes: routes, primaryExtra: tt.timeouts, sendBuffer: 4096,
				env: map[string]string{"GATEWAY_STREAM_WRITE_TIMEOUT": "60s"}})
			begin := time.Now()
			for i := range 4 {
				stopReading(t, g, tt.stream, fmt.Sprintf("stall-%d", i), append(auth, tt.hdr...)...)
			}
			// All four hold their slots (the upstream may be done already:
			// a counted body is read ahead of the client).
			eventually(t, 5*time.Second, "four requests on the key", func() (bool, string) {
				return keyActive(g) == 4, fmt.Sprint(keyActive(g), " active")
			})

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+"/v1/chat/completions",
				strings.NewReader(chatBody(tt.stream)))
			for i := 0; i+1 < len(auth); i += 2 {
				req.Header.Set(auth[i], auth[i+1])
			}
			resp, err := g.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			took := time.Since(begin)
			if resp.StatusCode != http.StatusOK || took > bound+time.Second {
				t.Fatalf("queued client answered %d after %v, want 200 within %v", resp.StatusCode, took, bound+time.Second)
			}
			t.Logf("queued client served %v after the stalled ones started", took.Round(time.Millisecond))

			g.assertIdle(t)
			for _, gs := range g.Scheduler.Stats().Targets {
				if gs.Active != 0 || gs.Pending != 0 {
					t.Fatalf("gate %s not idle: %+v", gs.Gate, gs)
				}
			}
			db, err := pgx.Connect(context.Background(), g.DatabaseURL)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close(context.Background())
			for i := range 4 {
				var id string
				eventually(t, 5*time.Second, "the stalled request's row in Postgres", func() (bool, string) {
					err := db.QueryRow(context.Background(), `SELECT id::text FROM requests WHERE client_request_id = $1`,
						fmt.Sprintf("stall-%d", i)).Scan(&id)
					return err == nil, fmt.Sprint(err)
				})
				r, rows := g.ledger(t, id)
				wantRows(t, rows, "failed/502/client_write_timeout(primary)")
				if r.Status != "failed" || r.ErrorType == nil || *r.ErrorType != "client_write_timeout" {
					t.Fatalf("stalled request %d: %+v", i, r)
				}
			}
		})
	}
}
