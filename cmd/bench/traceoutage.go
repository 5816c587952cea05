package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"path/filepath"
	"sync"
	"time"
)

// The tracing phase's outage run (BENCH_TRACE_OUTAGE=5m): issue 34 says a
// collector that is down or slow never slows requests, its spans dropped
// and counted, with no growth in memory over a 5-minute outage under load.
// A gateway traced at 1.0 exports to a collector that accepts connections
// and never answers (the worse outage: each export waits out
// OTEL_EXPORTER_OTLP_TIMEOUT, where a refused connection fails at once)
// while the phase's open-loop load runs for the whole outage in slices of
// outageSlice; after each slice the gateway's heap in use
// (go_memstats_heap_inuse_bytes), its RSS and
// gateway_trace_spans_dropped_total are sampled.

// outageSlice is the load between two memory samples.
const outageSlice = 10 * time.Second

type outageSample struct {
	at       time.Duration // since the load started
	heap     float64       // go_memstats_heap_inuse_bytes
	rss      uint64
	dropped  float64 // gateway_trace_spans_dropped_total
	requests int     // sent in the slice before the sample
	p50, p99 time.Duration
	errors   int
}

type outageResult struct {
	duration time.Duration
	samples  []outageSample
	runs     []runResult
	err      string
}

// traceOutage runs the outage; a failure is kept in the result.
func (b *bencher) traceOutage(ctx context.Context, spec traceSpec) *outageResult {
	res := &outageResult{duration: spec.outage}
	if err := b.runOutage(ctx, spec, res); err != nil {
		res.err = err.Error()
		logf("tracing outage: %v", err)
	}
	return res
}

func (b *bencher) runOutage(ctx context.Context, spec traceSpec, res *outageResult) error {
	hole, err := newBlackhole()
	if err != nil {
		return err
	}
	defer hole.close()
	routes, err := b.traceRoutes()
	if err != nil {
		return err
	}
	gw, base, err := b.startTraceGateway(ctx, len(traceConfigs), filepath.Join(b.st.tmp, "gateway"), routes,
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://"+hole.addr(),
		"OTEL_TRACES_SAMPLER=parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG=1.0")
	if gw != nil {
		defer gw.stop(5 * time.Second)
	}
	if err != nil {
		return err
	}
	req := b.nonStreaming()
	client := newClient()
	defer client.CloseIdleConnections()
	run := openLoopSpec{rate: spec.rate, duration: outageSlice, maxInFlight: maxInFlight, timeout: requestTimeout}
	warm := run
	warm.duration = time.Second
	openLoop(ctx, client, base+chatPath, req, warm)
	logf("tracing outage: %v of %d RPS against a gateway whose collector never answers", spec.outage, spec.rate)
	sample := func(at time.Duration, r *runResult) error {
		s := outageSample{at: at}
		err := scrapeMetricsAt(ctx, base, func(name, _ string, v float64) {
			switch name {
			case "go_memstats_heap_inuse_bytes":
				s.heap = v
			case "gateway_trace_spans_dropped_total":
				s.dropped += v
			}
		})
		if err != nil {
			return err
		}
		if _, s.rss, err = gw.memory(); err != nil {
			return err
		}
		if r != nil {
			s.requests, s.errors = len(r.samples), runErrors(*r)
			s.p50, s.p99 = pct(totals(*r), 0.5), pct(totals(*r), 0.99)
		}
		res.samples = append(res.samples, s)
		logf("tracing outage %5.0fs  heap in use %s MiB  RSS %s MiB  dropped %.0f  p50 %s ms  p99 %s ms  %d err",
			at.Seconds(), mib(uint64(s.heap)), mib(s.rss), s.dropped, ms(s.p50), ms(s.p99), s.errors)
		return nil
	}
	if err := sample(0, nil); err != nil {
		return err
	}
	start := time.Now()
	for time.Since(start) < spec.outage {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r := openLoop(ctx, client, base+chatPath, req, run)
		res.runs = append(res.runs, r)
		if err := sample(time.Since(start), &r); err != nil {
			return err
		}
	}
	return nil
}

