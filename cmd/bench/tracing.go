package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// The tracing phase (issue 34): what OpenTelemetry tracing costs a
// request. Three gateways serve the same routes: tracing off (no exporter
// configured), on with every request sampled, and on at a ratio of 0.01,
// both exporting over HTTP/protobuf to a collector of the benchmark's own
// on loopback that reads and discards each export. The same open-loop
// non-stream load goes to each in turn, the order rotated per round; the
// figures are each gateway's CPU per request and its p50 minus the
// untraced gateway's in the same round (the median over rounds).
type traceSpec struct {
	rate     int
	duration time.Duration
	rounds   int
}

// traceConfigs are the gateways of the phase, by name, with their tracing
// variables.
var traceConfigs = []struct{ name, sampler, arg string }{
	{"off", "", ""},
	{"on, 1.0", "parentbased_traceidratio", "1.0"},
	{"on, 0.01", "parentbased_traceidratio", "0.01"},
}

type traceRun struct {
	run runResult
	cpu time.Duration
}

type traceResult struct {
	spec    traceSpec
	rounds  []map[string]traceRun
	exports int64 // exports the collector received
	bytes   int64 // and their bytes
	err     string
}

// tracing runs the phase into rep.tracing.
func (b *bencher) tracing(ctx context.Context, rep *report) {
	res := &traceResult{spec: b.s.tracePhase}
	rep.tracing = res
	if err := b.runTracing(ctx, res); err != nil {
		res.err = err.Error()
		logf("tracing phase: %v", err)
		return
	}
	for _, c := range traceConfigs[1:] {
		logf("tracing %s: %+.1f µs CPU and %+.3f ms p50 per request over off", c.name, res.addedCPU(c.name), res.addedP50(c.name))
	}
}

func (b *bencher) runTracing(ctx context.Context, res *traceResult) error {
	spec := res.spec
	ln, err := net.Listen("tcp", loopbackAny)
	if err != nil {
		return err
	}
	var exports, size atomic.Int64
	coll := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		exports.Add(1)
		size.Add(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK) // an empty ExportTraceServiceResponse is zero bytes
	})}
	go func() { _ = coll.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		defer cancel()
		_ = coll.Shutdown(sctx)
		res.exports, res.bytes = exports.Load(), size.Load()
	}()

	routes := filepath.Join(b.st.tmp, "config", "tracing-routes.yaml") // away from the logs, as stack.go explains
	if err := os.WriteFile(routes, []byte(phaseRoutes(b.st.mockURL, "")), 0o600); err != nil {
		return err
	}
	bases, procs := map[string]string{}, map[string]*proc{} // by configuration name
	for i, c := range traceConfigs {
		env := slices.Concat(cleanEnv(), []string{
			"GATEWAY_LISTEN_ADDR=" + loopbackAny,
			"GATEWAY_CONFIG=" + routes,
			"GATEWAY_SPOOL_DIR=" + filepath.Join(b.st.tmp, fmt.Sprintf("spool-tracing-%d", i)),
			"GATEWAY_LOG_FORMAT=json",
			"GATEWAY_SHUTDOWN_GRACE=2s",
			"BENCH_UPSTREAM_KEY=sk-upstream-" + randomHex(8),
		})
		if c.sampler != "" {
			env = append(env, "OTEL_EXPORTER_OTLP_ENDPOINT=http://"+ln.Addr().String(),
				"OTEL_TRACES_SAMPLER="+c.sampler, "OTEL_TRACES_SAMPLER_ARG="+c.arg)
		}
		gw, base, err := b.st.startPhaseGateway(ctx, fmt.Sprintf("gateway-tracing-%d", i), env)
		if err != nil {
			return err
		}
		defer gw.stop(5 * time.Second)
		bases[c.name], procs[c.name] = base, gw
	}
	req := b.nonStreaming()
	client := newClient()
	defer client.CloseIdleConnections()
	run := openLoopSpec{rate: spec.rate, duration: spec.duration, maxInFlight: maxInFlight, timeout: requestTimeout}
	warm := run
	warm.duration = time.Second
	names := make([]string, len(traceConfigs))
	for i, c := range traceConfigs {
		names[i] = c.name
		if r := openLoop(ctx, client, bases[c.name]+chatPath, req, warm); runErrors(r) > 0 {
			return fmt.Errorf("%s warm-up: %d of %d requests failed (first: %s)", c.name, runErrors(r), len(r.samples), firstErr(r))
		}
	}
	for round := range spec.rounds {
		rr := map[string]traceRun{}
		for _, name := range rotate(names, round) {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			sleepCtx(ctx, 200*time.Millisecond)
			c0 := b.procCPU(procs[name])
			r := openLoop(ctx, client, bases[name]+chatPath, req, run)
			rr[name] = traceRun{run: r, cpu: b.procCPU(procs[name]) - c0}
			logf("tracing round %d %-9s %5d req %3d err  p50 %s ms", round+1, name, len(r.samples), runErrors(r), ms(pct(totals(r), 0.5)))
		}
		res.rounds = append(res.rounds, rr)
	}
	return nil
}

