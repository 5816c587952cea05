package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/mockupstream"
)

func writeRoutes(t *testing.T, upstream string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "gateway.yaml")
	src := `
providers:
  - name: primary
    base_url: ` + upstream + `/v1
    api_keys: ["${TEST_PRIMARY_KEY}"]
    max_concurrency: 4
models:
  - name: gpt-4o-mini
    candidates:
      - { provider: primary }
`
	if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCheckConfig: check-config prints the plan and fails precisely.
func TestCheckConfig(t *testing.T) {
	t.Setenv("TEST_PRIMARY_KEY", "sk-check-SENTINEL")
	t.Setenv("GATEWAY_CONFIG", writeRoutes(t, "http://127.0.0.1:9"))
	var out, errb bytes.Buffer
	if code := run([]string{"check-config"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "model gpt-4o-mini:") || !strings.Contains(out.String(), "0. primary/key0-") {
		t.Fatalf("output:\n%s", out.String())
	}
	if strings.Contains(out.String()+errb.String(), "SENTINEL") {
		t.Fatal("a key was printed")
	}

	t.Setenv("TEST_PRIMARY_KEY", "")
	out.Reset()
	errb.Reset()
	if code := run([]string{"check-config"}, &out, &errb); code == 0 || !strings.Contains(errb.String(), "api_keys[0] is empty") {
		t.Fatalf("exit %d, stderr %q: want a precise failure", code, errb.String())
	}
	t.Setenv("GATEWAY_UPSTREAM_EXECUTION_GATE_LIMIT", "many")
	errb.Reset()
	if code := run([]string{"check-config"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "GATEWAY_UPSTREAM_EXECUTION_GATE_LIMIT") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// gatewayBinary builds cmd/gateway once per test run.
func gatewayBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gateway-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "gateway")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = err
			t.Logf("%s", out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// TestSIGTERMDrainsAndExitsZero: the real binary serves, and on SIGTERM
// lets the request in flight finish and exits 0.
func TestSIGTERMDrainsAndExitsZero(t *testing.T) {
	mock := mockupstream.New(mockupstream.Behavior{Identity: "primary", Chunks: 5, ChunkInterval: 100 * time.Millisecond})
	ts := httptest.NewServer(mock)
	defer ts.Close()
	var logs bytes.Buffer
	cmd, addr := startBinary(t, []string{"GATEWAY_CONFIG=" + writeRoutes(t, ts.URL), "TEST_PRIMARY_KEY=sk-x",
		"GATEWAY_DATABASE_URL=", "DATABASE_URL=", "GATEWAY_SHUTDOWN_GRACE=5s"}, &logs)
	type result struct {
		code int
		body string
	}
	res := make(chan result, 1)
	go func() {
		resp, err := http.Post("http://"+addr+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"x"}],"stream":true}`))
		if err != nil {
			res <- result{0, err.Error()}
			return
		}
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		resp.Body.Close()
		res <- result{resp.StatusCode, b.String()}
	}()
	if !waitUntil(10*time.Second, func() bool { return mock.Stats().InFlight > 0 }) {
		t.Fatal("the request never reached the mock")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := <-res
	if r.code != 200 || !strings.Contains(r.body, "[DONE]") {
		t.Fatalf("in-flight stream: %d %q", r.code, r.body)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v\n%s", err, logs.String())
	}
	if strings.Contains(logs.String(), "sk-x") {
		t.Fatal("key in logs")
	}
}
