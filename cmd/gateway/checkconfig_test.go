package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// routesFor writes a one-provider routes file whose only model is named
// model, so a test can tell which file check-config read.
func routesFor(t *testing.T, model string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), model+".yaml")
	src := "providers:\n" +
		"  - name: primary\n" +
		"    base_url: http://127.0.0.1:9/v1\n" +
		"    api_keys: [\"sk-literal-SENTINEL\"]\n" +
		"    max_concurrency: 2\n" +
		"models:\n" +
		"  - name: " + model + "\n" +
		"    candidates: [{ provider: primary }]\n"
	if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCheckConfigFileArgument: `gateway check-config FILE` checks FILE,
// not the GATEWAY_CONFIG file; without an argument GATEWAY_CONFIG is read.
func TestCheckConfigFileArgument(t *testing.T) {
	fromEnv, fromArg := routesFor(t, "model-from-env"), routesFor(t, "model-from-arg")
	t.Setenv("GATEWAY_CONFIG", fromEnv)
	tests := []struct {
		args       []string
		file, want string
	}{
		{[]string{"check-config", fromArg}, fromArg, "model model-from-arg:"},
		{[]string{"check-config"}, fromEnv, "model model-from-env:"},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		if code := run(tt.args, &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d, stderr %q", tt.args, code, errb.String())
		}
		if !strings.HasPrefix(out.String(), "routes file "+tt.file+": 1 provider, 1 model, 0 clients\n") || !strings.Contains(out.String(), tt.want) {
			t.Errorf("%v: output does not describe %s:\n%s", tt.args, tt.file, out.String())
		}
		if strings.Contains(out.String()+errb.String(), "SENTINEL") {
			t.Errorf("%v: a key was printed", tt.args)
		}
	}
}