// blackhole is a collector that accepts connections, reads nothing and
// never answers; close lets go of every connection.
type blackhole struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	done  chan struct{}
}

func newBlackhole() (*blackhole, error) {
	ln, err := net.Listen("tcp", loopbackAny)
	if err != nil {
		return nil, err
	}
	h := &blackhole{ln: ln, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed
			}
			h.mu.Lock()
			h.conns = append(h.conns, c)
			h.mu.Unlock()
		}
	}()
	return h, nil
}

func (h *blackhole) addr() string { return h.ln.Addr().String() }

func (h *blackhole) close() {
	_ = h.ln.Close()
	<-h.done
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.conns {
		_ = c.Close()
	}
}

func (o *outageResult) write(w io.Writer) {
	fmt.Fprintf(w, "\nCollector outage: a gateway traced at 1.0 whose collector accepts connections and never answers, under the same load for %v; sampled every %v.\n\n", o.duration, outageSlice)
	if len(o.samples) < 2 {
		fmt.Fprintf(w, "Not measured: %s\n", o.err)
		return
	}
	first, last := o.samples[0], o.samples[len(o.samples)-1]
	var peakHeap float64
	var peakRSS uint64
	var sent, errs int
	for _, s := range o.samples {
		peakHeap, peakRSS = max(peakHeap, s.heap), max(peakRSS, s.rss)
		sent, errs = sent+s.requests, errs+s.errors
	}
	second := o.samples[1]
	tb := &table{}
	tb.add("", "heap in use (MiB)", "RSS (MiB)", "spans dropped", "p50 / p99 of the slice (ms)")
	tb.add("start", mib(uint64(first.heap)), mib(first.rss), fmt.Sprintf("%.0f", first.dropped), "")
	tb.add(fmt.Sprintf("after %.0fs", second.at.Seconds()), mib(uint64(second.heap)), mib(second.rss),
		fmt.Sprintf("%.0f", second.dropped), ms(second.p50)+" / "+ms(second.p99))
	tb.add(fmt.Sprintf("end, %.0fs", last.at.Seconds()), mib(uint64(last.heap)), mib(last.rss),
		fmt.Sprintf("%.0f", last.dropped), ms(last.p50)+" / "+ms(last.p99))
	tb.add("peak of the samples", mib(uint64(peakHeap)), mib(peakRSS), "", "")
	// The heap in use swings between what is live and the heap goal
	// (internal/gcfloor keeps that at its floor): a minute's lowest sample
	// is the nearest to the live heap, and says more of a trend than one
	// sample.
	early, late := o.lowest(0, time.Minute), o.lowest(last.at-time.Minute, last.at)
	tb.add("lowest, first minute / last minute", mib(uint64(early.heap))+" / "+mib(uint64(late.heap)),
		mib(early.rss)+" / "+mib(late.rss), "", "")
	tb.write(w)
	fmt.Fprintf(w, "\n%d requests, %d errors; %.0f spans dropped (each request makes 2).", sent, errs, last.dropped-first.dropped)
	if o.err != "" {
		fmt.Fprintf(w, " Cut short: %s.", o.err)
	}
	fmt.Fprintln(w)
}

// lowest is the lowest heap in use and RSS of the samples after from, up
// to to, the first (the start, before any load) left out.
func (o *outageResult) lowest(from, to time.Duration) (low outageSample) {
	low.heap, low.rss = math.Inf(1), math.MaxUint64
	for _, s := range o.samples[1:] {
		if s.at > from && s.at <= to {
			low.heap, low.rss = min(low.heap, s.heap), min(low.rss, s.rss)
		}
	}
	if math.IsInf(low.heap, 1) {
		return outageSample{}
	}
	return low
}

func (o *outageResult) errs() map[string]int {
	m := map[string]int{}
	for _, r := range o.runs {
		for _, s := range r.samples {
			if s.err != "" {
				m["tracing outage: "+s.err]++
			}
		}
	}
	return m
}
