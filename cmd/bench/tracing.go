package main

import (
	"context"
	"fmt"
	"io"
	"maps"
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
// request. Four gateways serve the same routes: the build before tracing
// existed (tracebase.go), and this build with tracing off (no exporter
// configured), on with every request sampled, and on at a ratio of 0.01,
// both exporting over HTTP/protobuf to a collector of the benchmark's own
// on loopback that reads and discards each export. The same open-loop
// non-stream load goes to each in turn, the order rotated per round; the
// figures are each gateway's CPU per request and its p50 minus the
// untraced gateway's in the same round (the median over rounds), and the
// issue's ratios: off over the build before tracing, on at 1.0 over off.
// BENCH_TRACE_OUTAGE adds a run against a collector that never answers
// (traceoutage.go).
type traceSpec struct {
	rate     int
	duration time.Duration
	rounds   int
	baseRef  string        // BENCH_TRACE_BASE_REF: the build before tracing; "" finds it
	baseBin  string        // BENCH_TRACE_BASE_BIN: that build, prebuilt
	outage   time.Duration // BENCH_TRACE_OUTAGE: the outage run's length; 0: none
}

// traceBase names the build before tracing among traceConfigs.
const traceBase = "before tracing"

// traceConfigs are the gateways of the phase, by name, with their tracing
// variables.
var traceConfigs = []struct{ name, sampler, arg string }{
	{traceBase, "", ""},
	{"off", "", ""},
	{"on, 1.0", "parentbased_traceidratio", "1.0"},
	{"on, 0.01", "parentbased_traceidratio", "0.01"},
}

type traceRun struct {
	run runResult
	cpu time.Duration
}

type traceResult struct {
	spec     traceSpec
	rounds   []map[string]traceRun
	exports  int64  // exports the collector received
	bytes    int64  // and their bytes
	baseFrom string // what the build before tracing was built from
	baseErr  string // why it is not measured
	outage   *outageResult
	err      string
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
	for _, c := range traceConfigs[2:] {
		logf("tracing %s: %+.1f µs CPU and %+.3f ms p50 per request over off", c.name, res.addedCPU(c.name), res.addedP50(c.name))
	}
	if res.baseErr == "" {
		logf("tracing off over the build before tracing: CPU %.3fx, p50 %.3fx", res.cpuRatio("off", traceBase), res.p50Ratio("off", traceBase))
	}
	if spec := res.spec; spec.outage > 0 && ctx.Err() == nil {
		res.outage = b.traceOutage(ctx, spec)
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

	routes, err := b.traceRoutes()
	if err != nil {
		return err
	}
	baseBin, from, err := b.traceBaseBin(ctx)
	if err != nil {
		res.baseErr = err.Error()
		logf("tracing: the build before tracing is not measured: %v", err)
	}
	res.baseFrom = from
	bases, procs := map[string]string{}, map[string]*proc{} // by configuration name
	var names []string
	for i, c := range traceConfigs {
		bin := filepath.Join(b.st.tmp, "gateway")
		if c.name == traceBase {
			if baseBin == "" {
				continue
			}
			bin = baseBin
		}
		var otel []string
		if c.sampler != "" {
			otel = []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + ln.Addr().String(),
				"OTEL_TRACES_SAMPLER=" + c.sampler, "OTEL_TRACES_SAMPLER_ARG=" + c.arg}
		}
		gw, base, err := b.startTraceGateway(ctx, i, bin, routes, otel...)
		if gw != nil {
			defer gw.stop(5 * time.Second)
		}
		if err != nil {
			return err
		}
		bases[c.name] = base
		procs[c.name] = gw
		names = append(names, c.name)
	}
	req := b.nonStreaming()
	client := newClient()
	defer client.CloseIdleConnections()
	run := openLoopSpec{rate: spec.rate, duration: spec.duration, maxInFlight: maxInFlight, timeout: requestTimeout}
	warm := run
	warm.duration = time.Second
	for _, name := range names {
		if r := openLoop(ctx, client, bases[name]+chatPath, req, warm); runErrors(r) > 0 {
			return fmt.Errorf("%s warm-up: %d of %d requests failed (first: %s)", name, runErrors(r), len(r.samples), firstErr(r))
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
			logf("tracing round %d %-14s %5d req %3d err  p50 %s ms", round+1, name, len(r.samples), runErrors(r), ms(pct(totals(r), 0.5)))
		}
		res.rounds = append(res.rounds, rr)
	}
	return nil
}

// traceRoutes writes the phase's routes file, one openai provider (the
// mock) serving the benchmark's model: a file the build before tracing
// reads as well.
func (b *bencher) traceRoutes() (string, error) {
	routes := filepath.Join(b.st.tmp, "config", "tracing-routes.yaml") // away from the logs, as stack.go explains
	if err := os.WriteFile(routes, []byte(phaseRoutes(b.st.mockURL, "")), 0o600); err != nil {
		return "", err
	}
	return routes, nil
}

// startTraceGateway starts gateway number i of the phase from bin with
// the phase's routes and the tracing variables otel, and waits until it
// is ready; the caller stops the process (nil on a failure: already stopped).
func (b *bencher) startTraceGateway(ctx context.Context, i int, bin, routes string, otel ...string) (*proc, string, error) {
	env := slices.Concat(cleanEnv(), []string{
		"GATEWAY_LISTEN_ADDR=" + loopbackAny,
		"GATEWAY_CONFIG=" + routes,
		"GATEWAY_SPOOL_DIR=" + filepath.Join(b.st.tmp, fmt.Sprintf("spool-tracing-%d", i)),
		"GATEWAY_LOG_FORMAT=json",
		"GATEWAY_SHUTDOWN_GRACE=2s",
		"BENCH_UPSTREAM_KEY=sk-upstream-" + randomHex(8),
	}, otel)
	return b.st.startGatewayBin(ctx, fmt.Sprintf("gateway-tracing-%d", i), bin, env)
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

// cpuRatio is name's gateway CPU per request over ref's; NaN when
// either was not measured.
func (r *traceResult) cpuRatio(name, ref string) float64 {
	if !r.measured() || !r.ran(name) || !r.ran(ref) {
		return math.NaN()
	}
	return r.cpuPerRequest(name) / r.cpuPerRequest(ref)
}

// p50Ratio is the median over rounds of name's p50 over ref's in the
// same round; NaN when either was not measured.
func (r *traceResult) p50Ratio(name, ref string) float64 {
	if !r.measured() || !r.ran(name) || !r.ran(ref) {
		return math.NaN()
	}
	var v []float64
	for _, rr := range r.rounds {
		v = append(v, float64(pct(totals(rr[name].run), 0.5))/float64(pct(totals(rr[ref].run), 0.5)))
	}
	return medianFloat(v)
}

// ran reports whether configuration name was part of the rounds.
func (r *traceResult) ran(name string) bool {
	_, ok := r.rounds[0][name]
	return ok
}

func (r *traceResult) write(w io.Writer) {
	fmt.Fprintf(w, "\nTracing (issue 34): four gateways, the build before tracing existed and this one with tracing off, on with every request sampled and on at 0.01, exporting over HTTP/protobuf to a collector on loopback that discards; the same load (%d RPS non-stream, %v per run) to each in turn, %d rounds in a rotated order. Added figures are over the untraced gateway; p50 added is the median over rounds of the paired difference, a p50 ratio the median of the paired ratios.\n\n",
		r.spec.rate, r.spec.duration, r.spec.rounds)
	if !r.measured() {
		fmt.Fprintf(w, "Not measured: %s\n", r.err)
		return
	}
	if r.baseErr != "" {
		fmt.Fprintf(w, "The build before tracing is not measured: %s\n\n", r.baseErr)
	} else {
		fmt.Fprintf(w, "The build before tracing: %s.\n\n", r.baseFrom)
	}
	tb := &table{}
	tb.add("per request", "gateway CPU (µs)", "CPU added (µs)", "p50 (ms)", "p50 added (ms)")
	for _, c := range traceConfigs {
		if !r.ran(c.name) {
			continue
		}
		cpu, p50 := fmt.Sprintf("%.0f", r.cpuPerRequest(c.name)), ms(r.medianP50(c.name))
		if c.name == "off" {
			tb.add(c.name, cpu, "", p50, "")
			continue
		}
		tb.add(c.name, cpu, fmt.Sprintf("%+.1f", r.addedCPU(c.name)), p50, fmt.Sprintf("%+.3f", r.addedP50(c.name)))
	}
	tb.write(w)
	fmt.Fprintf(w, "\nOff over the build before tracing: CPU %s, p50 %s. On at 1.0 over off: CPU %s, p50 %s.\n",
		ratio3(r.cpuRatio("off", traceBase)), ratio3(r.p50Ratio("off", traceBase)),
		ratio3(r.cpuRatio("on, 1.0", "off")), ratio3(r.p50Ratio("on, 1.0", "off")))
	fmt.Fprintf(w, "\nThe collector received %d exports, %d bytes in all.\n", r.exports, r.bytes)
	if r.outage != nil {
		r.outage.write(w)
	}
}

// medianP50 is the median over rounds of name's p50.
func (r *traceResult) medianP50(name string) time.Duration {
	var d []float64
	for _, rr := range r.rounds {
		d = append(d, float64(pct(totals(rr[name].run), 0.5)))
	}
	return time.Duration(medianFloat(d))
}

// writeTargets adds the ratios to tb: tracing off within 2% of the
// build before it, on at 1.0 within 15% of off, CPU and p50 each.
func (r *traceResult) writeTargets(tb *table, verdict func(ok, measured bool) string) {
	for _, t := range []struct {
		what, name, ref string
		limit           float64
	}{
		{"tracing off: gateway CPU per request ≤ 1.02x the build before tracing's", "off", traceBase, 1.02},
		{"tracing off: p50 ≤ 1.02x the build before tracing's", "off", traceBase, 1.02},
		{"tracing on at 1.0: gateway CPU per request ≤ 1.15x tracing off's", "on, 1.0", "off", 1.15},
		{"tracing on at 1.0: p50 ≤ 1.15x tracing off's", "on, 1.0", "off", 1.15},
	} {
		v := r.p50Ratio(t.name, t.ref)
		if strings.Contains(t.what, "CPU") {
			v = r.cpuRatio(t.name, t.ref)
		}
		tb.add(t.what, ratio3(v), verdict(v <= t.limit, !math.IsNaN(v)))
	}
}

// ratio3 is a ratio to three decimals, for targets that are 2% wide.
func ratio3(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf("%.3fx", v)
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
	if r.outage != nil {
		maps.Copy(m, r.outage.errs())
	}
	return m
}
