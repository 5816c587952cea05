package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/llmgw/gateway/internal/mockupstream"
	"github.com/llmgw/gateway/internal/pgtest"
)

// startBinary runs the gateway binary and waits for /healthz.
func startBinary(t *testing.T, env []string, logs *bytes.Buffer) (*exec.Cmd, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(gatewayBinary(t), "serve")
	cmd.Env = append(append(os.Environ(), env...), "GATEWAY_LISTEN_ADDR="+addr, "GATEWAY_LOG_FORMAT=json")
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
			return cmd, addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway did not start: %s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCrashWhileSpooling: a gateway killed (SIGKILL) while Postgres is away
// replays its spool on restart; a torn final record is skipped, not fatal.
func TestCrashWhileSpooling(t *testing.T) {
	dsn := pgtest.DatabaseURL(t)
	proxy := pgtest.NewProxy(t, pgtest.TargetOf(t, dsn)) // down: Postgres unreachable
	mock := httptest.NewServer(mockupstream.New(mockupstream.Behavior{Identity: "primary"}))
	defer mock.Close()
	spool := t.TempDir()
	env := []string{"GATEWAY_CONFIG=" + writeRoutes(t, mock.URL), "TEST_PRIMARY_KEY=sk-x",
		"GATEWAY_DATABASE_URL=" + pgtest.ViaProxy(t, dsn, proxy), "GATEWAY_SPOOL_DIR=" + spool}

	var logs1 bytes.Buffer
	cmd, addr := startBinary(t, env, &logs1)
	var ids []string
	for i := 0; i < 40; i++ {
		resp, err := http.Post("http://"+addr+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"x"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d while Postgres is down", i, resp.StatusCode)
		}
		ids = append(ids, resp.Header.Get("X-Request-Id"))
	}
	time.Sleep(600 * time.Millisecond) // several flush intervals: the records reached the spool
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	segs, _ := filepath.Glob(filepath.Join(spool, "*.spool"))
	if len(segs) == 0 {
		t.Fatalf("nothing spooled; logs:\n%s", logs1.String())
	}
	// A crash mid-append leaves a torn record at the end of the last segment.
	f, err := os.OpenFile(segs[len(segs)-1], os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.Write([]byte{0, 0, 1, 0, 0xde, 0xad})
	f.Close()

	proxy.Up()
	var logs2 bytes.Buffer
	cmd2, _ := startBinary(t, env, &logs2)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(20 * time.Second)
	for {
		var reqs, cands int
		err := conn.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM requests WHERE id::text = ANY($1) AND status = 'success'),
			(SELECT count(*) FROM request_candidates WHERE request_id::text = ANY($1) AND status = 'success')`, ids).Scan(&reqs, &cands)
		if err == nil && reqs == len(ids) && cands == len(ids) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after restart: %d/%d requests, %d candidates (err %v); logs:\n%s", reqs, len(ids), cands, err, logs2.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := cmd2.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd2.Wait(); err != nil {
		t.Fatalf("restarted gateway exit: %v\n%s", err, logs2.String())
	}
	if !strings.Contains(strings.ToLower(logs2.String()), "torn") && !strings.Contains(strings.ToLower(logs2.String()), "corrupt") {
		t.Errorf("the torn tail was not reported in the log:\n%s", logs2.String())
	}
}
