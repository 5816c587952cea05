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

// The tests of several replicas sharing limits through Redis (DESIGN 10.4,
// "Several replicas"): real gateway binaries, a real Redis, a real Postgres
// and mock upstreams over loopback. Each test owns one Redis database (8 to
// 15 of the shared Redis) or a private redis-server.

// providerRoutes is one provider p at url behind model m.
func providerRoutes(url, settings string) string {
	return `
providers:
  - { name: p, base_url: "` + url + `/v1", api_keys: ["sk-replica"], ` + settings + ` }
models:
  - name: m
    candidates: [{ provider: p }]
`
}

// TestReplicasShareProviderLimit: three replicas, one provider with
// max_concurrency 4 and 60 requests spread over the replicas: the provider
// never sees more than 4 at once (and the fleet does use them), every
// request is served within the queue budget, and afterwards no gate holds
// or queues anything and Redis holds no lease.
func TestReplicasShareProviderLimit(t *testing.T) {
	t.Parallel()
	rdb, url := redisDB(t, 9)
	mock := newPeakMock(t, mockupstream.Behavior{Identity: "p", Latency: 300 * time.Millisecond})
	rs := startReplicas(t, 3, writeReplicaRoutes(t, providerRoutes(mock.url, "max_concurrency: 4, queue_budget: 30s")), url,
		"GATEWAY_REDIS_LEASE_TTL=3s")
	for _, r := range rs {
		if q := r.quotaState(t); q != "shared" {
			t.Fatalf("replica %s /readyz quota %q, want shared", r.id, q)
		}
		// Each counts the others at its next heartbeat (a third of the TTL).
		if !waitUntil(2*time.Second, func() bool { return scrapeSums(t, r.addr)["gateway_quota_replicas"] == 3 }) {
			t.Errorf("replica %s: gateway_quota_replicas %v, want 3", r.id, scrapeSums(t, r.addr)["gateway_quota_replicas"])
		}
	}

	const n = 60
	var wg sync.WaitGroup
	var maxLeases atomic.Int64 // leases Redis held at once, sampled
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			var sum int64
			for _, v := range slotLeases(t, rdb) {
				sum = max(sum, v)
			}
			if sum > maxLeases.Load() {
				maxLeases.Store(sum)
			}
		}
	}()
	failures := make(chan string, n)
	start := time.Now()
	for i := range n {
		wg.Go(func() {
			r := rs[i%len(rs)]
			resp, body, err := replicaChat(context.Background(), r, "", "m")
			if err != nil {
				failures <- fmt.Sprintf("%s: %v", r.id, err)
			} else if resp.StatusCode != http.StatusOK {
				failures <- fmt.Sprintf("%s: %d %s", r.id, resp.StatusCode, body)
			}
		})
	}
	wg.Wait()
	close(stop)
	<-sampled
	took := time.Since(start)
	close(failures)
	for f := range failures {
		t.Errorf("request failed: %s", f)
	}
	peak := mock.peak.Load()
	t.Logf("60 requests over 3 replicas in %s; peak at the provider %d, leases in one slot set at most %d",
		took.Round(time.Millisecond), peak, maxLeases.Load())
	if peak > 4 {
		t.Errorf("the provider saw %d requests at once, want at most its max_concurrency 4", peak)
	}
	if peak < 3 {
		t.Errorf("the provider saw at most %d requests at once: the replicas do not use the limit they share", peak)
	}
	if got := mock.served.Load(); got != n {
		t.Errorf("the provider served %d requests, want %d", got, n)
	}
	if l := maxLeases.Load(); l > 4 {
		t.Errorf("a slot set held %d leases at once, want at most 4", l)
	}
	var refused uint64
	for _, r := range rs {
		r.gatesIdle(t)
		for _, g := range r.admission(t).Targets {
			refused += g.SharedRefused
		}
	}
	if refused == 0 {
		t.Error("no replica counts a grant the shared store refused (shared_refused), yet 60 requests met a limit of 4")
	}
	noLeasesLeft(t, rdb)
}