// TestCheckConfigEffectiveSettings: check-config prints what the gateway
// will use, not what the file says: a partial health block is completed
// with the defaults, a provider without one shows the defaults, and a model
// without a strategy shows the weighted default. A stream commit point, a
// deadline or hedging is printed only when it differs from the default (a
// default written out is not), a hedge delay as the duration it parses to,
// and a percentile hedge with the GATEWAY_HEDGE_MIN_DELAY floor under it.
func TestCheckConfigEffectiveSettings(t *testing.T) {
	tests := []struct {
		name, src string
		want      string // the output after the first line
	}{
		{"defaults", `providers:
  - name: primary
    base_url: http://127.0.0.1:9/v1
    api_keys: ["sk-literal-SENTINEL"]
    max_concurrency: 2
    queue_budget: 100ms
    timeouts: { first_byte: 300ms, total: 20s }
    health: { failures: 2, cooldown: 5s, max_cooldown: 1m }
  - name: backup
    base_url: http://127.0.0.1:10/v1
    api_keys: ["sk-literal-SENTINEL-2"]
    max_concurrency: 1
    queue_budget: 100ms
    timeouts: { first_byte: 1s }
    health: { auth_cooldown: 30s }
models:
  - name: fast
    strategy: least_latency
    candidates:
      - { provider: primary, priority: 0 }
      - { provider: backup, priority: 1 }
  - name: plain
    candidates: [{ provider: backup }]
`, "provider primary: http://127.0.0.1:9 keys=1 max_concurrency=2 queue_budget=100ms first_byte=300ms idle=1m0s total=20s\n" +
			"  health: failures=2 cooldown=5s max_cooldown=1m0s auth_cooldown=5m0s\n  retry: attempts=1 backoff=250ms max_wait=5s\n" +
			"provider backup: http://127.0.0.1:10 keys=1 max_concurrency=1 queue_budget=100ms first_byte=1s idle=1m0s total=10m0s\n" +
			"  health: failures=3 cooldown=5s max_cooldown=30s auth_cooldown=30s\n  retry: attempts=1 backoff=250ms max_wait=5s\n" +
			"model fast: strategy least_latency\n" +
			"  0. primary/key0-f761d17d/fast (provider primary, target 918943305b46220b, upstream model fast)\n" +
			"  1. backup/key0-a2de1413/fast (provider backup, target 69ff0b88a356b2ee, upstream model fast)\n" +
			"model plain: strategy weighted\n" +
			"  0. backup/key0-a2de1413/plain (provider backup, target 69ff0b88a356b2ee, upstream model plain)\n" +
			"clients: none, so the API accepts requests without a key\n" +
			"unpriced: backup/fast, backup/plain, primary/fast (they run; their cost is unknown)\n" +
			"hold mode: first_body\n"},
		{"formats and auth", `providers:
  - name: claude
    format: anthropic
    base_url: http://127.0.0.1:9/v1
    api_keys: ["sk-literal-SENTINEL"]
    max_concurrency: 2
    queue_budget: 100ms
  - name: azure
    base_url: http://127.0.0.1:10/openai/deployments/gpt-4o
    query: { api-version: "2024-10-21", key: "sk-literal-SENTINEL-2" }
    api_keys: ["sk-literal-SENTINEL-2"]
    auth: { header: api-key }
    max_concurrency: 1
    queue_budget: 100ms
  - name: local
    base_url: http://127.0.0.1:11/v1
    auth: none
    max_concurrency: 1
    queue_budget: 100ms
models:
  - name: m
    candidates: [{ provider: claude }]
`, "provider claude: http://127.0.0.1:9 keys=1 max_concurrency=2 queue_budget=100ms first_byte=30s idle=1m0s total=10m0s\n" +
			"  format: anthropic auth: x-api-key default_max_tokens=4096\n" +
			"  health: failures=3 cooldown=5s max_cooldown=30s auth_cooldown=5m0s\n  retry: attempts=1 backoff=250ms max_wait=5s\n" +
			"provider azure: http://127.0.0.1:10 keys=1 max_concurrency=1 queue_budget=100ms first_byte=30s idle=1m0s total=10m0s\n" +
			"  url: http://127.0.0.1:10/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21&key=REDACTED\n" +
			"  format: openai auth: header api-key\n" +
			"  health: failures=3 cooldown=5s max_cooldown=30s auth_cooldown=5m0s\n  retry: attempts=1 backoff=250ms max_wait=5s\n" +
			"provider local: http://127.0.0.1:11 keys=1 max_concurrency=1 queue_budget=100ms first_byte=30s idle=1m0s total=10m0s\n" +
			"  format: openai auth: none\n" +
			"  health: failures=3 cooldown=5s max_cooldown=30s auth_cooldown=5m0s\n  retry: attempts=1 backoff=250ms max_wait=5s\n" +
			"model m: strategy weighted\n" +
			"  0. claude/key0-f761d17d/m (provider claude, target e061aca836a29af3, upstream model m)\n" +
			"clients: none, so the API accepts requests without a key\n" +
			"unpriced: claude/m (they run; their cost is unknown)\n" +
			"hold mode: first_body\n"},
		{"commit point, deadline and hedging", `providers:
  - name: primary
    base_url: http://127.0.0.1:9/v1
    api_keys: ["sk-literal-SENTINEL"]
    max_concurrency: 2
    queue_budget: 100ms
    timeouts: { first_byte: 300ms, total: 20s }
    stream_commit: { events: 3, within: 500ms }
  - name: backup
    base_url: http://127.0.0.1:10/v1
    api_keys: ["sk-literal-SENTINEL-2"]
    max_concurrency: 1
    queue_budget: 100ms
    timeouts: { first_byte: 1s }
    stream_commit: { within: 200ms }
  - name: spare
    base_url: http://127.0.0.1:11/v1
    api_keys: ["sk-literal-SENTINEL-3"]
    max_concurrency: 1
    queue_budget: 100ms
    timeouts: { first_byte: 1s }
    stream_commit: { events: 1 }
models:
  - name: chat
    deadline: 45s
    hedge: { after: P95 }
    candidates:
      - { provider: primary, priority: 0 }
      - { provider: backup, priority: 1 }
  - name: batch
    hedge: { after: 0.8s, max: 2 }
    candidates: [{ provider: spare }]
  - name: plain
    deadline: 2m
    candidates: [{ provider: backup }]
`, "provider primary: http://127.0.0.1:9 keys=1 max_concurrency=2 queue_budget=100ms first_byte=300ms idle=1m0s total=20s\n" +
			"  health: failures=3 cooldown=5s max_cooldown=30s auth_cooldown=5m0s\n  retry: attempts=1 backoff=250ms max_wait=5s\n" +
			"  stream_commit: events=3 within=500ms\n" +
			"provider backup: http://127.0.0.1:10 keys=1 max_concurrency=1 queue_budget=100ms first_byte=1s idle=1m0s total=10m0s\n" +
			"  health: failures=3 cooldown=5s max_cooldown=30s auth_cooldown=5m0s\n  retry: attempts=1 backoff=250ms max_wait=5s\n" +
			"  stream_commit: events=1 within=200ms\n" +
			"provider spare: http://127.0.0.1:11 keys=1 max_concurrency=1 queue_budget=100ms first_byte=1s idle=1m0s total=10m0s\n" +
			"  health: failures=3 cooldown=5s max_cooldown=30s auth_cooldown=5m0s\n  retry: attempts=1 backoff=250ms max_wait=5s\n" +
			"model chat: strategy weighted, deadline 45s, hedge after p95 (at least 250ms) max 1\n" +
			"  0. primary/key0-f761d17d/chat (provider primary, target 918943305b46220b, upstream model chat)\n" +
			"  1. backup/key0-a2de1413/chat (provider backup, target 69ff0b88a356b2ee, upstream model chat)\n" +
			"model batch: strategy weighted, hedge after 800ms max 2\n" +
			"  0. spare/key0-ed1fff51/batch (provider spare, target d1a9348ca28087c0, upstream model batch)\n" +
			"model plain: strategy weighted, deadline 2m0s\n" +
			"  0. backup/key0-a2de1413/plain (provider backup, target 69ff0b88a356b2ee, upstream model plain)\n" +
			"clients: none, so the API accepts requests without a key\n" +
			"unpriced: backup/chat, backup/plain, primary/chat, spare/batch (they run; their cost is unknown)\n" +
			"hold mode: first_body\n"},
	}
	t.Setenv("GATEWAY_UPSTREAM_EXECUTION_GATE_STREAM_HOLD_MODE", "first_body")
	t.Setenv("GATEWAY_HEDGE_MIN_DELAY", "250ms")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "routes.yaml")
			if err := os.WriteFile(p, []byte(tt.src), 0o600); err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			if code := run([]string{"check-config", p}, &out, &errb); code != 0 {
				t.Fatalf("exit %d, stderr %q", code, errb.String())
			}
			first, rest, _ := strings.Cut(out.String(), "\n")
			if !strings.HasPrefix(first, "routes file "+p+": ") {
				t.Errorf("first line %q does not name %s", first, p)
			}
			if rest != tt.want {
				t.Errorf("output:\n%s\nwant:\n%s", rest, tt.want)
			}
			if strings.Contains(out.String()+errb.String(), "SENTINEL") {
				t.Error("a key was printed")
			}
		})
	}
}

