package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// The local cluster the benchmark asks scripts/pg-local.sh for, and the shared server
// it falls back to when the script cannot give one.
const (
	pgLocalDir    = "./data/bench-pg"
	pgLocalPort   = "25433"
	pgFallbackDSN = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	benchDatabase = "gateway_bench"
)

// stack is everything one benchmark runs: the mock upstream, the baseline proxy, the
// gateway and the gateway's Postgres, all on loopback.
type stack struct {
	tmp                           string
	mock, baseline, gateway       *proc
	mockURL, baselineURL, gateURL string // origins, http://127.0.0.1:port
	adminToken, clientKey         string
	pg                            pgInfo
	gatewayBuilt                  time.Time // mtime of the gateway binary under test
	keysLoad                      string    // BENCH_KEYS: the gateway's time to load them, from its log
}

// pgInfo says where the gateway's records go and how to account their CPU.
type pgInfo struct {
	dsn        string
	source     string // for the report: which Postgres was used
	postmaster int    // pid whose process tree is the cluster; 0 when unknown
	stopDir    string // the cluster to stop at the end, when this run started it
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// startStack starts Postgres (or finds it), the mock, the baseline and the gateway, and
// waits until each answers.
func startStack(ctx context.Context, s settings) (*stack, error) {
	tmp, err := os.MkdirTemp("", "gateway-bench-")
	if err != nil {
		return nil, err
	}
	st := &stack{tmp: tmp, adminToken: randomHex(16), clientKey: "sk-bench-" + randomHex(12)}
	ok := false
	defer func() {
		if !ok {
			st.close()
		}
	}()

	baselineBin := filepath.Join(tmp, "baselineproxy")
	build := exec.CommandContext(ctx, "go", "build", "-o", baselineBin, "./cmd/baselineproxy")
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build baselineproxy: %v\n%s", err, out)
	}
	// Copies, so that a rebuild of bin/ by someone else during the run cannot swap
	// the binaries under test halfway.
	for _, b := range []string{"gateway", "mockupstream"} {
		src := filepath.Join(s.binDir, b)
		fi, err := os.Stat(src)
		if err != nil {
			return nil, fmt.Errorf("%s missing: run `make build` first (make bench does)", src)
		}
		if b == "gateway" {
			st.gatewayBuilt = fi.ModTime()
		}
		data, err := os.ReadFile(src)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(tmp, b), data, 0o755); err != nil {
			return nil, err
		}
	}

	if s.recordsOff {
		st.pg.source = "none: records off (BENCH_RECORDS=off, a diagnostic run, not the default path)"
	} else if st.pg, err = setupPostgres(ctx); err != nil {
		return nil, err
	}
	logf("postgres: %s", st.pg.source)

	env := cleanEnv()

	st.mock, err = startProc("mockupstream", tmp, filepath.Join(tmp, "mockupstream"), []string{
		"-addr", loopbackAny, "-identity", "bench", "-latency", mockLatency.String(),
		"-chunks", strconv.Itoa(mockWords), "-shutdown-grace", "2s",
	}, env)
	if err != nil {
		return nil, err
	}
	addr, err := boundAddr(ctx, st.mock, plainListening, 10*time.Second)
	if err != nil {
		return nil, err
	}
	st.mockURL = "http://" + addr
	if err := waitReady(ctx, st.mock, st.mockURL+"/v1/models", 10*time.Second); err != nil {
		return nil, err
	}

	st.baseline, err = startProc("baselineproxy", tmp, baselineBin, []string{"-addr", loopbackAny, "-upstream", st.mockURL}, env)
	if err != nil {
		return nil, err
	}
	if addr, err = boundAddr(ctx, st.baseline, plainListening, 10*time.Second); err != nil {
		return nil, err
	}
	st.baselineURL = "http://" + addr
	if err := waitReady(ctx, st.baseline, st.baselineURL+"/v1/models", 10*time.Second); err != nil {
		return nil, err
	}

	// The routes file has a directory of its own, as in a deployment (a
	// ConfigMap's mount): the gateway watches the file's directory, and in
	// tmp every line the processes log would wake its watcher.
	routesDir := filepath.Join(tmp, "config")
	if err := os.Mkdir(routesDir, 0o755); err != nil {
		return nil, err
	}
	routes := filepath.Join(routesDir, "routes.yaml")
	if err := os.WriteFile(routes, []byte(routesYAML(st.mockURL, st.clientKey, s.hanging.rounds, s.runs("translate"))), 0o600); err != nil {
		return nil, err
	}
	genv := slices.Concat(env, []string{
		"GATEWAY_LISTEN_ADDR=" + loopbackAny,
		"GATEWAY_CONFIG=" + routes,
		"GATEWAY_DATABASE_URL=" + st.pg.dsn, // empty: records off
		"GATEWAY_SPOOL_DIR=" + filepath.Join(tmp, "spool"),
		"GATEWAY_LOG_FORMAT=json",
		"GATEWAY_ADMIN_TOKEN=" + st.adminToken,
		"GATEWAY_PPROF=true",
		"GATEWAY_SHUTDOWN_GRACE=5s",
		"BENCH_UPSTREAM_KEY=sk-upstream-" + randomHex(8),
	})
	if s.apiKeys > 0 {
		if s.recordsOff {
			return nil, errors.New("BENCH_KEYS needs Postgres: not with BENCH_RECORDS=off")
		}
		if err := insertKeys(ctx, filepath.Join(tmp, "gateway"), genv, st.pg.dsn, s.apiKeys); err != nil {
			return nil, err
		}
	}
	st.gateway, err = startProc("gateway", tmp, filepath.Join(tmp, "gateway"), nil, genv)
	if err != nil {
		return nil, err
	}
	if addr, err = boundAddr(ctx, st.gateway, gatewayListening, 30*time.Second); err != nil {
		return nil, err
	}
	st.gateURL = "http://" + addr
	if err := waitReady(ctx, st.gateway, st.gateURL+"/readyz", 30*time.Second); err != nil {
		return nil, err
	}
	if s.apiKeys > 0 {
		if st.keysLoad, err = waitKeysLoaded(ctx, st.gateway, 60*time.Second); err != nil {
			return nil, err
		}
		logf("gateway: %d API keys loaded from Postgres in %s", s.apiKeys, st.keysLoad)
	}
	ok = true
	return st, nil
}

