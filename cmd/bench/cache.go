package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"time"
)

// The cache phase (issue 33): what the response cache gives and costs. A
// gateway of the phase's own (in-process store, records off) serves an
// uncached model and a cached one. Each round runs, in a rotated order:
// hits (the same request, stored before the round, to the cached model);
// the bare proxy to the mock with X-Mock-Latency: 0s, an upstream that
// answers at once, the fastest a proxy that calls one can be; misses
// (every request a distinct body, to the cached model); and the same
// distinct bodies to the uncached model. Figures: a hit's total p50 over
// the bare proxy's (median over rounds), and the gateway's CPU per miss
// over its CPU per uncached request (over all rounds).
type cacheSpec struct {
	rate     int
	duration time.Duration
	rounds   int
}

// cachedModel and uncachedModel are routes of the same candidate that
// differ only in the cache block: each renames the model for the provider
// (benchModel), so neither pays for a rewrite the other does not.
const (
	cachedModel   = "bench-cached"
	uncachedModel = "bench-uncached"
)

// cacheRuns are the runs of a round, by name.
// direct (the instant mock with no proxy) is the floor a hit is read
// against; it is in the table, not in a target. "misses" is the misses
// and the uncached requests, alternating (cacheBlocks).
var cacheRuns = []string{"hit", "baseline", "direct", "miss", "uncached"}

// cacheRoundRuns is the order a round rotates: the misses and uncached
// requests run as one item.
var cacheRoundRuns = []string{"hit", "baseline", "direct", "misses"}

// cacheBlocks is how many blocks of misses, and as many of uncached
// requests, a round alternates: the gateway's CPU per request drifted by
// up to a fifth over a phase on this VM, and one run of each per round
// put a round's drift on one side only.
const cacheBlocks = 5

type cacheRun struct {
	run runResult
	cpu time.Duration // the gateway's, over the run; 0 for the baseline
}

type cacheResult struct {
	spec   cacheSpec
	rounds []map[string]cacheRun
	err    string
}

// cache runs the phase into rep.cache.
func (b *bencher) cache(ctx context.Context, rep *report) {
	res := &cacheResult{spec: b.s.cachePhase}
	rep.cache = res
	if err := b.runCache(ctx, res); err != nil {
		res.err = err.Error()
		logf("cache phase: %v", err)
		return
	}
	logf("cache: hit p50 %.2fx the bare proxy's to an instant upstream; CPU per miss %.3fx per uncached request", res.hitRatio(), res.missCPURatio())
}