// TestReplicaDeathFreesSlotsWithinTTL: a replica killed with SIGKILL while
// it holds every slot of a provider cannot give them back; they expire with
// their lease (GATEWAY_REDIS_LEASE_TTL), and a request queued on another
// replica is admitted within the TTL and a second of the kill.
func TestReplicaDeathFreesSlotsWithinTTL(t *testing.T) {
	t.Parallel()
	const ttl = 3 * time.Second
	rdb, url := redisDB(t, 10)
	mock := newPeakMock(t, mockupstream.Behavior{Identity: "p", Latency: 20 * time.Second})
	rs := startReplicas(t, 2, writeReplicaRoutes(t, providerRoutes(mock.url, "max_concurrency: 4, queue_budget: 30s")), url,
		"GATEWAY_REDIS_LEASE_TTL="+ttl.String())
	a, b := rs[0], rs[1]

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 4 {
		go func() { _, _, _ = replicaChat(ctx, a, "", "m") }()
	}
	if !waitUntil(5*time.Second, func() bool { return mock.cur.Load() == 4 }) {
		t.Fatalf("replica %s holds %d requests at the provider, want 4", a.id, mock.cur.Load())
	}
	var leases int64
	for _, v := range slotLeases(t, rdb) {
		leases = max(leases, v)
	}
	if leases != 4 {
		t.Fatalf("Redis holds %d leases of the provider, want the 4 of replica %s", leases, a.id)
	}
	// From now on the provider answers at once.
	mock.SetBehavior(mockupstream.Behavior{Identity: "p"})

	type result struct {
		code int
		body string
		err  error
		at   time.Time
	}
	res := make(chan result, 1)
	go func() {
		resp, body, err := replicaChat(ctx, b, "", "m")
		r := result{body: string(body), err: err, at: time.Now()}
		if resp != nil {
			r.code = resp.StatusCode
		}
		res <- r
	}()
	// B's request waits in its queue: Redis says every slot is held.
	if !waitUntil(5*time.Second, func() bool {
		for _, g := range b.admission(t).Targets {
			if g.Pending == 1 && g.SharedRefused > 0 {
				return true
			}
		}
		return false
	}) {
		t.Fatalf("replica %s never queued its request behind the shared limit: %+v", b.id, b.admission(t))
	}
	time.Sleep(200 * time.Millisecond) // still queued: nothing frees a slot but A's death
	select {
	case r := <-res:
		t.Fatalf("replica %s served its request while %s held every slot: %d %s %v", b.id, a.id, r.code, r.body, r.err)
	default:
	}

	killed := time.Now()
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-res:
	case <-time.After(ttl + 10*time.Second):
		t.Fatalf("replica %s's request still queued %s after %s died", b.id, ttl+10*time.Second, a.id)
	}
	waited := r.at.Sub(killed)
	t.Logf("replica %s admitted its request %s after %s was killed (lease TTL %s)", b.id, waited.Round(time.Millisecond), a.id, ttl)
	if r.err != nil || r.code != http.StatusOK {
		t.Fatalf("the queued request: %d %s %v", r.code, r.body, r.err)
	}
	if waited > ttl+time.Second {
		t.Errorf("admitted %s after the kill, want within the lease TTL %s and a second", waited, ttl)
	}
	b.gatesIdle(t)
	// A's leases expire with the TTL, B's are released.
	noLeasesLeft(t, rdb)
	// B stops counting A among the replicas alive (what its share would
	// divide by in an outage) once A's heartbeat is older than the TTL.
	if !waitUntil(ttl+2*time.Second-time.Since(killed), func() bool { return scrapeSums(t, b.addr)["gateway_quota_replicas"] == 1 }) {
		t.Errorf("replica %s: gateway_quota_replicas %v %s after %s died, want 1", b.id,
			scrapeSums(t, b.addr)["gateway_quota_replicas"], time.Since(killed).Round(time.Millisecond), a.id)
	}
}

// TestLongRequestKeepsItsSlot: a request that runs longer than the lease
// TTL keeps its slot (the replica renews it), so another replica waits for
// it to end instead of taking the slot when the first lease would have
// expired.
func TestLongRequestKeepsItsSlot(t *testing.T) {
	t.Parallel()
	const ttl, hold = 3 * time.Second, 4 * time.Second
	rdb, url := redisDB(t, 8)
	mock := newPeakMock(t, mockupstream.Behavior{Identity: "p", Latency: hold})
	rs := startReplicas(t, 2, writeReplicaRoutes(t, providerRoutes(mock.url, "max_concurrency: 1, queue_budget: 30s")), url,
		"GATEWAY_REDIS_LEASE_TTL="+ttl.String())
	var wg sync.WaitGroup
	done := make([]time.Time, 2)
	codes := make([]int, 2)
	start := time.Now()
	for i, r := range rs {
		if i == 1 {
			// The second starts once the first holds the slot.
			if !waitUntil(5*time.Second, func() bool { return mock.cur.Load() == 1 }) {
				t.Fatal("the first request never reached the provider")
			}
		}
		wg.Go(func() {
			resp, body, err := replicaChat(context.Background(), r, "", "m")
			done[i] = time.Now()
			if err != nil {
				t.Errorf("request on %s: %v", r.id, err)
				return
			}
			if codes[i] = resp.StatusCode; codes[i] != http.StatusOK {
				t.Errorf("request on %s: %d %s", r.id, resp.StatusCode, body)
			}
		})
	}
	wg.Wait()
	t.Logf("requests of %s each on one slot with a lease TTL of %s: done after %s and %s", hold, ttl,
		done[0].Sub(start).Round(time.Millisecond), done[1].Sub(start).Round(time.Millisecond))
	if p := mock.peak.Load(); p != 1 {
		t.Errorf("the provider saw %d requests at once, want 1: a lease expired under a running request", p)
	}
	if d := done[1].Sub(start); d < 2*hold {
		t.Errorf("the second request was done %s after the first started, want after both ran in turn (%s)", d, 2*hold)
	}
	noLeasesLeft(t, rdb)
}

