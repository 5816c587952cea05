package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/llmgw/gateway/internal/mockupstream"
	"github.com/llmgw/gateway/internal/pgtest"
)

// startBinary runs the gateway binary on a loopback port the kernel picks,
// reads the bound address from its "gateway listening" line and waits for
// /healthz. logs gets the process's stderr; read it after Wait.
func startBinary(t *testing.T, env []string, logs *bytes.Buffer) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(gatewayBinary(t), "serve")
	cmd.Env = append(append(os.Environ(), env...), "GATEWAY_LISTEN_ADDR=127.0.0.1:0", "GATEWAY_LOG_FORMAT=json")
	lines := newLogBuffer() // read while the process runs, unlike logs
	cmd.Stderr = io.MultiWriter(logs, lines)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var addr string
	if !waitUntil(10*time.Second, func() bool {
		rec, ok := lines.find("gateway listening")
		addr, _ = rec["addr"].(string)
		return ok && addr != ""
	}) {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("gateway did not log its address within 10s: %s", logs.String())
	}
	healthy := waitUntil(10*time.Second, func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return true
	})
	if !healthy {
		_ = cmd.Process.Kill()
		_ = cmd.Wait() // logs is written by Wait's stderr copier until it returns
		t.Fatalf("gateway did not answer /healthz within 10s: %s", logs.String())
	}
	return cmd, addr
}

// waitUntil polls cond until it holds or within has passed, and reports
// whether it held. The deadline only bounds a wait that never ends; callers
// fail with their own account, after stopping the gateway when that account
// includes its logs. First polls come quickly, later ones back off.
func waitUntil(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	pause := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
	return true
}

// scrapeSums reads the gateway's /metrics and sums each metric's series
// over their labels.
func scrapeSums(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		i := strings.LastIndexByte(line, ' ') // label values may hold spaces, the value cannot
		if i < 0 || strings.HasPrefix(line, "#") {
			continue
		}
		series, value := line[:i], line[i+1:]
		name, _, _ := strings.Cut(series, "{")
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			out[name] += v
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read /metrics: %v", err)
	}
	return out
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
	// Kill only once every record of the 40 requests is in the spool, or the
	// restart would have nothing to replay them from. Postgres is away, so
	// the spool is where records go: per DESIGN section 7 each of these
	// one-candidate successes records five (request pending, candidate
	// available, candidate pending, candidate success, request success). The
	// gateway exports no count of records accepted but not yet stored, so
	// that count is the target; requests_total (counted once a request's
	// final record was handed to the writer) makes a miss easier to read.
	spoolWant := float64(5 * len(ids))
	var m map[string]float64
	spooled := waitUntil(10*time.Second, func() bool {
		m = scrapeSums(t, addr)
		return m["gateway_requests_total"] == float64(len(ids)) && m["gateway_report_spooled_total"] == spoolWant &&
			m["gateway_report_queue_depth"] == 0
	})
	if !spooled {
		t.Fatalf("records not all spooled within 10s: gateway_requests_total %v of %d, gateway_report_spooled_total %v of %v, queue depth %v",
			m["gateway_requests_total"], len(ids), m["gateway_report_spooled_total"], spoolWant, m["gateway_report_queue_depth"])
	}
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
	var reqs, cands int
	var qerr error
	replayed := waitUntil(20*time.Second, func() bool {
		qerr = conn.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM requests WHERE id::text = ANY($1) AND status = 'success'),
			(SELECT count(*) FROM request_candidates WHERE request_id::text = ANY($1) AND status = 'success')`, ids).Scan(&reqs, &cands)
		return qerr == nil && reqs == len(ids) && cands == len(ids)
	})
	if !replayed {
		_ = cmd2.Process.Kill()
		_ = cmd2.Wait()
		t.Fatalf("after restart: %d/%d requests, %d candidates (err %v); logs:\n%s", reqs, len(ids), cands, qerr, logs2.String())
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
