package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/llmgw/gateway/internal/config"
	"github.com/llmgw/gateway/internal/mockupstream"
	"github.com/llmgw/gateway/internal/pgtest"
	"github.com/llmgw/gateway/internal/routes"
	"github.com/llmgw/gateway/internal/server"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// pgx's pools in other tests close their background health checks
		// asynchronously; the HTTP client's idle connections are closed
		// explicitly in each test's cleanup.
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}

// Sentinel credentials: tests assert they never appear where they must not.
const (
	primaryKey = "sk-primary-SENTINEL-4f1c"
	backupKey  = "sk-backup-SENTINEL-9a2e"
)

// defaultRoutes: primary (tier 0) then backup (tier 1) for model gpt-4o-mini.
// %[1]s and %[2]s are the mocks' base URLs; %[3]s is extra YAML for primary.
const defaultRoutes = `
providers:
  - name: primary
    base_url: %[1]s/v1
    api_keys: ["${PRIMARY_KEY}"]
    max_concurrency: 8
    timeouts: { first_byte: 2s }
%[3]s
  - name: backup
    base_url: %[2]s/v1
    api_keys: ["${BACKUP_KEY}"]
    max_concurrency: 8
models:
  - name: gpt-4o-mini
    candidates:
      - { provider: primary, model: up-primary-mini, priority: 0 }
      - { provider: backup, model: up-backup-mini, priority: 1 }
`

type setup struct {
	env          map[string]string
	routes       string // fmt template; defaultRoutes when empty
	primaryExtra string // extra YAML lines under the primary provider
	db           bool   // records on, in a fresh Postgres database
	primary      mockupstream.Behavior
	backup       mockupstream.Behavior
	log          io.Writer // the gateway's log (text, debug level); discarded when nil
	sendBuffer   int       // SO_SNDBUF of each client connection the gateway accepts; 0: the system's
	// retry keeps the providers' default last-resort retry. These tests are
	// about failover, records and health, so it is off unless asked for or
	// the routes write a retry block; the retry has its own tests
	// (internal/candidates, cmd/gateway's failover matrix).
	retry bool
	// prepare runs once the mocks listen and before the routes are read:
	// for files the routes name that need the mocks' addresses (a
	// service-account key whose token_uri is a mock's).
	prepare func(g *gateway)
}

// gateway is one real gateway on loopback between a test and two mocks.
type gateway struct {
	*server.Gateway
	URL         string
	DatabaseURL string
	Primary     *mockupstream.Server
	Backup      *mockupstream.Server
	PrimaryURL  string
	BackupURL   string
	client      *http.Client
	stop        context.CancelFunc
	runErr      chan error
}

func start(t *testing.T, s setup) *gateway {
	t.Helper()
	if s.primary.Identity == "" {
		s.primary.Identity = "primary"
	}
	if s.backup.Identity == "" {
		s.backup.Identity = "backup"
	}
	g := &gateway{Primary: mockupstream.New(s.primary), Backup: mockupstream.New(s.backup)}
	pts, bts := httptest.NewServer(g.Primary), httptest.NewServer(g.Backup)
	g.PrimaryURL, g.BackupURL = pts.URL, bts.URL
	if s.prepare != nil {
		s.prepare(g)
	}

	env := map[string]string{
		"GATEWAY_SHUTDOWN_GRACE": "5s",
		"GATEWAY_ADMIN_TOKEN":    "admin-SENTINEL-token",
		"GATEWAY_SPOOL_DIR":      t.TempDir(),
		"GATEWAY_LOG_LEVEL":      "debug",
	}
	for k, v := range s.env {
		env[k] = v
	}
	if s.db {
		g.DatabaseURL = pgtest.DatabaseURL(t)
		env["GATEWAY_DATABASE_URL"] = g.DatabaseURL
	}
	cfg, _, err := config.Load(env)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := s.routes
	if tmpl == "" {
		tmpl = defaultRoutes
	}
	yaml := fmt.Sprintf(tmpl, pts.URL, bts.URL, s.primaryExtra)
	lookup := func(k string) (string, bool) {
		switch k {
		case "PRIMARY_KEY":
			return primaryKey, true
		case "BACKUP_KEY":
			return backupKey, true
		}
		v, ok := s.env[k] // the setup's own variables (a bedrock provider's credentials)
		return v, ok
	}
	routes, err := routes.Parse([]byte(yaml), lookup)
	if err != nil {
		t.Fatalf("routes: %v\n%s", err, yaml)
	}
	if !s.retry && !strings.Contains(yaml, "retry:") {
		for i := range routes.Providers {
			routes.Providers[i].Retry.Attempts = 0
		}
	}
	var logw io.Writer = io.Discard
	if s.log != nil {
		logw = s.log
	} else if os.Getenv("GATEWAY_TEST_LOG") != "" {
		logw = os.Stderr
	}
	log := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelDebug}))
	gw, err := server.New(context.Background(), cfg, routes, log)
	if err != nil {
		t.Fatal(err)
	}
	g.Gateway = gw
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g.URL = "http://" + ln.Addr().String()
	if s.sendBuffer > 0 {
		ln = sendBufferListener{ln.(*net.TCPListener), s.sendBuffer}
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.stop = cancel
	g.runErr = make(chan error, 1)
	go func() { g.runErr <- gw.Run(ctx, ln) }()
	g.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	t.Cleanup(func() {
		g.client.CloseIdleConnections()
		g.shutdown(t)
		pts.Close()
		bts.Close()
	})
	return g
}

