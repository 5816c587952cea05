package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// TestRedisOutageKeepsServing: Redis dies under steady load and comes back
// empty (no persistence) on the same port. No request fails; while Redis is
// away each of the two replicas enforces its share (4/2), so the provider
// never sees more than its limit once the slots held from before the
// outage ended (until then at most limit - share more), and only between Redis's return and the
// replicas registering their slots again does it see more (by at most what
// was held); /readyz and gateway_quota_degraded say degraded during the
// outage and shared after; and once the load stops no gate holds anything
// and Redis holds no lease.
func TestRedisOutageKeepsServing(t *testing.T) {
	t.Parallel()
	red := startPrivateRedis(t)
	rdb := redisAt(t, red.url())
	mock := newPeakMock(t, mockupstream.Behavior{Identity: "p", Latency: 50 * time.Millisecond})
	rs := startReplicas(t, 2, writeReplicaRoutes(t, providerRoutes(mock.url, "max_concurrency: 4, queue_budget: 30s")), red.url(),
		"GATEWAY_REDIS_LEASE_TTL=3s")
	// The share divides by the replicas last seen alive: both must have
	// seen each other before the outage.
	for _, r := range rs {
		if !waitUntil(5*time.Second, func() bool { return scrapeSums(t, r.addr)["gateway_quota_replicas"] == 2 }) {
			t.Fatalf("replica %s: gateway_quota_replicas %v, want 2", r.id, scrapeSums(t, r.addr)["gateway_quota_replicas"])
		}
	}

	var ok, failed atomic.Int64
	failures := make(chan string, 16)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range 12 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				r := rs[(c+i)%len(rs)]
				resp, body, err := replicaChat(context.Background(), r, "", "m")
				switch {
				case err != nil:
					failed.Add(1)
					select {
					case failures <- fmt.Sprintf("%s: %v", r.id, err):
					default:
					}
				case resp.StatusCode != http.StatusOK:
					failed.Add(1)
					select {
					case failures <- fmt.Sprintf("%s: %d %s", r.id, resp.StatusCode, body):
					default:
					}
				default:
					ok.Add(1)
				}
			}
		})
	}
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()

	// The provider's peak is measured per phase, against the limit in
	// each (docs/architecture.md, "Several replicas"): while Redis answers,
	// during the outage (each replica its share, "limits are never
	// lifted"), and while Redis comes back empty: a replica back from
	// degraded mode keeps its share until the others have registered the
	// slots they hold.
	const limit = 4
	phase := func(name string, allowed int64, run func()) {
		t.Helper()
		mock.resetPeak()
		from := time.Now()
		run()
		p := mock.peak.Load()
		t.Logf("%s (%s): peak at the provider %d, reached after %s; %d served, %d failed so far", name,
			time.Since(from).Round(time.Millisecond), p, time.Unix(0, mock.peakAt.Load()).Sub(from).Round(time.Millisecond),
			ok.Load(), failed.Load())
		if p > allowed {
			t.Errorf("%s: the provider saw %d requests at once, want at most %d", name, p, allowed)
		}
	}
	states := func(want string, metric float64) {
		t.Helper()
		for _, r := range rs {
			var q string
			var m float64
			if !waitUntil(3*time.Second, func() bool {
				q, m = r.quotaState(t), scrapeSums(t, r.addr)["gateway_quota_degraded"]
				return q == want && m == metric
			}) {
				t.Errorf("replica %s: /readyz quota %q and gateway_quota_degraded %v, want %q and %v", r.id, q, m, want, metric)
			}
		}
	}
	// A phase starts after the overshoot allowed in the one before has
	// drained: longer than one request at the provider.
	const drain = 200 * time.Millisecond

	phase("shared", limit, func() {
		time.Sleep(time.Second)
		states("shared", 0)
	})
	// A replica holding more than its share when Redis goes away keeps
	// those slots to their end while the others fill their shares: until
	// they end, the fleet may hold up to limit - share more than the limit
	// (docs/architecture.md, "Degraded mode"). Once they ended, the shares
	// hold the limit.
	phase("outage, slots from before ending", limit+(limit-limit/2), func() {
		red.stop()
		states("degraded", 1)
		time.Sleep(drain)
	})
	phase("outage", limit, func() { time.Sleep(3 * time.Second) })
	phase("Redis back, slots registering", limit, func() {
		red.start(t)
		states("shared", 0)
		time.Sleep(drain)
	})
	phase("shared again", limit, func() { time.Sleep(3 * time.Second) })
	close(stop)
	wg.Wait()

	close(failures)
	for f := range failures {
		t.Errorf("request failed: %s", f)
	}
	if n := failed.Load(); n > 0 {
		t.Errorf("%d requests failed, want none", n)
	}
	if ok.Load() < 50 {
		t.Errorf("only %d requests served in about 7s of load by 12 clients", ok.Load())
	}
	for _, r := range rs {
		r.gatesIdle(t)
	}
	noLeasesLeft(t, rdb)
}

// TestReplicaStartsDuringOutage: a replica whose Redis does not answer at
// start starts all the same, degraded, and serves; once Redis answers it
// shares its limits, and its slots are in Redis while held and gone after.
func TestReplicaStartsDuringOutage(t *testing.T) {
	t.Parallel()
	red := newPrivateRedis(t) // not running yet
	mock := newPeakMock(t, mockupstream.Behavior{Identity: "p", Latency: 300 * time.Millisecond})
	r := startReplicas(t, 1, writeReplicaRoutes(t, providerRoutes(mock.url, "max_concurrency: 4")), red.url(),
		"GATEWAY_REDIS_LEASE_TTL=3s")[0]
	if q, m := r.quotaState(t), scrapeSums(t, r.addr)["gateway_quota_degraded"]; q != "degraded" || m != 1 {
		t.Fatalf("started without Redis: /readyz quota %q, gateway_quota_degraded %v, want degraded and 1", q, m)
	}
	if code, _ := get(t, r.base+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz %d without Redis, want 200: a degraded replica still serves", code)
	}
	if resp, body, err := replicaChat(context.Background(), r, "", "m"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("request without Redis: %v %v %s", err, resp, body)
	}

	red.start(t)
	var q string
	if !waitUntil(3*time.Second, func() bool { q = r.quotaState(t); return q == "shared" }) {
		t.Fatalf("Redis answers again but /readyz quota is %q, want shared", q)
	}
	if m := scrapeSums(t, r.addr)["gateway_quota_degraded"]; m != 0 {
		t.Errorf("gateway_quota_degraded %v with Redis back, want 0", m)
	}
	rdb := redisAt(t, red.url())
	res := make(chan error, 1)
	go func() {
		resp, body, err := replicaChat(context.Background(), r, "", "m")
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("%d %s", resp.StatusCode, body)
		}
		res <- err
	}()
	var leases map[string]int64
	if !waitUntil(2*time.Second, func() bool { leases = slotLeases(t, rdb); return len(leases) == 1 }) {
		t.Errorf("a request in flight holds no lease in Redis: %v", leases)
	}
	if err := <-res; err != nil {
		t.Fatalf("request with Redis back: %v", err)
	}
	r.gatesIdle(t)
	noLeasesLeft(t, rdb)
}
