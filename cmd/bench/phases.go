package main

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"
)

const chatPath = "/v1/chat/completions"

// Bounds of every request and of the in-flight work of one open-loop run.
const (
	requestTimeout = 10 * time.Second
	maxInFlight    = 2048
)

// bencher runs the scenarios against the three targets.
type bencher struct {
	s       settings
	st      *stack
	clients map[string]*http.Client // one pool per target
	urls    map[string]string
}

// proc is the process whose CPU a target's runs are charged to (none for direct).
func (b *bencher) proc(t string) *proc {
	switch t {
	case baseline:
		return b.st.baseline
	case gateway:
		return b.st.gateway
	}
	return nil
}

// rotate returns xs starting at index k, so that successive rounds visit the targets
// in a different order and drift over time is shared out instead of hitting the
// target that always runs last.
func rotate(xs []string, k int) []string {
	k %= len(xs)
	return slices.Concat(xs[k:], xs[:k])
}

// measure runs fn against t and pools its result into sc, charging the proxy's and
// Postgres's CPU from just before the run until, for the gateway, the run's records
// are written.
func (b *bencher) measure(ctx context.Context, sc *scenario, t string, fn func() runResult) {
	p := b.proc(t)
	a := sc.per[t]
	var spooled0 float64
	if t == gateway {
		if m, err := b.st.gatewayMetrics(ctx); err == nil {
			spooled0 = m["gateway_report_spooled_total"]
		}
	}
	proxy0, pg0, side0, busy0, wall0 := b.procCPU(p), b.st.pgCPU(), b.sideCPU(), machineBusy(), time.Now()
	r := fn()
	if t == gateway {
		b.st.waitRecordsWritten(ctx, 10*time.Second)
	}
	// Postgres is charged during every run, not only the gateway's: its deferred
	// work (autovacuum, checkpoints) can land on the next target's run.
	pgUsed := b.st.pgCPU() - pg0
	a.pgCPU += pgUsed
	proxyUsed, sideUsed := b.procCPU(p)-proxy0, b.sideCPU()-side0
	if t == gateway {
		// After the CPU readings: this scrape is the benchmark's, not the run's.
		if m, err := b.st.gatewayMetrics(ctx); err == nil {
			a.spooled += m["gateway_report_spooled_total"] - spooled0
		}
	}
	ours := proxyUsed + sideUsed + pgUsed
	a.allCPU += ours
	if p != nil {
		a.cpu += proxyUsed
		a.cpuKnown = true
	}
	// What the rest of the machine burnt meanwhile: other engineers' builds and
	// tests, the hypervisor's steal.
	if wall := time.Since(wall0); wall > 0 {
		foreign := float64(machineBusy()-busy0-ours) / float64(wall)
		a.foreign = append(a.foreign, max(0, foreign))
	}
	a.add(r)
	last := a.rounds[len(a.rounds)-1]
	logf("%-16s %-8s %6d req %4d err  p50 %6s  p99 %6s ms  (others used %.2f CPUs)", sc.name, t, last.requests,
		last.requests-last.ok, ms(pct(last.total, 0.5)), ms(pct(last.total, 0.99)), a.foreign[len(a.foreign)-1])
	// Let the last connections settle before the next target starts.
	sleepCtx(ctx, 200*time.Millisecond)
}

// procCPU is p's CPU so far, 0 for no process.
func (b *bencher) procCPU(p *proc) time.Duration {
	if p == nil {
		return 0
	}
	d, _ := p.cpu()
	return d
}

