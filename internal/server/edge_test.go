package server_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/llmgw/gateway/internal/mockupstream"
)

func sha(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

// clientRoutes adds client keys to the default routes.
var clientRoutes = defaultRoutes + `
clients:
  - { name: app-1, key_sha256: "` + sha("app-1-SENTINEL-token") + `" }
  - { name: batch, key_sha256: "` + sha("batch-SENTINEL-token") + `", priority: background }
`

// TestClientKeys: with clients configured, a bad or missing key is refused
// before any admission or upstream call; a good one is served.
func TestClientKeys(t *testing.T) {
	g := start(t, setup{routes: clientRoutes})
	for _, tt := range []struct {
		name, auth string
		status     int
	}{
		{"missing", "", 401},
		{"wrong", "Bearer nope", 401},
		{"not bearer", "Basic " + "app-1-SENTINEL-token", 401},
		{"good", "Bearer app-1-SENTINEL-token", 200},
		{"good background client", "Bearer batch-SENTINEL-token", 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var hdr []string
			if tt.auth != "" {
				hdr = []string{"Authorization", tt.auth}
			}
			resp, body := g.post(t, chatBody(false), hdr...)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, body)
			}
			if tt.status == 401 {
				if e := decodeError(t, body); e.Error.Type != "authentication_error" || e.Error.Code != "invalid_api_key" {
					t.Fatalf("error %s", body)
				}
			}
			if strings.Contains(string(body), "SENTINEL") {
				t.Fatal("token echoed")
			}
		})
	}
	if n := g.Primary.Stats().Requests; n != 2 {
		t.Fatalf("primary saw %d requests, want 2 (only authenticated ones)", n)
	}
	if got := g.Primary.LastRequest().Header.Get("Authorization"); got != "Bearer "+primaryKey {
		t.Fatalf("client token reached the provider: %q", got)
	}
	if g.Scheduler.Stats().Global.Admitted != 2 {
		t.Fatal("refused requests reached admission")
	}
}