func (r *traceResult) measured() bool { return r.err == "" && len(r.rounds) > 0 }

// cpuPerRequest is a configuration's gateway CPU per request (µs) over
// every round.
func (r *traceResult) cpuPerRequest(name string) float64 {
	var cpu time.Duration
	n := 0
	for _, rr := range r.rounds {
		cpu += rr[name].cpu
		n += len(rr[name].run.samples)
	}
	return float64(cpu) / 1e3 / float64(max(n, 1))
}

func (r *traceResult) addedCPU(name string) float64 {
	return r.cpuPerRequest(name) - r.cpuPerRequest("off")
}

// addedP50 is the median over rounds of name's p50 minus off's, in ms.
func (r *traceResult) addedP50(name string) float64 {
	var d []float64
	for _, rr := range r.rounds {
		d = append(d, float64(pct(totals(rr[name].run), 0.5)-pct(totals(rr["off"].run), 0.5))/1e6)
	}
	if len(d) == 0 {
		return math.NaN()
	}
	return medianFloat(d)
}

func (r *traceResult) write(w io.Writer) {
	fmt.Fprintf(w, "\nTracing (issue 34): three gateways, tracing off, on with every request sampled and on at 0.01, exporting over HTTP/protobuf to a collector on loopback that discards; the same load (%d RPS non-stream, %v per run) to each in turn, %d rounds in a rotated order. Added figures are over the untraced gateway; p50 added is the median over rounds of the paired difference.\n\n",
		r.spec.rate, r.spec.duration, r.spec.rounds)
	if !r.measured() {
		fmt.Fprintf(w, "Not measured: %s\n", r.err)
		return
	}
	tb := &table{}
	tb.add("per request", "gateway CPU (µs)", "CPU added (µs)", "p50 added (ms)")
	for _, c := range traceConfigs {
		if c.name == "off" {
			tb.add(c.name, fmt.Sprintf("%.0f", r.cpuPerRequest(c.name)), "", "")
			continue
		}
		tb.add(c.name, fmt.Sprintf("%.0f", r.cpuPerRequest(c.name)), fmt.Sprintf("%+.1f", r.addedCPU(c.name)),
			fmt.Sprintf("%+.3f", r.addedP50(c.name)))
	}
	tb.write(w)
	fmt.Fprintf(w, "\nThe collector received %d exports, %d bytes in all.\n", r.exports, r.bytes)
}

func (r *traceResult) errs() map[string]int {
	m := map[string]int{}
	for _, rr := range r.rounds {
		for name, run := range rr {
			for _, s := range run.run.samples {
				if s.err != "" {
					m["tracing phase ("+strings.ReplaceAll(name, ",", "")+"): "+s.err]++
				}
			}
		}
	}
	return m
}