// sideCPU is the CPU of the processes every target's runs need: this driver and
// the mock upstream.
func (b *bencher) sideCPU() time.Duration {
	self, _ := cpuOf(os.Getpid(), false)
	mock, _ := b.st.mock.cpu()
	return self + mock
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// runAll runs every scenario and fills rep. It stops early, keeping what finished,
// when ctx ends (time budget or a signal).
func (b *bencher) runAll(ctx context.Context, rep *report) error {
	s := b.s
	nonStream := b.nonStreaming()
	stream := b.streaming(streamChunks, streamInterval)
	if s.promptBytes > 0 {
		stream.body = longConversation(s.promptBytes)
	}

	// Warm-up, not measured: connection pools, the gateway's prepared statements and
	// page cache, the mock's and proxies' first GC cycles.
	for _, t := range targetNames {
		openLoop(ctx, b.clients[t], b.urls[t]+chatPath, nonStream, openLoopSpec{rate: 500, duration: time.Second, maxInFlight: maxInFlight, timeout: requestTimeout})
		openLoop(ctx, b.clients[t], b.urls[t]+chatPath, stream, openLoopSpec{rate: 100, duration: 300 * time.Millisecond, maxInFlight: maxInFlight, timeout: requestTimeout})
	}
	b.st.waitRecordsWritten(ctx, 10*time.Second)
	if m, err := b.st.gatewayMetrics(ctx); err == nil && !s.recordsOff {
		if m["gateway_report_written_total"] == 0 || m["gateway_report_spooled_total"] > 0 {
			rep.notes = append(rep.notes, fmt.Sprintf("**records are not reaching Postgres** after warm-up: written %.0f, spooled %.0f",
				m["gateway_report_written_total"], m["gateway_report_spooled_total"]))
		}
	}

	for ri, rate := range s.rates {
		if !s.runs("open") {
			break
		}
		sc := newScenario(fmt.Sprintf("open %d rps", rate), openKind, rate)
		rep.scenarios = append(rep.scenarios, sc)
		spec := openLoopSpec{rate: rate, duration: s.openDur, maxInFlight: maxInFlight, timeout: requestTimeout}
		for round := range s.rounds {
			for _, t := range rotate(targetNames, ri+round) {
				if ctx.Err() != nil {
					return nil
				}
				b.measure(ctx, sc, t, func() runResult { return openLoop(ctx, b.clients[t], b.urls[t]+chatPath, nonStream, spec) })
			}
		}
	}

	sc := newScenario(fmt.Sprintf("closed %d conns", s.closedConns), closedKind, 0)
	if s.runs("closed") {
		rep.scenarios = append(rep.scenarios, sc)
	}
	for round := range s.rounds {
		if !s.runs("closed") {
			break
		}
		for _, t := range rotate(targetNames, round) {
			if ctx.Err() != nil {
				return nil
			}
			b.measure(ctx, sc, t, func() runResult {
				return closedLoop(ctx, b.clients[t], b.urls[t]+chatPath, nonStream, s.closedConns, s.closedDur, requestTimeout)
			})
		}
	}

	for ri, rate := range s.streamRates {
		if !s.runs("stream") {
			break
		}
		sc := newScenario(fmt.Sprintf("stream %d/s", rate), streamKind, rate)
		rep.scenarios = append(rep.scenarios, sc)
		spec := openLoopSpec{rate: rate, duration: s.streamDur, maxInFlight: maxInFlight, timeout: requestTimeout}
		for round := range s.streamRounds {
			for _, t := range rotate(targetNames, ri+round) {
				if ctx.Err() != nil {
					return nil
				}
				b.measure(ctx, sc, t, func() runResult { return openLoop(ctx, b.clients[t], b.urls[t]+chatPath, stream, spec) })
			}
		}
	}

	if s.runs("hanging") {
		b.hangingPrimary(ctx, rep)
	}
	if s.runs("tail") {
		b.tailRescue(ctx, rep)
	}
	if s.runs("translate") {
		b.translate(ctx, rep)
	}
	if s.runs("ledger") {
		b.ledger(ctx, rep)
	}
	if s.runs("replicas") {
		b.replicas(ctx, rep)
	}
	if s.runs("budget") {
		b.budgets(ctx, rep)
	}
	if s.runs("tracing") {
		b.tracing(ctx, rep)
	}
	if s.runs("cache") {
		b.cache(ctx, rep)
	}

	if s.pprofDir != "" && (s.runs("open") || s.runs("stream")) {
		if err := b.profile(ctx, nonStream, stream); err != nil {
			return err
		}
	}
	if s.runs("hold") {
		b.openStreams(ctx, rep)
	}
	b.finish(ctx, rep)
	return nil
}

// openStreams holds many slow streams open through each proxy and samples memory.
func (b *bencher) openStreams(ctx context.Context, rep *report) {
	rep.peakLoad = b.peaks()
	for _, c := range b.clients {
		c.CloseIdleConnections()
	}
	h := b.s.hold
	ramp := time.Duration(h.streams) * time.Second / time.Duration(h.rampRate)
	// Long enough that the last stream opened is still open when sampling ends.
	chunks := int(math.Ceil((ramp + h.hold + time.Second).Seconds()))
	h.timeout = ramp + time.Duration(chunks)*time.Second + 15*time.Second
	rq := b.streaming(chunks, time.Second)
	rep.hold, rep.holdN = map[string]holdResult{}, h.streams
	for _, t := range []string{baseline, gateway} {
		if ctx.Err() != nil {
			return
		}
		var whileOpen func()
		if t == gateway {
			whileOpen = func() {
				// Where the gateway's memory is while every stream is open, from the Go
				// runtime's own figures: the RSS row alone cannot say.
				if m, err := b.st.gatewayMetrics(ctx); err == nil {
					rep.notes = append(rep.notes, fmt.Sprintf("gateway with the streams open: %.0f goroutines, %s MiB goroutine stacks, %s MiB heap in use, %s MiB heap live objects (go_memstats_*)",
						m["go_goroutines"], mib(uint64(m["go_memstats_stack_inuse_bytes"])),
						mib(uint64(m["go_memstats_heap_inuse_bytes"])), mib(uint64(m["go_memstats_heap_alloc_bytes"]))))
				}
				if b.s.pprofDir == "" {
					return
				}
				defer func() {
					if m, err := b.st.gatewayMetrics(ctx); err == nil {
						rep.notes = append(rep.notes, fmt.Sprintf("after a forced GC (the heap profile's): %s MiB goroutine stacks, %s MiB heap in use, %s MiB heap live objects",
							mib(uint64(m["go_memstats_stack_inuse_bytes"])), mib(uint64(m["go_memstats_heap_inuse_bytes"])), mib(uint64(m["go_memstats_heap_alloc_bytes"]))))
					}
				}()
				for name, path := range map[string]string{"heap.pprof": "/debug/pprof/heap?gc=1", "goroutines.txt": "/debug/pprof/goroutine?debug=1"} {
					out := filepath.Join(b.s.pprofDir, fmt.Sprintf("gateway-%dstreams-%s", h.streams, name))
					if err := b.fetchProfile(ctx, path, out); err != nil {
						logf("%v", err)
					}
				}
			}
		}
		r := holdStreams(ctx, b.urls[t]+chatPath, rq, h, b.proc(t), whileOpen)
		rep.hold[t] = r
		logf("%d open streams %-8s peak open %d, %d errors, RSS %s MiB", h.streams, t, r.peakOpen, sumErrs(r.errs), mib(r.peakRSS))
	}
	if b.st.gateway != nil {
		b.st.waitRecordsWritten(ctx, 10*time.Second)
	}
}

// peaks reads each proxy's VmHWM.
func (b *bencher) peaks() map[string]uint64 {
	out := map[string]uint64{}
	for _, t := range []string{baseline, gateway} {
		if peak, _, err := b.proc(t).memory(); err == nil {
			out[t] = peak
		}
	}
	return out
}

// finish reads the final memory peaks, the gateway's record counters and the
// driver's own send lag.
func (b *bencher) finish(ctx context.Context, rep *report) {
	rep.peakFinal = b.peaks()
	if m, err := b.st.gatewayMetrics(ctx); err == nil {
		for _, k := range []string{"gateway_report_written_total", "gateway_report_spooled_total", "gateway_report_dropped_total"} {
			rep.records[k] = m[k]
		}
		rep.notes = append(rep.notes, fmt.Sprintf("gateway records: %.0f written to Postgres, %.0f spooled, %.0f dropped (gateway_report_*_total)",
			m["gateway_report_written_total"], m["gateway_report_spooled_total"], m["gateway_report_dropped_total"]))
	}
	var lag []time.Duration
	for _, sc := range rep.scenarios {
		for _, t := range targetNames {
			lag = append(lag, sc.per[t].lag...)
		}
	}
	if len(lag) > 0 {
		s := sorted(lag)
		rep.notes = append(rep.notes, fmt.Sprintf("load driver send lag behind schedule (open loop, all runs): p50 %.0f µs, p99 %.0f µs, max %.1f ms; it is inside every latency above",
			float64(pct(s, 0.5))/1e3, float64(pct(s, 0.99))/1e3, float64(s[len(s)-1])/1e6))
	}
	switch {
	case b.s.recordsOff:
		rep.notes = append(rep.notes, "**records off** (BENCH_RECORDS=off): the gateway ran without Postgres; not the default path")
	case b.st.pg.postmaster == 0:
		rep.notes = append(rep.notes, "Postgres CPU not measured (shared server; its processes are not this run's)")
	default:
		rep.notes = append(rep.notes, "Postgres CPU per request: the cluster's processes (postmaster tree) during each run, not included in the proxy's CPU; under direct and baseline it is background work (autovacuum, checkpoints) left by earlier gateway runs")
	}
	rep.notes = append(rep.notes,
		"added latency = the proxy's percentile minus direct's percentile (a difference of percentiles, not a percentile of differences)",
		"proxy CPU = utime+stime of the process from /proc/PID/stat (10 ms ticks) over the run, gateway runs until their records are written")
}