// routesYAML is the gateway's routes file: one provider (the mock) behind one model,
// and one client key, so every request is authenticated, planned, admitted, recorded
// and observed as in a real deployment. max_concurrency covers the open-streams run.
// The hanging-primary, tail-rescue and translation phases' providers and models
// follow (hangingRoutes, tailRoutes, translateRoutes); the other phases never plan
// them.
func routesYAML(mockURL, clientKey string, hangingRounds int, translate bool) string {
	sum := sha256.Sum256([]byte(clientKey))
	providers, models := hangingRoutes(mockURL, hangingRounds)
	tp, tm := tailRoutes(mockURL)
	providers, models = providers+tp, models+tm
	if translate {
		// Only when the phase runs, so that BENCH_BIN can point at a gateway
		// built before the anthropic format existed.
		xp, xm := translateRoutes(mockURL)
		providers, models = providers+xp, models+xm
	}
	return fmt.Sprintf(`%s    forward_headers: [X-Mock-Chunks, X-Mock-Chunk-Interval] # the phases shape the mock's streams
%smodels:
%s%sclients:
  - { name: bench, key_sha256: "%s", priority: interactive }
`, mockProviderYAML(mockURL), providers, benchModelYAML(), models, hex.EncodeToString(sum[:]))
}

// mockProviderYAML is the providers section's head: the mock, the first
// provider of every gateway the benchmark starts.
func mockProviderYAML(mockURL string) string {
	return fmt.Sprintf(`providers:
  - name: mock
    format: openai
    base_url: %s/v1
    api_keys: ["${BENCH_UPSTREAM_KEY}"]
    max_concurrency: 4096
    timeouts: { connect: 2s, first_byte: 10s, total: 60s }
`, mockURL)
}

// benchModelYAML is the benchmark's model on the mock, a models list item.
func benchModelYAML() string {
	return fmt.Sprintf(`  - name: %s
    candidates:
      - { provider: mock, model: %s }
`, benchModel, benchModel)
}

// phaseRoutes is the routes file of a phase's own gateway: the mock as the
// one provider and the bench model, then extra: more models (list items),
// and then other sections (clients: ...). Without clients the API is open.
func phaseRoutes(mockURL, extra string) string {
	return mockProviderYAML(mockURL) + "models:\n" + benchModelYAML() + extra
}

// startPhaseGateway starts a gateway of a phase's own, named name, with
// env, and waits until it serves; it returns the process and its base URL
// (http://127.0.0.1:port). The caller stops the process; on an error it is
// already stopped.
func (st *stack) startPhaseGateway(ctx context.Context, name string, env []string) (*proc, string, error) {
	return st.startGatewayBin(ctx, name, filepath.Join(st.tmp, "gateway"), env)
}

// startGatewayBin is startPhaseGateway for the gateway binary bin (the
// tracing phase also runs a build from before tracing).
func (st *stack) startGatewayBin(ctx context.Context, name, bin string, env []string) (*proc, string, error) {
	gw, err := startProc(name, st.tmp, bin, nil, env)
	if err != nil {
		return nil, "", err
	}
	addr, err := boundAddr(ctx, gw, gatewayListening, 30*time.Second)
	if err == nil {
		err = waitReady(ctx, gw, "http://"+addr+"/readyz", 30*time.Second)
	}
	if err != nil {
		gw.stop(5 * time.Second)
		return nil, "", err
	}
	return gw, "http://" + addr, nil
}

