package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/quota"
)

// The replicas phase (issue 16): what sharing limits through Redis costs.
//
// Admission: the same attempts (Acquire then Release of one target slot,
// one at a time) through a local scheduler and through one whose target
// gate is shared in Redis, in alternating blocks so drift is shared; the
// added time per attempt is the shared p50/p99 minus the local's, and the
// store's own counters give the Redis calls per grant.
//
// Throughput: three gateway processes with local gates and three sharing
// Redis (records off, so Postgres is not measured here), the same mock,
// closed loop spread over the three, in alternating rounds.
//
// Redis is the one on 127.0.0.1:6379 (scripts/redis-local.sh starts one),
// database replicasDB, emptied before and after.
const (
	replicasDB       = 13
	replicasProvider = "replicas-mock"
	replicasModel    = "bench-replicas"
)

type replicasSpec struct {
	attempts  int // per scheduler, in blocks of attemptBlock
	conns     int // closed-loop connections over the three replicas
	duration  time.Duration
	rounds    int
	redisAddr string
}

const attemptBlock = 500

type replicasResult struct {
	spec          replicasSpec
	local, shared []time.Duration // per-attempt Acquire+Release, sorted
	calls         quota.Calls     // the shared scheduler's store
	grants        int
	rounds        []replicasRound
	err           string
}

type replicasRound struct{ local, shared runResult }

// replicas runs the phase into rep.replicas.
func (b *bencher) replicas(ctx context.Context, rep *report) {
	spec := b.s.replicas
	res := &replicasResult{spec: spec}
	rep.replicas = res
	rdb := redis.NewClient(&redis.Options{Addr: spec.redisAddr, DB: replicasDB})
	defer rdb.Close()
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		res.err = "no Redis at " + spec.redisAddr + " (run scripts/redis-local.sh): " + err.Error()
		logf("replicas phase skipped: %s", res.err)
		return
	}
	defer rdb.FlushDB(context.Background())
	url := fmt.Sprintf("redis://%s/%d", spec.redisAddr, replicasDB)
	if err := res.admission(ctx, url); err != nil {
		res.err = err.Error()
		return
	}
	logf("replicas: admission added p50 %s ms, p99 %s ms per attempt; %.2f Redis calls per grant",
		ms(res.added(0.5)), ms(res.added(0.99)), res.callsPerGrant())
	if err := b.replicaThroughput(ctx, res, url); err != nil {
		res.err = err.Error()
	}
}

// admission times attempts through a local and a shared scheduler.
func (r *replicasResult) admission(ctx context.Context, url string) error {
	st, err := quota.New(quota.Options{URL: url, Replica: "bench", TTL: 30 * time.Second, Namespace: "bench"})
	if err != nil {
		return err
	}
	shared := admission.New(admission.Config{GlobalLimit: 1024, Shared: st})
	st.Start(quota.Hooks{Share: shared.SetShare, Wake: shared.WakeShared})
	defer st.Close()
	local := admission.New(admission.Config{GlobalLimit: 1024})
	req := admission.Request{Budget: time.Second, Dimensions: []admission.Dimension{
		{Gate: admission.TargetGate, ID: "bench", Label: "bench", Limit: 1024}}}
	one := func(s *admission.Scheduler) (time.Duration, error) {
		t0 := time.Now()
		l, err := s.Acquire(ctx, req)
		if err != nil {
			return 0, err
		}
		l.Release()
		return time.Since(t0), nil
	}
	for i := 0; i < r.spec.attempts; i += attemptBlock {
		for _, which := range rotate([]string{"local", "shared"}, i/attemptBlock) {
			for range attemptBlock {
				if which == "local" {
					d, err := one(local)
					if err != nil {
						return err
					}
					r.local = append(r.local, d)
				} else {
					d, err := one(shared)
					if err != nil {
						return fmt.Errorf("shared admission: %w", err)
					}
					r.shared = append(r.shared, d)
					r.grants++
				}
			}
		}
	}
	r.calls = st.Calls()
	slices.Sort(r.local)
	slices.Sort(r.shared)
	if st.Degraded() {
		return fmt.Errorf("the store went degraded during the admission run")
	}
	return nil
}

func (r *replicasResult) added(q float64) time.Duration {
	return pct(r.shared, q) - pct(r.local, q)
}

// callsPerGrant is the Redis calls a grant waits for: the takes (releases
// and renewals run off the grant path, and are batched).
func (r *replicasResult) callsPerGrant() float64 {
	if r.grants == 0 {
		return math.NaN()
	}
	return float64(r.calls.Takes) / float64(r.grants)
}

