package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// The response cache's storage (docs/cache.md, "Storage"): in Redis with
// GATEWAY_REDIS_URL, shared by the replicas, and a miss, never an error,
// when Redis is away or slow; in process, bounded by
// GATEWAY_CACHE_MAX_BYTES, without it.

// cachedRoutes is one provider behind model m, cached for every client.
func cachedRoutes(url string) string {
	return `
providers:
  - { name: p, base_url: "` + url + `/v1", api_keys: ["sk-replica"], max_concurrency: 64 }
models:
  - name: m
    cache: { ttl: 10m, scope: shared }
    candidates: [{ provider: p }]
`
}

// cachedChat posts the chat request with content to r; it returns the
// status and x-gateway-cache, and never fails the test itself.
func cachedChat(ctx context.Context, r *replica, content string) (int, string, []byte, error) {
	resp, body, err := replicaPost(ctx, r, "", `{"model":"m","messages":[{"role":"user","content":"`+content+`"}]}`)
	if err != nil {
		return 0, "", nil, err
	}
	return resp.StatusCode, resp.Header.Get("X-Gateway-Cache"), body, nil
}

// mustCached is cachedChat failing the test on a transport error or a
// status other than 200, and on a cache header other than want.
func mustCached(t *testing.T, r *replica, content, want string) []byte {
	t.Helper()
	code, got, body, err := cachedChat(context.Background(), r, content)
	if err != nil || code != http.StatusOK {
		t.Fatalf("%s on %s: %d %v %s", content, r.id, code, err, body)
	}
	if got != want {
		t.Fatalf("%s on %s: x-gateway-cache %q, want %q", content, r.id, got, want)
	}
	return body
}

// TestReplicasShareCache: an answer stored by one replica is served by the
// other from Redis, byte for byte, and the provider is called once; the
// entry lives in Redis under the cache's namespace with the route's TTL.
func TestReplicasShareCache(t *testing.T) {
	t.Parallel()
	red := startPrivateRedis(t)
	rdb := redisAt(t, red.url())
	mock := newPeakMock(t, mockupstream.Behavior{Identity: "p"})
	rs := startReplicas(t, 2, writeReplicaRoutes(t, cachedRoutes(mock.url)), red.url())

	first := mustCached(t, rs[0], "hello", "miss")
	// The answer is stored once it was written to the client: wait for it
	// to reach Redis before asking the other replica.
	var keys []string
	if !waitUntil(2*time.Second, func() bool {
		keys, _ = rdb.Keys(context.Background(), "llmgw:cache:*").Result()
		return len(keys) > 0
	}) {
		t.Fatalf("%s's answer never reached Redis", rs[0].id)
	}
	second := mustCached(t, rs[1], "hello", "hit")
	if string(first) != string(second) {
		t.Errorf("the hit on %s differs from the answer stored on %s:\n%s\n%s", rs[1].id, rs[0].id, second, first)
	}
	if n := mock.served.Load(); n != 1 {
		t.Errorf("the provider saw %d requests, want 1", n)
	}
	keys, err := rdb.Keys(context.Background(), "llmgw:cache:*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("cache keys in Redis: %v, %v; want one", keys, err)
	}
	if ttl, err := rdb.PTTL(context.Background(), keys[0]).Result(); err != nil || ttl <= 9*time.Minute || ttl > 10*time.Minute {
		t.Errorf("PTTL of %s = %v, %v; want the route's 10m less the test's time", keys[0], ttl, err)
	}
}

// TestCacheRedisOutage: Redis dies under load on two replicas and comes
// back empty. Every request is answered 200 throughout (a store that fails
// is a miss); once Redis is back, an answer stored on one replica is a
// hit on the other again.
func TestCacheRedisOutage(t *testing.T) {
	t.Parallel()
	red := startPrivateRedis(t)
	mock := newPeakMock(t, mockupstream.Behavior{Identity: "p", Latency: 5 * time.Millisecond})
	rs := startReplicas(t, 2, writeReplicaRoutes(t, cachedRoutes(mock.url)), red.url())

	var ok, hits, failed atomic.Int64
	failures := make(chan string, 16)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range 6 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				r := rs[(c+i)%len(rs)]
				code, cache, body, err := cachedChat(context.Background(), r, fmt.Sprintf("load %d", i%8))
				if err != nil || code != http.StatusOK {
					failed.Add(1)
					select {
					case failures <- fmt.Sprintf("%s: %d %v %s", r.id, code, err, body):
					default:
					}
					continue
				}
				ok.Add(1)
				if cache == "hit" {
					hits.Add(1)
				}
			}
		})
	}
	stopLoad := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopLoad()

	time.Sleep(500 * time.Millisecond)
	before := hits.Load()
	red.stop()
	time.Sleep(1500 * time.Millisecond)
	during := ok.Load()
	red.start(t)
	time.Sleep(time.Second)
	stopLoad()
	t.Logf("%d answered (%d hits, %d before the outage), %d failed", ok.Load(), hits.Load(), before, failed.Load())
	if failed.Load() != 0 {
		close(failures)
		for f := range failures {
			t.Error(f)
		}
		t.Fatalf("%d requests failed", failed.Load())
	}
	if before == 0 || ok.Load() <= during {
		t.Fatalf("the load did not run through (hits before the outage %d, answered by its end %d, in all %d)", before, during, ok.Load())
	}

	// Redis came back empty: a new answer is stored again and shared.
	var cache string
	if !waitUntil(5*time.Second, func() bool {
		code, _, body, err := cachedChat(context.Background(), rs[0], "after") // a miss stores
		if err != nil || code != http.StatusOK {
			t.Fatalf("after the outage on %s: %d %v %s", rs[0].id, code, err, body)
		}
		_, cache, _, _ = cachedChat(context.Background(), rs[1], "after")
		return cache == "hit"
	}) {
		t.Fatalf("after Redis came back, %s's answer is still a %q on %s", rs[0].id, cache, rs[1].id)
	}
}