// cleanEnv is the environment without any gateway settings or proxies of the caller,
// so that only what the benchmark sets applies.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		ku := strings.ToUpper(k)
		if strings.HasPrefix(ku, "GATEWAY_") || strings.HasPrefix(ku, "AETHER_GATEWAY_") ||
			ku == "DATABASE_URL" || strings.HasSuffix(ku, "_PROXY") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// close stops the servers (gracefully, then hard), the cluster this run started, and
// removes the temp dir unless BENCH_KEEP is set.
func (st *stack) close() {
	st.gateway.stop(10 * time.Second)
	st.baseline.stop(5 * time.Second)
	st.mock.stop(5 * time.Second)
	if st.pg.stopDir != "" {
		cmd := exec.Command("bash", "scripts/pg-local.sh", "stop", st.pg.stopDir)
		if out, err := cmd.CombinedOutput(); err != nil {
			logf("pg-local stop: %v\n%s", err, out)
		}
	}
	if os.Getenv("BENCH_KEEP") != "" {
		logf("kept %s (process logs, routes file)", st.tmp)
		return
	}
	_ = os.RemoveAll(st.tmp)
}

// setupPostgres gets a Postgres (the local cluster, else the shared server on 5432)
// and a fresh, empty database for this run.
func setupPostgres(ctx context.Context) (pgInfo, error) {
	var info pgInfo
	err := errors.New("BENCH_PG=shared")
	if os.Getenv("BENCH_PG") != "shared" {
		info, err = pgLocal(ctx)
	}
	if err != nil {
		logf("scripts/pg-local.sh not usable (%v); falling back to %s", err, pgFallbackDSN)
		info = pgInfo{dsn: pgFallbackDSN, source: "shared server 127.0.0.1:5432 (fallback)"}
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, info.dsn)
	if err != nil {
		return info, fmt.Errorf("postgres %s: %w", info.source, err)
	}
	defer conn.Close(context.Background())
	for _, q := range []string{
		"DROP DATABASE IF EXISTS " + benchDatabase + " WITH (FORCE)",
		"CREATE DATABASE " + benchDatabase,
	} {
		if _, err := conn.Exec(cctx, q); err != nil {
			return info, fmt.Errorf("postgres %s: %s: %w", info.source, q, err)
		}
	}
	u, err := url.Parse(info.dsn)
	if err != nil {
		return info, err
	}
	u.Path = "/" + benchDatabase
	info.dsn = u.String()
	info.source += ", fresh database " + benchDatabase
	return info, nil
}

// pgLocal starts (or finds running) the benchmark's own cluster with the repository's
// script, which prints the DSN on its last line.
func pgLocal(ctx context.Context) (pgInfo, error) {
	pidFile := filepath.Join(pgLocalDir, "postmaster.pid")
	_, statErr := os.Stat(pidFile)
	wasRunning := statErr == nil
	cctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, "bash", "scripts/pg-local.sh", "start", pgLocalDir, pgLocalPort)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return pgInfo{}, errors.Join(err, errors.New(lastLines(stderr.String(), 5)))
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	dsn := strings.TrimSpace(lines[len(lines)-1])
	if !strings.HasPrefix(dsn, "postgres://") {
		return pgInfo{}, fmt.Errorf("unexpected output %q", dsn)
	}
	info := pgInfo{dsn: dsn, source: "scripts/pg-local.sh cluster " + pgLocalDir + " on port " + pgLocalPort}
	if !wasRunning {
		info.stopDir = pgLocalDir
	}
	if f, err := os.Open(pidFile); err == nil {
		sc := bufio.NewScanner(f)
		if sc.Scan() {
			info.postmaster, _ = strconv.Atoi(strings.TrimSpace(sc.Text()))
		}
		f.Close()
	}
	return info, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// pgCPU is the cluster's CPU so far, or 0 when its process is unknown.
func (st *stack) pgCPU() time.Duration {
	if st.pg.postmaster == 0 {
		return 0
	}
	d, err := childrenCPU(st.pg.postmaster)
	if err != nil {
		return 0
	}
	return d
}

// gatewayMetrics scrapes /metrics and sums each metric over its labels.
func (st *stack) gatewayMetrics(ctx context.Context) (map[string]float64, error) {
	out := map[string]float64{}
	err := st.scrapeMetrics(ctx, func(name, _ string, v float64) { out[name] += v })
	return out, err
}