// sendBufferListener sets a small send buffer on each accepted connection,
// so that the gateway's writes to a client that stops reading block after a
// few KiB rather than after the megabytes the kernel would buffer.
type sendBufferListener struct {
	*net.TCPListener
	size int
}

func (l sendBufferListener) Accept() (net.Conn, error) {
	c, err := l.AcceptTCP()
	if err != nil {
		return nil, err
	}
	_ = c.SetWriteBuffer(l.size)
	return c, nil
}

// shutdown drains the gateway (as SIGTERM does) and checks that nothing was
// left holding a slot. Safe to call twice.
func (g *gateway) shutdown(t *testing.T) {
	t.Helper()
	if g.stop == nil {
		return
	}
	g.assertIdle(t)
	g.stop()
	g.stop = nil
	select {
	case err := <-g.runErr:
		if err != nil {
			t.Errorf("Run returned %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("gateway did not stop within 15s")
	}
}

// assertIdle waits until every admission gate reads idle.
func (g *gateway) assertIdle(t *testing.T) {
	t.Helper()
	eventually(t, 3*time.Second, "admission idle after the test", func() (bool, string) {
		b, _ := json.Marshal(g.Scheduler.Stats())
		return g.Scheduler.Idle(), string(b)
	})
	snap := g.Scheduler.Stats()
	if snap.Global.Active != 0 || snap.Global.Pending != 0 || snap.Pending != 0 {
		t.Fatalf("global gate not idle: %+v", snap.Global)
	}
}

func chatBody(stream bool) string {
	return fmt.Sprintf(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"stream":%v,"x_unknown":{"keep":[1,2]}}`, stream)
}

// post sends a chat request and returns the response with its body read.
func (g *gateway) post(t *testing.T, body string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	resp, b, err := g.postRaw(t, body, hdr...)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp, b
}

// postRaw is post that also returns the body's read error (an aborted
// response ends with one).
func (g *gateway) postRaw(t *testing.T, body string, hdr ...string) (*http.Response, []byte, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, g.URL+"/v1/chat/completions", strings.NewReader(body))
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

type apiError struct {
	Error struct {
		Message   string  `json:"message"`
		Type      string  `json:"type"`
		Param     *string `json:"param"`
		Code      string  `json:"code"`
		RequestID string  `json:"request_id"`
	} `json:"error"`
}

func decodeError(t *testing.T, b []byte) apiError {
	t.Helper()
	var e apiError
	if err := json.Unmarshal(b, &e); err != nil || e.Error.Type == "" {
		t.Fatalf("not an OpenAI-shaped error: %s", b)
	}
	return e
}

// get fetches a gateway path, with the admin token when admin is true.
func (g *gateway) get(t *testing.T, path string, admin bool) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, g.URL+path, nil)
	if admin {
		req.Header.Set("Authorization", "Bearer admin-SENTINEL-token")
	}
	resp, err := g.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// sseData returns the data payloads of an SSE body.
func sseData(b []byte) []string {
	var out []string
	for _, line := range bytes.Split(b, []byte("\n")) {
		if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			out = append(out, string(d))
		}
	}
	return out
}
