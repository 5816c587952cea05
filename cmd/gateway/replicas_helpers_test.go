package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmgw/gateway/internal/mockupstream"
	"github.com/llmgw/gateway/internal/pgtest"
)

// The replica tests run several gateway binaries against one Redis (DESIGN
// "Several replicas"). Each test owns one Redis database number, so tests
// running in parallel never see each other's keys.

const replicaSlotMatch = "llmgw:{q}:slots:*"

// redisDB connects to database db of the shared Redis (127.0.0.1:6379, or
// the server of GATEWAY_TEST_REDIS_URL) and empties it before and after the
// test. Under CI a missing Redis fails the test (.ci/run starts one);
// elsewhere the test is skipped with the way to get one.
func redisDB(t *testing.T, db int) (*redis.Client, string) {
	t.Helper()
	addr := "127.0.0.1:6379"
	if env := os.Getenv("GATEWAY_TEST_REDIS_URL"); env != "" {
		opts, err := redis.ParseURL(env)
		if err != nil {
			t.Fatalf("GATEWAY_TEST_REDIS_URL: %v", err)
		}
		addr = opts.Addr
	}
	url := fmt.Sprintf("redis://%s/%d", addr, db)
	return redisAt(t, url), url
}

func redisAt(t *testing.T, url string) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		msg := fmt.Sprintf("no Redis at %s (%v): run scripts/redis-local.sh start, or apt-get install -y redis-server", opts.Addr, err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = rdb.FlushDB(ctx).Err()
		_ = rdb.Close()
	})
	return rdb
}