// TestSlowHeadersCutOff: a client sending headers a byte at a time is cut
// off after GATEWAY_READ_HEADER_TIMEOUT.
func TestSlowHeadersCutOff(t *testing.T) {
	g := start(t, setup{env: map[string]string{"GATEWAY_READ_HEADER_TIMEOUT": "300ms"}})
	conn, err := net.Dial("tcp", strings.TrimPrefix(g.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Slow: " + strings.Repeat("a", 100)
	begin := time.Now()
	var werr error
	for i := 0; i < len(req) && werr == nil; i++ {
		_, werr = conn.Write([]byte{req[i]})
		time.Sleep(20 * time.Millisecond)
		if time.Since(begin) > 3*time.Second {
			break
		}
	}
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, rerr := io.ReadAll(conn)
	if took := time.Since(begin); took > 2500*time.Millisecond {
		t.Fatalf("connection still open after %v (write err %v, read err %v)", took, werr, rerr)
	}
}

// TestMalformedHeader: garbage headers get a 400 from the server, not a panic.
func TestMalformedHeader(t *testing.T) {
	g := start(t, setup{})
	conn, err := net.Dial("tcp", strings.TrimPrefix(g.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nBad Header Without Colon\r\n\r\n")
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.Contains(line, " 400 ") {
		t.Fatalf("status line %q err %v", line, err)
	}
}

// TestSlowBodyCutOff: a body trickled slower than GATEWAY_READ_BODY_TIMEOUT
// is refused and never reaches a provider.
func TestSlowBodyCutOff(t *testing.T) {
	g := start(t, setup{env: map[string]string{"GATEWAY_READ_BODY_TIMEOUT": "300ms"}})
	conn, err := net.Dial("tcp", strings.TrimPrefix(g.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := chatBody(false)
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
	begin := time.Now()
	for i := 0; i < 20; i++ {
		if _, err := conn.Write([]byte{body[i]}); err != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	line, _ := bufio.NewReader(conn).ReadString('\n')
	if !strings.Contains(line, " 400 ") || time.Since(begin) > 2*time.Second {
		t.Fatalf("status line %q after %v, want a 400 soon after 300ms", line, time.Since(begin))
	}
	if g.Primary.Stats().Requests != 0 {
		t.Fatal("a half-read body reached the provider")
	}
}

// TestClientStopsReading: a client that stops reading a stream cannot pin
// the generation: the write deadline ends the attempt and frees its slots.
func TestClientStopsReading(t *testing.T) {
	g := start(t, setup{
		db:      true,
		env:     map[string]string{"GATEWAY_STREAM_WRITE_TIMEOUT": "300ms"},
		primary: mockupstream.Behavior{Chunks: 400000},
	})
	conn, err := net.Dial("tcp", strings.TrimPrefix(g.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A tiny receive buffer makes the gateway's writes block quickly.
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	body := chatBody(true)
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	eventually(t, 5*time.Second, "the primary busy with one request", func() (bool, string) {
		return g.Primary.Stats().InFlight == 1, fmt.Sprintf("%+v", g.Primary.Stats())
	})
	eventually(t, 10*time.Second, "a client that stopped reading lets go of the attempt", func() (bool, string) {
		return g.Primary.Stats().InFlight == 0 && g.Scheduler.Idle(), fmt.Sprintf("%+v", g.Primary.Stats())
	})
	if st := g.Primary.Stats(); st.Cancelled != 1 {
		t.Fatalf("upstream not cancelled: %+v", st)
	}
	db, err := pgx.Connect(context.Background(), g.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	var id string
	eventually(t, 5*time.Second, "the request row in Postgres", func() (bool, string) {
		err := db.QueryRow(context.Background(), `SELECT id::text FROM requests LIMIT 1`).Scan(&id)
		return err == nil, fmt.Sprint(err)
	})
	req, rows := g.ledger(t, id)
	wantRows(t, rows, "failed/502/client_write_timeout(primary)", "unused/0/(backup)")
	if req.Status != "failed" {
		t.Fatalf("request %+v", req)
	}
}

// TestPanicSafety: a panic before any byte gives an OpenAI-shaped 500; after
// bytes were sent it aborts the connection. Slots are released either way.
func TestPanicSafety(t *testing.T) {
	for _, point := range []string{"attempt", "streaming"} {
		t.Run(point, func(t *testing.T) {
			g := start(t, setup{})
			var once sync.Once
			g.API.SetTestHook(func(p string) {
				if p == point {
					once.Do(func() { panic("injected fault at " + p) })
				}
			})
			resp, body, rerr := g.postRaw(t, chatBody(true))
			if point == "attempt" {
				e := decodeError(t, body)
				if resp.StatusCode != 500 || e.Error.Type != "server_error" || e.Error.Code != "internal_error" {
					t.Fatalf("got %d %s", resp.StatusCode, body)
				}
				if strings.Contains(string(body), "injected") {
					t.Fatal("panic value leaked to the client")
				}
			} else {
				if rerr == nil || strings.Contains(string(body), "[DONE]") {
					t.Fatalf("broken stream ended cleanly: err %v body %s", rerr, body)
				}
			}
			g.assertIdle(t)
			if r2, _ := g.post(t, chatBody(false)); r2.StatusCode != 200 {
				t.Fatalf("gateway unhealthy after a panic: %d", r2.StatusCode)
			}
		})
	}
}

// TestOddBodies: invalid UTF-8 and NUL never cause a gateway 5xx; large
// streams and bodies pass through intact.
func TestOddBodies(t *testing.T) {
	g := start(t, setup{})
	for _, body := range []string{
		"{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}",
		"{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"user\",\"content\":\"a\x00b\"}]}",
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"nul \u0000 here"}]}`,
		"\x00\x00\x00",
	} {
		resp, b := g.post(t, body)
		if resp.StatusCode >= 500 {
			t.Fatalf("body %q: status %d %s", body, resp.StatusCode, b)
		}
	}

	g.Primary.SetBehavior(mockupstream.Behavior{Identity: "primary", Chunks: 5000})
	resp, b := g.post(t, chatBody(true))
	data := sseData(b)
	if resp.StatusCode != 200 || len(data) != 5000+2 || data[len(data)-1] != "[DONE]" {
		t.Fatalf("large stream: status %d, %d events", resp.StatusCode, len(data))
	}
	g.Primary.SetBehavior(mockupstream.Behavior{Identity: "primary", Chunks: 500000})
	resp, b = g.post(t, chatBody(false))
	if resp.StatusCode != 200 || len(b) < 3<<20 || !strings.Contains(string(b[len(b)-200:]), "usage") {
		t.Fatalf("large body: status %d, %d bytes", resp.StatusCode, len(b))
	}
}

// TestDisconnectStorm: hundreds of concurrent streams whose clients leave at
// random points leave no slot, upstream request or goroutine behind.
func TestDisconnectStorm(t *testing.T) {
	g := start(t, setup{
		env:     map[string]string{"GATEWAY_UPSTREAM_EXECUTION_GATE_LIMIT": "64", "GATEWAY_UPSTREAM_EXECUTION_GATE_QUEUE_BUDGET": "2s"},
		primary: mockupstream.Behavior{Chunks: 20, ChunkInterval: 20 * time.Millisecond},
		backup:  mockupstream.Behavior{Chunks: 20, ChunkInterval: 20 * time.Millisecond},
	})
	const n = 300
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, 1))
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.IntN(400))*time.Millisecond)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+"/v1/chat/completions", strings.NewReader(chatBody(r.IntN(4) != 0)))
			resp, err := g.client.Do(req)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}(uint64(i))
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := g.Primary.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.Backup.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	g.assertIdle(t)
	snap := g.Scheduler.Stats()
	if snap.Global.Admitted != snap.Global.Released {
		t.Fatalf("global admitted %d != released %d", snap.Global.Admitted, snap.Global.Released)
	}
	if resp, body := g.post(t, chatBody(true)); resp.StatusCode != 200 || !strings.Contains(string(body), "[DONE]") {
		t.Fatalf("after the storm: %d", resp.StatusCode)
	}
}