// replicaThroughput runs three local and three shared gateways against the
// mock and loads each trio in alternating rounds.
func (b *bencher) replicaThroughput(ctx context.Context, res *replicasResult, url string) error {
	routes := filepath.Join(b.st.tmp, "config", "replicas-routes.yaml") // away from the logs, as stack.go explains
	yaml := fmt.Sprintf(`providers:
  - name: %s
    base_url: %s/v1
    api_keys: ["${BENCH_UPSTREAM_KEY}"]
    max_concurrency: 512
    queue_budget: 2s
models:
  - name: %s
    candidates:
      - { provider: %s, model: %s }
clients:
  - name: bench
    key_sha256: %s
`, replicasProvider, b.st.mockURL, replicasModel, replicasProvider, benchModel, fmt.Sprintf("%x", sha256.Sum256([]byte(b.st.clientKey))))
	if err := os.WriteFile(routes, []byte(yaml), 0o600); err != nil {
		return err
	}
	trio := func(name string, extra ...string) ([]string, []*proc, error) {
		var urls []string
		var procs []*proc
		for i := range 3 {
			env := slices.Concat(cleanEnv(), []string{
				"GATEWAY_LISTEN_ADDR=" + loopbackAny, "GATEWAY_CONFIG=" + routes, "GATEWAY_LOG_LEVEL=info", // info: the "gateway listening" line gives the address
				"GATEWAY_LOG_FORMAT=json", "GATEWAY_ACCESS_LOG=false", "GATEWAY_SHUTDOWN_GRACE=2s",
				fmt.Sprintf("GATEWAY_REPLICA_ID=%s-%d", name, i), "BENCH_UPSTREAM_KEY=sk-upstream-bench",
			}, extra)
			p, err := startProc(fmt.Sprintf("gateway-%s-%d", name, i), b.st.tmp, filepath.Join(b.st.tmp, "gateway"), nil, env)
			if err != nil {
				return nil, procs, err
			}
			procs = append(procs, p)
			addr, err := boundAddr(ctx, p, gatewayListening, 30*time.Second)
			if err != nil {
				return nil, procs, err
			}
			u := "http://" + addr
			if err := waitReady(ctx, p, u+"/readyz", 30*time.Second); err != nil {
				return nil, procs, err
			}
			urls = append(urls, u)
		}
		return urls, procs, nil
	}
	localURLs, lp, err := trio("local")
	defer stopAll(lp)
	if err != nil {
		return err
	}
	sharedURLs, sp, err := trio("shared", "GATEWAY_REDIS_URL="+url)
	defer stopAll(sp)
	if err != nil {
		return err
	}
	rq := b.nonStreaming()
	rq.body = []byte(strings.Replace(string(rq.body), `"model":"`+benchModel+`"`, `"model":"`+replicasModel+`"`, 1))
	clients := []*httpClientSet{newClientSet(), newClientSet()}
	spread(ctx, clients[0], localURLs, rq, res.spec.conns, 500*time.Millisecond) // warm-up
	spread(ctx, clients[1], sharedURLs, rq, res.spec.conns, 500*time.Millisecond)
	for round := range res.spec.rounds {
		var rr replicasRound
		for _, which := range rotate([]string{"local", "shared"}, round) {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if which == "local" {
				rr.local = spread(ctx, clients[0], localURLs, rq, res.spec.conns, res.spec.duration)
			} else {
				rr.shared = spread(ctx, clients[1], sharedURLs, rq, res.spec.conns, res.spec.duration)
			}
		}
		res.rounds = append(res.rounds, rr)
		logf("replicas round %d: %.0f req/s local, %.0f req/s shared", round+1, rps(rr.local), rps(rr.shared))
	}
	return nil
}

func stopAll(ps []*proc) {
	for _, p := range ps {
		p.stop(3 * time.Second)
	}
}

// httpClientSet is one keep-alive pool per replica.
type httpClientSet struct{ byURL sync.Map }

func newClientSet() *httpClientSet { return &httpClientSet{} }

func (cs *httpClientSet) get(u string) *http.Client {
	c, _ := cs.byURL.LoadOrStore(u, newClient())
	return c.(*http.Client)
}

// spread runs a closed loop of conns connections over urls (round robin)
// and pools the samples.
func spread(ctx context.Context, cs *httpClientSet, urls []string, rq *request, conns int, d time.Duration) runResult {
	var (
		mu  sync.Mutex
		all runResult
		wg  sync.WaitGroup
	)
	start := time.Now()
	for i, u := range urls {
		n := conns / len(urls)
		if i < conns%len(urls) {
			n++
		}
		wg.Go(func() {
			r := closedLoop(ctx, cs.get(u), u+chatPath, rq, n, d, requestTimeout)
			mu.Lock()
			all.samples = append(all.samples, r.samples...)
			mu.Unlock()
		})
	}
	wg.Wait()
	all.elapsed = time.Since(start)
	return all
}