// slotLeases is how many leases the slot sets of Redis hold, by key (SCAN,
// never KEYS, as an operator would on a live Redis).
func slotLeases(t *testing.T, rdb *redis.Client) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	out := map[string]int64{}
	iter := rdb.Scan(ctx, 0, replicaSlotMatch, 100).Iterator()
	for iter.Next(ctx) {
		n, err := rdb.ZCard(ctx, iter.Val()).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			out[iter.Val()] = n
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// noLeasesLeft waits until Redis holds no lease (releases are sent by a
// background loop, right after the response).
func noLeasesLeft(t *testing.T, rdb *redis.Client) {
	t.Helper()
	var left map[string]int64
	if !waitUntil(5*time.Second, func() bool { left = slotLeases(t, rdb); return len(left) == 0 }) {
		t.Fatalf("leases left in Redis after the load: %v", left)
	}
}

// replicaClient is one client key of a replica test's routes file.
type replicaClient struct {
	name, token string
	limits      string // extra flow-map fields, like "requests_per_minute: 5"
}

// writeReplicaRoutes writes routes with the clients appended.
func writeReplicaRoutes(t *testing.T, routes string, clients ...replicaClient) string {
	t.Helper()
	if len(clients) > 0 {
		routes += "clients:\n"
		for _, c := range clients {
			sum := sha256.Sum256([]byte(c.token))
			routes += "  - { name: " + c.name + ", key_sha256: \"" + hex.EncodeToString(sum[:]) + "\""
			if c.limits != "" {
				routes += ", " + c.limits
			}
			routes += " }\n"
		}
	}
	p := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(p, []byte(routes), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// replica is one gateway process of a fleet.
type replica struct {
	*gatewayProc
	id, base string
}

// startReplicas starts n gateways on one routes file, one Redis and one
// Postgres database (as a fleet shares them), named r0, r1, ...
func startReplicas(t *testing.T, n int, routesPath, redisURL string, env ...string) []*replica {
	t.Helper()
	dsn := pgtest.DatabaseURL(t)
	out := make([]*replica, n)
	var wg sync.WaitGroup
	for i := range out {
		id := "r" + strconv.Itoa(i)
		e := append([]string{"GATEWAY_CONFIG=" + routesPath, "GATEWAY_DATABASE_URL=" + dsn,
			"GATEWAY_ADMIN_TOKEN=" + fmtAdminToken, "GATEWAY_SPOOL_DIR=" + t.TempDir(),
			"GATEWAY_REDIS_URL=" + redisURL, "GATEWAY_REPLICA_ID=" + id}, env...)
		wg.Go(func() {
			p := startGateway(t, e...)
			out[i] = &replica{gatewayProc: p, id: id, base: "http://" + p.addr}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return out
}

// adminGET reads an admin endpoint of r into v.
func (r *replica) adminGET(t *testing.T, path string, v any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, r.base+path, nil)
	req.Header.Set("Authorization", "Bearer "+fmtAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s on %s: %v", path, r.id, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s on %s: %d %s", path, r.id, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s on %s: %v: %s", path, r.id, err, b)
	}
}

// admissionGate is one gate of GET /admin/admission.
type admissionGate struct {
	Gate          string `json:"gate"`
	ID            string `json:"id"`
	Label         string `json:"label"`
	Limit         int    `json:"limit"`
	Active        int    `json:"active"`
	Pending       int    `json:"pending"`
	SharedRefused uint64 `json:"shared_refused"`
}

type admissionView struct {
	Global  admissionGate   `json:"global"`
	Targets []admissionGate `json:"targets"`
	Pending int             `json:"pending"`
}

func (r *replica) admission(t *testing.T) admissionView {
	t.Helper()
	var v admissionView
	r.adminGET(t, "/admin/admission", &v)
	return v
}

// busy lists the gates of r's admission that hold or queue anything.
func (v admissionView) busy() []admissionGate {
	var out []admissionGate
	for _, g := range append([]admissionGate{v.Global}, v.Targets...) {
		if g.Active != 0 || g.Pending != 0 {
			out = append(out, g)
		}
	}
	return out
}

// gatesIdle waits until no gate of r holds or queues an attempt.
func (r *replica) gatesIdle(t *testing.T) {
	t.Helper()
	var v admissionView
	if !waitUntil(5*time.Second, func() bool { v = r.admission(t); return len(v.busy()) == 0 && v.Pending == 0 }) {
		t.Fatalf("replica %s: gates still busy: %+v (pending %d)", r.id, v.busy(), v.Pending)
	}
}

// readyz returns r's /readyz "quota" field.
func (r *replica) quotaState(t *testing.T) string {
	t.Helper()
	_, body := get(t, r.base+"/readyz")
	var v struct {
		Quota string `json:"quota"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("/readyz on %s: %v: %s", r.id, err, body)
	}
	return v.Quota
}

// replicaChat posts a non-stream chat request to r as the client with token
// (none when empty) and returns the response with its body read. It never
// fails the test itself, so goroutines may call it.
func replicaChat(ctx context.Context, r *replica, token, model string) (*http.Response, []byte, error) {
	return replicaPost(ctx, r, token, `{"model":"`+model+`","messages":[{"role":"user","content":"hello"}]}`)
}

// replicaPost is replicaChat with the request body given.
func replicaPost(ctx context.Context, r *replica, token, body string) (*http.Response, []byte, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.base+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, b, err
}

// peakMock is a mock upstream that counts the model requests in flight at
// once, as a provider with a concurrency limit would.
type peakMock struct {
	*mockupstream.Server
	url       string
	cur, peak atomic.Int64
	peakAt    atomic.Int64 // unix nanoseconds when the peak was last raised
	served    atomic.Int64
}

func newPeakMock(t *testing.T, b mockupstream.Behavior) *peakMock {
	t.Helper()
	m := &peakMock{Server: mockupstream.New(b)}
	ts := httptest.NewServer(m)
	t.Cleanup(ts.Close)
	m.url = ts.URL
	return m
}

func (m *peakMock) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, "/v1/") || r.Method != http.MethodPost {
		m.Server.ServeHTTP(w, r)
		return
	}
	n := m.cur.Add(1)
	for {
		p := m.peak.Load()
		if n <= p {
			break
		}
		if m.peak.CompareAndSwap(p, n) {
			m.peakAt.Store(time.Now().UnixNano())
			break
		}
	}
	// A request stops counting when its answer starts, not when the
	// handler returns: the gateway may read a whole non-stream answer, free
	// the slot and send the next request before this handler has returned,
	// which would count one request twice. The tests that measure peaks
	// send non-stream requests, whose answers are written at once.
	ew := &endWriter{ResponseWriter: w, end: sync.OnceFunc(func() { m.cur.Add(-1) })}
	defer ew.end()
	m.served.Add(1)
	m.Server.ServeHTTP(ew, r)
}

// endWriter calls end when the response starts.
type endWriter struct {
	http.ResponseWriter
	end func()
}

func (w *endWriter) WriteHeader(code int) {
	w.end()
	w.ResponseWriter.WriteHeader(code)
}

func (w *endWriter) Write(b []byte) (int, error) {
	w.end()
	return w.ResponseWriter.Write(b)
}

// Flush and Unwrap keep streaming and http.ResponseController working.
func (w *endWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *endWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// resetPeak starts a new measurement from what is in flight now.
func (m *peakMock) resetPeak() {
	m.peak.Store(m.cur.Load())
	m.peakAt.Store(time.Now().UnixNano())
}

// privateRedis is a redis-server the test starts and stops itself.
type privateRedis struct {
	bin  string
	sock string // its Unix socket: a path the test owns, so no port is picked and handed over
	cmd  *exec.Cmd
	done chan struct{}
}

// startPrivateRedis runs redis-server without persistence on a Unix socket
// of the test's own; a restart on the same socket comes back empty, as a Redis without
// persistence does after a crash.
func startPrivateRedis(t *testing.T) *privateRedis {
	t.Helper()
	r := newPrivateRedis(t)
	r.start(t)
	return r
}

// newPrivateRedis picks the socket of a redis-server that start runs later.
func newPrivateRedis(t *testing.T) *privateRedis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		bin = "/usr/bin/redis-server"
		if _, err := os.Stat(bin); err != nil {
			msg := "no redis-server binary: apt-get install -y redis-server"
			if os.Getenv("CI") != "" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
	// Not t.TempDir: a socket path must stay under the kernel's ~108 bytes.
	dir, err := os.MkdirTemp("", "redis")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	r := &privateRedis{bin: bin, sock: filepath.Join(dir, "redis.sock")}
	t.Cleanup(r.stop)
	return r
}

func (r *privateRedis) url() string { return "unix://" + r.sock + "?db=0" }

// start runs the server (again) on its socket; no TCP port.
func (r *privateRedis) start(t *testing.T) {
	t.Helper()
	r.cmd = exec.Command(r.bin, "--port", "0", "--unixsocket", r.sock,
		"--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.done = make(chan struct{})
	cmd, done := r.cmd, r.done
	go func() { _ = cmd.Wait(); close(done) }()
	up := waitUntil(5*time.Second, func() bool {
		c, err := net.DialTimeout("unix", r.sock, 100*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	if !up {
		t.Fatalf("redis-server did not listen on %s", r.sock)
	}
}

// stop kills the server (SIGKILL: an outage, not a shutdown).
func (r *privateRedis) stop() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	select {
	case <-r.done:
		return
	default:
	}
	_ = r.cmd.Process.Kill()
	<-r.done
}