// TestSharedHealth: replica A cools a target that failed; replica B learns
// it through Redis within a second and sends nothing more to it.
func TestSharedHealth(t *testing.T) {
	t.Parallel()
	// A Redis of its own: pub/sub channels span every database of a
	// server, and the test counts the subscribers of the cooldown channel.
	red := startPrivateRedis(t)
	rdb, url := redisAt(t, red.url()), red.url()
	bad := newPeakMock(t, mockupstream.Behavior{Identity: "bad", Status: http.StatusInternalServerError})
	good := newPeakMock(t, mockupstream.Behavior{Identity: "good"})
	routes := `
providers:
  - { name: bad, base_url: "` + bad.url + `/v1", api_keys: ["sk-replica"], max_concurrency: 4, health: { failures: 1, cooldown: 30s } }
  - { name: good, base_url: "` + good.url + `/v1", api_keys: ["sk-replica"], max_concurrency: 4 }
models:
  - name: m
    candidates: [{ provider: bad }, { provider: good, priority: 1 }]
`
	rs := startReplicas(t, 2, writeReplicaRoutes(t, routes), url)
	a, b := rs[0], rs[1]
	// Cooldown messages are not replayed: a replica learns only those sent
	// once it listens, which may be a moment after it serves.
	var subs map[string]int64
	// Channels carry the database number (pub/sub ignores databases).
	healthChannel := fmt.Sprintf("llmgw:{q}:db%d:health", rdb.Options().DB)
	if !waitUntil(2*time.Second, func() bool {
		subs, _ = rdb.PubSubNumSub(context.Background(), healthChannel).Result()
		return subs[healthChannel] == 2
	}) {
		t.Fatalf("subscribers of the cooldown channel: %v, want both replicas", subs)
	}

	resp, body, err := replicaChat(context.Background(), a, "", "m")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("request on %s: %v %v %s", a.id, err, resp, body)
	}
	sent := time.Now()
	if got := bad.served.Load(); got != 1 {
		t.Fatalf("the failing provider got %d requests, want 1 (then failover)", got)
	}
	if st := badState(t, a); st != "cooling" {
		t.Fatalf("replica %s: the failed target is %q, want cooling", a.id, st)
	}
	var st string
	if !waitUntil(time.Second, func() bool { st = badState(t, b); return st == "cooling" }) {
		t.Fatalf("replica %s: the target %s cooled is %q a second later, want cooling", b.id, a.id, st)
	}
	t.Logf("replica %s saw the cooldown %s after %s's response", b.id, time.Since(sent).Round(time.Millisecond), a.id)
	for range 3 {
		resp, body, err := replicaChat(context.Background(), b, "", "m")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("request on %s: %v %v %s", b.id, err, resp, body)
		}
	}
	if got := bad.served.Load(); got != 1 {
		t.Errorf("the cooled provider got %d requests, want still 1: replica %s sent to it", got, b.id)
	}
	if got := good.served.Load(); got != 4 {
		t.Errorf("the healthy provider served %d requests, want 4", got)
	}
}

// badState is the state of provider bad's target in r's /admin/health.
func badState(t *testing.T, r *replica) string {
	t.Helper()
	var targets []struct {
		Provider string `json:"provider"`
		State    string `json:"state"`
	}
	r.adminGET(t, "/admin/health", &targets)
	for _, tg := range targets {
		if tg.Provider == "bad" {
			return tg.State
		}
	}
	t.Fatalf("replica %s: no target of provider bad in /admin/health: %+v", r.id, targets)
	return ""
}