func rps(r runResult) float64 {
	ok := len(r.samples) - runErrors(r)
	return float64(ok) / r.elapsed.Seconds()
}

func (r *replicasResult) throughputRatio() (float64, []float64) {
	var per []float64
	for _, rr := range r.rounds {
		if l := rps(rr.local); l > 0 {
			per = append(per, rps(rr.shared)/l)
		}
	}
	if len(per) == 0 {
		return math.NaN(), nil
	}
	return medianFloat(per), per
}

func (r *replicasResult) write(w io.Writer) {
	fmt.Fprintf(w, "\nSeveral replicas (issue 16): admission through a scheduler whose target gate is shared in Redis against a local one, %d attempts each (Acquire then Release, one at a time, alternating blocks of %d); then three gateway processes with local gates and three sharing Redis (records off), %d closed-loop connections spread over the three, %v per run, %d rounds in a rotated order.\n\n",
		r.spec.attempts, attemptBlock, r.spec.conns, r.spec.duration, r.spec.rounds)
	if r.err != "" {
		fmt.Fprintf(w, "Not measured: %s\n", r.err)
		return
	}
	tb := &table{}
	tb.add("admission per attempt", "local", "shared (Redis)", "added")
	tb.add("p50 (ms)", fmt.Sprintf("%.3f", float64(pct(r.local, 0.5))/1e6), fmt.Sprintf("%.3f", float64(pct(r.shared, 0.5))/1e6), fmt.Sprintf("%.3f", float64(r.added(0.5))/1e6))
	tb.add("p99 (ms)", fmt.Sprintf("%.3f", float64(pct(r.local, 0.99))/1e6), fmt.Sprintf("%.3f", float64(pct(r.shared, 0.99))/1e6), fmt.Sprintf("%.3f", float64(r.added(0.99))/1e6))
	tb.add("Redis calls per grant (takes / grants)", "0", fmt.Sprintf("%.3f", r.callsPerGrant()), "")
	tb.add("Redis calls off the grant path (releases / renewals)", "–", fmt.Sprintf("%d / %d", r.calls.Releases, r.calls.Renewals), "")
	tb.write(w)
	if len(r.rounds) == 0 {
		return
	}
	fmt.Fprintln(w)
	tb = &table{}
	tb.add("three replicas, non-stream", "local gates", "shared in Redis", "shared / local")
	var lr, sr []float64
	var l50, s50, l99, s99 []time.Duration
	errs := [2]int{}
	for _, rr := range r.rounds {
		lr, sr = append(lr, rps(rr.local)), append(sr, rps(rr.shared))
		ll, ss := totals(rr.local), totals(rr.shared)
		l50, s50 = append(l50, pct(ll, 0.5)), append(s50, pct(ss, 0.5))
		l99, s99 = append(l99, pct(ll, 0.99)), append(s99, pct(ss, 0.99))
		errs[0] += runErrors(rr.local)
		errs[1] += runErrors(rr.shared)
	}
	ratio, per := r.throughputRatio()
	var rounds []string
	for _, v := range per {
		rounds = append(rounds, fmt.Sprintf("%.2f", v))
	}
	tb.add("throughput (req/s, median of rounds)", fmt.Sprintf("%.0f", medianFloat(lr)), fmt.Sprintf("%.0f", medianFloat(sr)), ratioOrNA(ratio))
	tb.add("latency p50 / p99 (ms)", ms(median(l50))+" / "+ms(median(l99)), ms(median(s50))+" / "+ms(median(s99)), "")
	tb.add("errors, all rounds", fmt.Sprint(errs[0]), fmt.Sprint(errs[1]), "")
	tb.add("throughput ratio per round", "", "", strings.Join(rounds, ", "))
	tb.write(w)
}

// totals is a run's sorted total latencies of successful requests.
func totals(r runResult) []time.Duration {
	var out []time.Duration
	for _, s := range r.samples {
		if s.err == "" {
			out = append(out, s.total)
		}
	}
	slices.Sort(out)
	return out
}

func (r *replicasResult) writeTargets(tb *table, verdict func(ok, measured bool) string) {
	c := r.callsPerGrant()
	tb.add("shared admission: Redis round trips on the grant path ≤ 1 at p50", fmt.Sprintf("%.3f per grant", c), verdict(c <= 1, r.err == "" && !math.IsNaN(c)))
}

func (r *replicasResult) errs() map[string]int {
	m := map[string]int{}
	for _, rr := range r.rounds {
		for _, run := range []runResult{rr.local, rr.shared} {
			for _, s := range run.samples {
				if s.err != "" {
					m["replicas phase: "+s.err]++
				}
			}
		}
	}
	return m
}