// TestCheckConfigFailures: a bad file or a usage mistake exits non-zero
// with a message that says what to fix.
func TestCheckConfigFailures(t *testing.T) {
	dir := t.TempDir()
	misspelt := filepath.Join(dir, "misspelt.yaml")
	src := "providers:\n  - name: primary\n    base_url: http://127.0.0.1:9/v1\n    api_key: [\"sk-literal-SENTINEL\"]\n    max_concurrency: 2\n"
	if err := os.WriteFile(misspelt, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	emptyURL := filepath.Join(dir, "empty-url.yaml")
	src = "providers:\n  - name: primary\n    base_url: ${CHECK_CONFIG_TEST_URL}\n    api_keys: [\"sk-literal-SENTINEL\"]\n    max_concurrency: 2\n"
	if err := os.WriteFile(emptyURL, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.yaml")
	t.Setenv("GATEWAY_CONFIG", routesFor(t, "valid"))

	tests := []struct {
		name string
		args []string
		code int
		want string // exact stderr
	}{
		{"misspelt field", []string{"check-config", misspelt}, 1,
			"gateway: routes file " + misspelt + ": line 4: providers[0]: unknown field \"api_key\" (did you mean \"api_keys\"?)\n"},
		{"base_url from an unset variable", []string{"check-config", emptyURL}, 1,
			"gateway: routes file " + emptyURL + ": line 3: providers[0].base_url: \"\" is not an absolute http(s) URL (it comes from ${CHECK_CONFIG_TEST_URL}, which is not set)\n"},
		{"missing file", []string{"check-config", missing}, 1,
			"gateway: routes file: open " + missing + ": no such file or directory\n"},
		{"two files", []string{"check-config", misspelt, emptyURL}, 2, checkConfigUsage + "\n"},
		{"a flag", []string{"check-config", "-config", misspelt}, 2, checkConfigUsage + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(tt.args, &out, &errb)
			if code != tt.code || errb.String() != tt.want {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d, stderr:\n%s", code, errb.String(), tt.code, tt.want)
			}
			if strings.Contains(out.String()+errb.String(), "SENTINEL") {
				t.Error("a key was printed")
			}
		})
	}
}

// TestCheckConfigDefaultFileMissing: with neither an argument nor
// GATEWAY_CONFIG, a missing gateway.yaml says how to name the file.
func TestCheckConfigDefaultFileMissing(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("GATEWAY_CONFIG", "")
	os.Unsetenv("GATEWAY_CONFIG") // t.Setenv restores it after the test
	var out, errb bytes.Buffer
	if code := run([]string{"check-config"}, &out, &errb); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	want := "gateway: routes file: open gateway.yaml: no such file or directory\n" +
		"gateway: gateway.yaml is the default; pass the file (gateway check-config FILE) or set GATEWAY_CONFIG\n"
	if errb.String() != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", errb.String(), want)
	}
}

// TestCheckConfigDemoFile: the built binary checks examples/demo.yaml with
// no variables set, as a new user runs it first (the keys have defaults
// for the mock upstreams), and names both providers and the route.
func TestCheckConfigDemoFile(t *testing.T) {
	demo, err := filepath.Abs(filepath.Join("..", "..", "examples", "demo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(gatewayBinary(t), "check-config", demo)
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()} // no PRIMARY_API_KEY, no GATEWAY_CONFIG
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatal(err)
		}
		t.Fatalf("exit %d:\n%s", exit.ExitCode(), errb.String())
	}
	for _, want := range []string{
		"routes file " + demo + ": 2 providers, 1 model, 0 clients\n",
		"provider primary: http://127.0.0.1:9001 keys=1",
		"provider backup: http://127.0.0.1:9002 keys=1",
		"  health: failures=2 cooldown=5s max_cooldown=30s auth_cooldown=5m0s\n  retry: attempts=1 backoff=250ms max_wait=5s\nprovider backup:",
		"model gpt-4o-mini: strategy weighted\n  0. primary/key0-",
		"  1. backup/key0-",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String()+errb.String(), "sk-demo") {
		t.Error("a demo key was printed")
	}
}