// gatewaySeries scrapes /metrics and sums metric name over the series whose labels
// include every one of labels (each written key="value").
func (st *stack) gatewaySeries(ctx context.Context, name string, labels ...string) (float64, error) {
	var sum float64
	err := st.scrapeMetrics(ctx, func(n, ls string, v float64) {
		if n != name {
			return
		}
		for _, l := range labels {
			if !strings.Contains(ls, l) {
				return
			}
		}
		sum += v
	})
	return sum, err
}

// scrapeMetrics reads /metrics and calls fn for every sample with its metric name,
// its label set as written ("{...}" or ""), and its value.
func (st *stack) scrapeMetrics(ctx context.Context, fn func(name, labels string, v float64)) error {
	return scrapeMetricsAt(ctx, st.gateURL, fn)
}

// scrapeMetricsAt is scrapeMetrics for the gateway at base.
func scrapeMetricsAt(ctx context.Context, base string, fn func(name, labels string, v float64)) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	// Uncompressed: the runs' CPU includes the polls for their records
	// (waitRecordsWritten), and gzip made each poll cost the gateway
	// several times what Prometheus' scrape every 15 s costs per second.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		name, labels := line[:i], ""
		if j := strings.IndexByte(name, '{'); j >= 0 {
			name, labels = name[:j], name[j:]
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			fn(name, labels, v)
		}
	}
	return sc.Err()
}

// waitRecordsWritten waits until the gateway's report queue is empty and the written
// count (which includes records replayed from the spool) has not moved for three
// polls, so the CPU of writing a run's records is charged to that run. Bounded by
// timeout.
func (st *stack) waitRecordsWritten(ctx context.Context, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	last, still := -1.0, 0
	for time.Now().Before(deadline) && ctx.Err() == nil {
		m, err := st.gatewayMetrics(ctx)
		if err == nil {
			w := m["gateway_report_written_total"]
			if m["gateway_report_queue_depth"] == 0 && w == last {
				still++
			} else {
				still = 0
			}
			if still >= 3 {
				return
			}
			last = w
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// insertKeys migrates the bench database with the gateway's own `migrate up` and
// inserts n api_keys rows in one statement, shaped like real keys (a team of 50,
// two model globs, a rate limit, a budget on every tenth, a little metadata).
// The digests hash a per-run salt: random-looking, distinct, and none is the
// load driver's key (a routes-file client's).
func insertKeys(ctx context.Context, gateway string, env []string, dsn string, n int) error {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	mig := exec.CommandContext(cctx, gateway, "migrate", "up")
	mig.Env = env
	if out, err := mig.CombinedOutput(); err != nil {
		return fmt.Errorf("BENCH_KEYS: gateway migrate up: %v\n%s", err, out)
	}
	conn, err := pgx.Connect(cctx, dsn)
	if err != nil {
		return fmt.Errorf("BENCH_KEYS: %w", err)
	}
	defer conn.Close(context.Background())
	start := time.Now()
	if _, err := conn.Exec(cctx, `INSERT INTO api_keys (id, name, team, key_sha256, hint, models,
		requests_per_minute, budget_usd, budget_per, metadata)
	SELECT md5($1 || '-id-' || i)::uuid, 'bench-key-' || i, 'team-' || i % 50,
		encode(sha256(convert_to($1 || '-secret-' || i, 'UTF8')), 'hex'), 'sk-gw-AbCd…wxYz',
		'{gpt-4o*,claude-*}', 600, CASE WHEN i % 10 = 0 THEN 20 END, CASE WHEN i % 10 = 0 THEN 'day' END,
		'{"owner": "bench"}'
	FROM generate_series(1, $2::int) AS i`, randomHex(16), n); err != nil {
		return fmt.Errorf("BENCH_KEYS: insert %d keys: %w", n, err)
	}
	logf("postgres: %d api_keys rows inserted in %v", n, time.Since(start).Round(time.Millisecond))
	return nil
}

// keysLoadedLine is the gateway's log line once its first load from Postgres is in.
var keysLoadedLine = regexp.MustCompile(`"msg":"api keys: loaded from Postgres".*?"keys":(\d+).*?"took_ms":(\d+)`)

// waitKeysLoaded waits for the gateway's log to say the keys are loaded and returns
// the time it says the load took.
func waitKeysLoaded(ctx context.Context, p *proc, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(p.logPath)
		if err != nil {
			return "", err
		}
		if m := keysLoadedLine.FindSubmatch(b); m != nil {
			return fmt.Sprintf("%s ms (%s keys)", m[2], m[1]), nil
		}
		select {
		case <-p.done:
			return "", fmt.Errorf("gateway exited before loading the keys:\n%s", p.logTail(20))
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return "", fmt.Errorf("gateway did not log its keys loaded within %v:\n%s", timeout, p.logTail(20))
}