func (b *bencher) runCache(ctx context.Context, res *cacheResult) error {
	spec := res.spec
	routes := filepath.Join(b.st.tmp, "config", "cache-routes.yaml") // away from the logs, as stack.go explains
	cached := fmt.Sprintf(`  - name: %s
    cache: { ttl: 1h, scope: shared }
    candidates:
      - { provider: mock, model: %s }
  - name: %s
    candidates:
      - { provider: mock, model: %s }
`, cachedModel, benchModel, uncachedModel, benchModel)
	if err := os.WriteFile(routes, []byte(phaseRoutes(b.st.mockURL, cached)), 0o600); err != nil {
		return err
	}
	env := slices.Concat(cleanEnv(), []string{
		"GATEWAY_LISTEN_ADDR=" + loopbackAny,
		"GATEWAY_CONFIG=" + routes,
		"GATEWAY_SPOOL_DIR=" + filepath.Join(b.st.tmp, "spool-cache"),
		"GATEWAY_LOG_FORMAT=json",
		"GATEWAY_SHUTDOWN_GRACE=2s",
		"BENCH_UPSTREAM_KEY=sk-upstream-" + randomHex(8),
	})
	gw, base, err := b.st.startPhaseGateway(ctx, "gateway-cache", env)
	if err != nil {
		return err
	}
	defer gw.stop(5 * time.Second)

	hit := b.nonStreaming()
	hit.body = bytes.Replace(hit.body, []byte(`"model":"`+benchModel+`"`), []byte(`"model":"`+cachedModel+`"`), 1)
	miss := &request{body: bytes.Replace(hit.body, []byte("one short sentence."), []byte("one short sentence. #N#"), 1), header: hit.header}
	uncached := &request{body: bytes.Replace(miss.body, []byte(cachedModel), []byte(uncachedModel), 1), header: hit.header}
	instant := b.nonStreaming()
	instant.header = b.header(map[string]string{"X-Mock-Latency": "0s"})

	// hit, baseline and direct are timed with the lean client (leanclient.go).
	leanHit, err := newLeanClient(base+chatPath, hit)
	if err != nil {
		return err
	}
	defer leanHit.close()
	leanBase, err := newLeanClient(b.urls[baseline]+chatPath, instant)
	if err != nil {
		return err
	}
	defer leanBase.close()
	leanDirect, err := newLeanClient(b.urls[direct]+chatPath, instant)
	if err != nil {
		return err
	}
	defer leanDirect.close()
	plain := newClient()
	defer plain.CloseIdleConnections()
	distinct := &http.Client{Transport: &distinctBodies{next: plain.Transport}}
	run := openLoopSpec{rate: spec.rate, duration: spec.duration, maxInFlight: maxInFlight, timeout: requestTimeout}
	warm := run
	warm.duration = time.Second
	for name, w := range map[string]func() runResult{
		"hit":      func() runResult { return openLoopWith(ctx, warm, leanHit.do) },
		"miss":     func() runResult { return openLoop(ctx, distinct, base+chatPath, miss, warm) },
		"uncached": func() runResult { return openLoop(ctx, distinct, base+chatPath, uncached, warm) },
		"baseline": func() runResult { return openLoopWith(ctx, warm, leanBase.do) },
		"direct":   func() runResult { return openLoopWith(ctx, warm, leanDirect.do) },
	} {
		if r := w(); runErrors(r) > 0 {
			return fmt.Errorf("%s warm-up: %d of %d requests failed (first: %s)", name, runErrors(r), len(r.samples), firstErr(r))
		}
	}
	if err := expectCacheHeader(ctx, plain, base+chatPath, hit, "hit"); err != nil {
		return err
	}
	for round := range spec.rounds {
		rr := map[string]cacheRun{}
		for _, item := range rotate(cacheRoundRuns, round) {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if item == "misses" {
				block := run
				block.duration = run.duration / cacheBlocks
				for i := range 2 * cacheBlocks {
					name, rq := "miss", miss
					if (i+round)%2 == 1 {
						name, rq = "uncached", uncached
					}
					sleepCtx(ctx, 100*time.Millisecond)
					c0 := b.procCPU(gw)
					r := openLoop(ctx, distinct, base+chatPath, rq, block)
					cr := rr[name]
					cr.cpu += b.procCPU(gw) - c0
					cr.run.samples = append(cr.run.samples, r.samples...)
					rr[name] = cr
				}
				for _, name := range []string{"miss", "uncached"} {
					r := rr[name]
					logf("cache round %d %-9s %5d req %3d err  p50 %s ms  gateway CPU %.0f µs/req", round+1, name, len(r.run.samples), runErrors(r.run), ms(pct(totals(r.run), 0.5)),
						float64(r.cpu.Microseconds())/float64(max(len(r.run.samples), 1)))
				}
				continue
			}
			name := item
			sleepCtx(ctx, 200*time.Millisecond)
			c0 := b.procCPU(gw)
			var r runResult
			switch name {
			case "hit":
				r = openLoopWith(ctx, run, leanHit.do)
			case "baseline":
				r = openLoopWith(ctx, run, leanBase.do)
			case "direct":
				r = openLoopWith(ctx, run, leanDirect.do)
			}
			cr := cacheRun{run: r}
			if name == "hit" {
				cr.cpu = b.procCPU(gw) - c0
			}
			rr[name] = cr
			logf("cache round %d %-9s %5d req %3d err  p50 %s ms  gateway CPU %.0f µs/req", round+1, name, len(r.samples), runErrors(r), ms(pct(totals(r), 0.5)),
				float64(cr.cpu.Microseconds())/float64(max(len(r.samples), 1)))
		}
		res.rounds = append(res.rounds, rr)
	}
	return expectCacheHeader(ctx, plain, base+chatPath, miss, "miss")
}

// expectCacheHeader checks that rq's answer carries x-gateway-cache want,
// so the phase measures what it says it does.
func expectCacheHeader(ctx context.Context, c *http.Client, url string, rq *request, want string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(bytes.Replace(rq.body, []byte("#N#"), []byte("check "+randomHex(8)), 1)))
	if err != nil {
		return err
	}
	req.Header = rq.header.Clone()
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if got := resp.Header.Get("X-Gateway-Cache"); resp.StatusCode != http.StatusOK || got != want {
		return fmt.Errorf("a %s request got %d with x-gateway-cache %q", want, resp.StatusCode, got)
	}
	return nil
}