// TestCacheSlowRedis: a Redis that stops answering (SIGSTOP: connections
// stay open, nothing comes back) makes an answer it holds a miss within
// the store's 20 ms, never a client error nor a wait on Redis; when it
// answers again the entry is a hit again.
func TestCacheSlowRedis(t *testing.T) {
	t.Parallel()
	red := startPrivateRedis(t)
	mock := newPeakMock(t, mockupstream.Behavior{Identity: "p"})
	rs := startReplicas(t, 1, writeReplicaRoutes(t, cachedRoutes(mock.url)), red.url())
	r := rs[0]
	mustCached(t, r, "held", "miss")
	mustCached(t, r, "held", "hit")

	if err := red.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = red.cmd.Process.Signal(syscall.SIGCONT) })
	for i := range 5 {
		start := time.Now()
		code, cache, body, err := cachedChat(context.Background(), r, "held")
		took := time.Since(start)
		if err != nil || code != http.StatusOK || cache != "miss" {
			t.Fatalf("request %d with Redis stopped: %d %q %v %s; want 200 and a miss", i, code, cache, err, body)
		}
		// The shared limits wait up to 250 ms for Redis before they go
		// degraded; the cache adds at most its 20 ms to each lookup and
		// store, never Redis's silence.
		if took > 2*time.Second {
			t.Errorf("request %d took %s with Redis stopped", i, took)
		}
		t.Logf("request %d with Redis stopped: a miss in %s", i, took.Round(time.Millisecond))
	}
	// Each lookup that gave up is counted (and each store, unless the
	// answer's write failed first).
	if n := scrapeSums(t, r.addr)["gateway_cache_store_errors_total"]; n < 5 {
		t.Errorf("gateway_cache_store_errors_total %v after 5 lookups with Redis stopped, want at least 5", n)
	}
	if err := red.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	var cache string
	if !waitUntil(5*time.Second, func() bool { _, cache, _, _ = cachedChat(context.Background(), r, "held"); return cache == "hit" }) {
		t.Fatalf("Redis answers again, but the held entry is a %q", cache)
	}
}

// TestCacheMemoryBound: without Redis the cache is in process, bounded by
// GATEWAY_CACHE_MAX_BYTES. Ten times the bound in distinct cacheable
// answers leaves gateway_cache_memory_bytes (what the bound counts)
// within it throughout, after it filled up, and every request answered.
func TestCacheMemoryBound(t *testing.T) {
	t.Parallel()
	const bound = 1 << 20
	// 700 words: answers of about 3 KiB, below the size from which
	// entries are compressed, so each costs what it weighs on the wire.
	mock := newPeakMock(t, mockupstream.Behavior{Identity: "p", Chunks: 700})
	p := startGateway(t, "GATEWAY_CONFIG="+writeReplicaRoutes(t, cachedRoutes(mock.url)),
		"GATEWAY_CACHE_MAX_BYTES=1MiB")
	r := &replica{gatewayProc: p, id: "solo", base: "http://" + p.addr}

	var offered atomic.Int64
	next := atomic.Int64{}
	worst := func() float64 {
		w := scrapeSums(t, r.addr)["gateway_cache_memory_bytes"]
		if w > bound {
			t.Errorf("gateway_cache_memory_bytes %v after %d bytes offered, want at most %d", w, offered.Load(), bound)
		}
		return w
	}
	for offered.Load() < 10*bound && !t.Failed() {
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 50 {
					i := next.Add(1)
					code, cache, body, err := cachedChat(context.Background(), r, fmt.Sprintf("distinct %d", i))
					if err != nil || code != http.StatusOK || cache != "miss" {
						t.Errorf("request %d: %d %q %v", i, code, cache, err)
						return
					}
					offered.Add(int64(len(body)))
				}
			})
		}
		wg.Wait()
		worst()
	}
	if w := worst(); w < bound/2 {
		t.Errorf("gateway_cache_memory_bytes %v after %d bytes offered: the store never filled, the bound was not tested", w, offered.Load())
	}
	t.Logf("%d requests, %d bytes of answers offered; store weight %v of %d", next.Load(), offered.Load(),
		scrapeSums(t, r.addr)["gateway_cache_memory_bytes"], bound)
}
