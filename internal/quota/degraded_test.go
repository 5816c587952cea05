package quota

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/admission"
)

// privateRedis runs a redis-server of the test's own, so the test can stop
// and start it; it is stopped at the end. It listens on a Unix socket the
// test owns: no port is picked here and handed over.
type privateRedis struct {
	t    *testing.T
	sock string
	cmd  *exec.Cmd
}

func startPrivateRedis(t *testing.T) *privateRedis {
	t.Helper()
	redisURL(t) // the same skip/fail rule as the shared Redis
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server is not installed (apt-get install -y redis-server)")
		}
		t.Skip("redis-server is not installed: apt-get install -y redis-server")
	}
	// Not t.TempDir: a socket path must stay under the kernel's ~108 bytes.
	dir, err := os.MkdirTemp("", "redis")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	p := &privateRedis{t: t, sock: filepath.Join(dir, "redis.sock")}
	p.start()
	t.Cleanup(p.stop)
	return p
}

func (p *privateRedis) url() string { return "unix://" + p.sock + "?db=0" }

func (p *privateRedis) start() {
	p.t.Helper()
	p.cmd = exec.Command("redis-server", "--port", "0", "--unixsocket", p.sock,
		"--save", "", "--appendonly", "no", "--dir", p.t.TempDir())
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.DialTimeout("unix", p.sock, 100*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("private redis did not start: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *privateRedis) stop() {
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
		p.cmd = nil
	}
}

// TestOutageAndRecovery: Redis going away turns the store degraded (the
// scheduler gets its share), takes keep working locally, and when Redis is
// back the slots held meanwhile are registered exactly once before the
// store leaves degraded mode; given back, nothing is left.
func TestOutageAndRecovery(t *testing.T) {
	rs := startPrivateRedis(t)
	var share atomic.Int64
	share.Store(-1)
	a := newStore(t, rs.url(), namespace(t), "a", 3*time.Second)
	b := newStore(t, rs.url(), a.n.prefix[:len(a.n.prefix)-len(":{q}:")], "b", 3*time.Second)
	a.Start(Hooks{Share: func(n int) { share.Store(int64(n)) }})
	b.Start(Hooks{})
	defer b.Close()
	defer a.Close()
	ns := a.n.prefix[:len(a.n.prefix)-len(":{q}:")]
	ctx := context.Background()
	waitFor(t, "a sees both replicas", func() bool { a.renew(ctx); return a.Replicas() == 2 })

	before, _, err := a.Take(ctx, slots(4, "t"))
	if err != nil || before == 0 {
		t.Fatalf("take before the outage: %v", err)
	}
	rs.stop()
	h, _, err := a.Take(ctx, slots(4, "t"))
	if !errors.Is(err, admission.ErrSharedUnavailable) || h == 0 {
		t.Fatalf("take during the outage: h=%d err=%v, want a local handle and ErrSharedUnavailable", h, err)
	}
	if !a.Degraded() || share.Load() != 2 {
		t.Fatalf("degraded=%v share=%d, want true and 2 (replicas last seen)", a.Degraded(), share.Load())
	}
	during, _, _ := a.Take(ctx, slots(4, "t"))
	rs.start() // empty: it kept nothing
	waitFor(t, "redis answering", func() bool { return !a.Degraded() })
	// Back, but the replica keeps its share until the others re-registered.
	if share.Load() == 0 {
		t.Fatal("whole limits at once after recovery; the share must hold while others re-register")
	}
	waitFor(t, "recovery", func() bool { return share.Load() == 0 })
	got := slotCounts(t, rs.url(), ns)
	if n := got[ns+":{q}:slots:"+admission.TargetGate+":t"]; n != 3 {
		t.Fatalf("after recovery redis holds %d slots, want the 3 a holds (once each): %v", n, got)
	}
	a.Give(before)
	a.Give(h)
	a.Give(during)
	a.settled()
	if got := slotCounts(t, rs.url(), ns); len(got) != 0 {
		t.Fatalf("leases left after release: %v", got)
	}
}

// TestStartDegraded: a replica started while Redis is away works, degraded,
// with a share of 1 (it has seen no other replica).
func TestStartDegraded(t *testing.T) {
	redisURL(t)
	// A socket in a directory nobody created: nothing can ever answer there.
	away := "unix://" + filepath.Join(t.TempDir(), "none", "redis.sock") + "?db=0"
	var share atomic.Int64
	share.Store(-1)
	a := newStore(t, away, namespace(t), "a", 3*time.Second)
	a.Start(Hooks{Share: func(n int) { share.Store(int64(n)) }})
	defer a.Close()
	if !a.Degraded() || share.Load() != 1 {
		t.Fatalf("degraded=%v share=%d, want true and 1", a.Degraded(), share.Load())
	}
	h, _, err := a.Take(context.Background(), slots(2, "t"))
	if h == 0 || !errors.Is(err, admission.ErrSharedUnavailable) {
		t.Fatalf("take: h=%d err=%v", h, err)
	}
	a.Give(h)
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReleasesBoundedDuringOutage: slots given back while Redis is away
// pile up only to the bound; the rest are dropped and counted. Once Redis
// answers, the kept ones are removed at once and the dropped ones expire
// by their TTL, so nothing is left either way.
func TestReleasesBoundedDuringOutage(t *testing.T) {
	rs := startPrivateRedis(t)
	a := newStore(t, rs.url(), namespace(t), "a", 2*time.Second)
	a.maxReleases = 3
	a.Start(Hooks{})
	defer a.Close()
	ns := a.n.prefix[:len(a.n.prefix)-len(":{q}:")]
	ctx := context.Background()
	var hs []admission.SharedHandle
	for range 10 {
		h, _, err := a.Take(ctx, slots(100, "t"))
		if err != nil || h == 0 {
			t.Fatalf("take before the outage: %v", err)
		}
		hs = append(hs, h)
	}
	rs.stop()
	a.renew(ctx) // notices the outage
	if !a.Degraded() {
		t.Fatal("not degraded with Redis stopped")
	}
	for _, h := range hs {
		a.Give(h)
	}
	a.mu.Lock()
	pending := len(a.releases)
	a.mu.Unlock()
	if pending != 3 || a.DroppedReleases() != 7 {
		t.Fatalf("%d releases pending, %d dropped; want 3 and 7", pending, a.DroppedReleases())
	}
	rs.start() // empty, as after a restart: the leases are gone either way
	waitFor(t, "redis answering", func() bool { return !a.Degraded() })
	a.settled()
	if got := slotCounts(t, rs.url(), ns); len(got) != 0 {
		t.Fatalf("leases left after recovery: %v", got)
	}
}