// distinctBodies makes every request's body different: it replaces #N#
// in the body with a counter, in the driver, so that the gateway sees
// requests that are all misses.
type distinctBodies struct {
	next http.RoundTripper
	n    atomic.Int64
}

func (d *distinctBodies) RoundTrip(r *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(r.Body)
	_ = r.Body.Close()
	if err != nil {
		return nil, err
	}
	body = bytes.Replace(body, []byte("#N#"), strconv.AppendInt(nil, d.n.Add(1), 10), 1)
	r = r.Clone(r.Context())
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	r.GetBody = nil
	return d.next.RoundTrip(r)
}

func (r *cacheResult) measured() bool { return r.err == "" && len(r.rounds) > 0 }

// hitRatio is the median over rounds of the hit's total p50 over the bare
// proxy's to the instant upstream.
func (r *cacheResult) hitRatio() float64 {
	var per []float64
	for _, rr := range r.rounds {
		if b := pct(totals(rr["baseline"].run), 0.5); b > 0 {
			per = append(per, float64(pct(totals(rr["hit"].run), 0.5))/float64(b))
		}
	}
	if len(per) == 0 {
		return math.NaN()
	}
	return medianFloat(per)
}

// cpuPerRequest is the gateway's CPU per request of a run (µs), over all
// rounds.
func (r *cacheResult) cpuPerRequest(name string) float64 {
	var cpu time.Duration
	n := 0
	for _, rr := range r.rounds {
		cpu += rr[name].cpu
		n += len(rr[name].run.samples)
	}
	if n == 0 {
		return math.NaN()
	}
	return float64(cpu) / 1e3 / float64(n)
}

func (r *cacheResult) missCPURatio() float64 {
	return r.cpuPerRequest("miss") / r.cpuPerRequest("uncached")
}

func (r *cacheResult) write(w io.Writer) {
	fmt.Fprintf(w, "\nResponse cache (issue 33): a gateway with an in-process cache (records off) serving a cached and an uncached model; %d RPS non-stream, %v per run, %d rounds of hits (one stored request), the bare proxy to the mock answering at once (X-Mock-Latency: 0s), the same mock without a proxy (direct, the floor), misses (every body distinct, cached model) and the same distinct bodies to the uncached model (alternating in %d blocks each), in a rotated order. Latencies are medians over rounds; CPU per request is over all rounds.\n\n",
		r.spec.rate, r.spec.duration, r.spec.rounds, cacheBlocks)
	if !r.measured() {
		fmt.Fprintf(w, "Not measured: %s\n", r.err)
		return
	}
	tb := &table{}
	tb.add("cache", "requests / errors", "total p50 / p99 (ms)", "gateway CPU per request (µs)")
	for _, name := range cacheRuns {
		n, e := 0, 0
		var p50, p99 []time.Duration
		for _, rr := range r.rounds {
			n, e = n+len(rr[name].run.samples), e+runErrors(rr[name].run)
			t := totals(rr[name].run)
			p50, p99 = append(p50, pct(t, 0.5)), append(p99, pct(t, 0.99))
		}
		cpu := "–"
		if name != "baseline" && name != "direct" {
			cpu = fmt.Sprintf("%.0f", r.cpuPerRequest(name))
		}
		tb.add(name, fmt.Sprintf("%d / %d", n, e), ms(median(p50))+" / "+ms(median(p99)), cpu)
	}
	tb.write(w)
	fmt.Fprintf(w, "\nHit p50 over the bare proxy's: %s; CPU per miss over per uncached request: %s.\n", ratioOrNA(r.hitRatio()), ratioOrNA(r.missCPURatio()))
}

func (r *cacheResult) writeTargets(tb *table, verdict func(ok, measured bool) string) {
	h, m := r.hitRatio(), r.missCPURatio()
	tb.add("response cache: hit latency p50 ≤ 0.5x the bare proxy's to an upstream that answers at once", ratioOrNA(h), verdict(h <= 0.5, r.measured() && !math.IsNaN(h)))
	tb.add("response cache: CPU per miss ≤ 1.05x per uncached request", ratioOrNA(m), verdict(m <= 1.05, r.measured() && !math.IsNaN(m)))
}

func (r *cacheResult) errs() map[string]int {
	m := map[string]int{}
	for _, rr := range r.rounds {
		for name, run := range rr {
			if name == "baseline" || name == "direct" {
				continue
			}
			for _, s := range run.run.samples {
				if s.err != "" {
					m["cache phase ("+name+"): "+s.err]++
				}
			}
		}
	}
	return m
}
