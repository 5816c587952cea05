package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// The hanging-primary phase: a primary that accepts every stream and never sends a
// first byte, in front of a healthy backup, against the backup alone through the same
// gateway. Provider health is what keeps the first from costing every request the
// first-byte timeout. The watchdog and health settings are the issue's.
const (
	hangFirstByte  = 300 * time.Millisecond
	hangFailures   = 3
	hangCooldown   = 2 * time.Second
	hangAloneModel = "backup-alone"
)

// hangingSpec sizes the phase: streams at rate for duration, per run; each round runs
// the backup alone and the hanging primary in front of it, back to back.
type hangingSpec struct {
	rate     int
	duration time.Duration
	rounds   int
}

// Each round gets a primary of its own, so that every hanging run starts from a
// healthy target: the previous round's primary is still cooling (its cooldown
// doubled by each failed probe), and nothing but a successful probe heals it.
func hangingProvider(round int) string { return fmt.Sprintf("hanging-%d", round+1) }
func hangingModel(round int) string    { return fmt.Sprintf("hanging-primary-%d", round+1) }

// hangingRoutes returns the routes file's providers and models for the phase. Every
// provider is the one mock; the primaries' extra header makes it hang (stream: 200
// headers, then nothing), so the primary and the backup differ in that alone.
func hangingRoutes(mockURL string, rounds int) (providers, models string) {
	var p, m strings.Builder
	fmt.Fprintf(&p, `  - name: backup
    format: openai
    base_url: %s/v1
    api_keys: ["${BENCH_UPSTREAM_KEY}"]
    max_concurrency: 4096
    timeouts: { connect: 2s, first_byte: 10s, total: 60s }
    forward_headers: [X-Mock-Chunks, X-Mock-Chunk-Interval]
`, mockURL)
	fmt.Fprintf(&m, "  - name: %s\n    candidates: [{ provider: backup, model: %s }]\n", hangAloneModel, benchModel)
	for r := range rounds {
		fmt.Fprintf(&p, `  - name: %s
    format: openai
    base_url: %s/v1
    api_keys: ["${BENCH_UPSTREAM_KEY}"]
    max_concurrency: 4096
    timeouts: { connect: 2s, first_byte: %s, total: 60s }
    headers: { X-Mock-Hang-Rate: "1" }
    forward_headers: [X-Mock-Chunks, X-Mock-Chunk-Interval]
    health: { failures: %d, cooldown: %s }
`, hangingProvider(r), mockURL, hangFirstByte, hangFailures, hangCooldown)
		fmt.Fprintf(&m, `  - name: %s
    candidates:
      - { provider: %s, model: %s, priority: 0 }
      - { provider: backup, model: %s, priority: 1 }
`, hangingModel(r), hangingProvider(r), benchModel, benchModel)
	}
	return p.String(), m.String()
}

// hangingRound is one round of the phase.
type hangingRound struct {
	alone, hanging runResult
	// coolAt is when, into the hanging run, the primary began cooling: when
	// its failures-th first-byte timeout fired (see coolingBegan); negative
	// when none.
	coolAt time.Duration
	// The primary's moves to cooling and its first-byte watchdog firings during
	// the run (gateway_*_total deltas). Every probe of a primary that never
	// answers fails, so the probes are the moves to cooling but the first.
	coolings, timeouts float64
	// CPUs' worth used by processes outside the benchmark during each run, to
	// tell a disturbed round.
	foreignAlone, foreignHanging float64
}

// probes is how many probes reached the primary in the run.
func (r hangingRound) probes() int { return max(0, int(r.coolings)-1) }

// hangingResult is the phase's measurements, for the report.
type hangingResult struct {
	spec   hangingSpec
	rounds []hangingRound
}

// hangingRequest is a streaming request (as in the stream phase) for model.
func (b *bencher) hangingRequest(model string) *request {
	rq := b.streaming(streamChunks, streamInterval)
	rq.body = []byte(strings.Replace(string(rq.body), `"model":"`+benchModel+`"`, `"model":"`+model+`"`, 1))
	return rq
}

// hangingPrimary runs the phase into rep.hanging.
func (b *bencher) hangingPrimary(ctx context.Context, rep *report) {
	spec := b.s.hanging
	res := &hangingResult{spec: spec}
	rep.hanging = res
	c, url := b.clients[gateway], b.urls[gateway]+chatPath
	alone := b.hangingRequest(hangAloneModel)
	// Warm the backup-only route (its provider's pool and records) like the others.
	openLoop(ctx, c, url, alone, openLoopSpec{rate: spec.rate, duration: 500 * time.Millisecond, maxInFlight: maxInFlight, timeout: requestTimeout})
	b.st.waitRecordsWritten(ctx, 10*time.Second)
	run := openLoopSpec{rate: spec.rate, duration: spec.duration, maxInFlight: maxInFlight, timeout: requestTimeout}
	for round := range spec.rounds {
		hr := hangingRound{coolAt: -1}
		for _, which := range rotate([]string{"alone", "hanging"}, round) {
			if ctx.Err() != nil {
				return
			}
			busy0, own0, wall0 := machineBusy(), b.ownCPU(), time.Now()
			if which == "alone" {
				hr.alone = openLoop(ctx, c, url, alone, run)
			} else {
				hr.hanging, hr.coolings, hr.timeouts = b.hangingRun(ctx, round, run)
				hr.coolAt = coolingBegan(hr.hanging, spec.rate)
			}
			foreign := max(0, float64(machineBusy()-busy0-(b.ownCPU()-own0))/float64(time.Since(wall0)))
			if which == "alone" {
				hr.foreignAlone = foreign
			} else {
				hr.foreignHanging = foreign
			}
			b.st.waitRecordsWritten(ctx, 10*time.Second)
			sleepCtx(ctx, 200*time.Millisecond)
		}
		res.rounds = append(res.rounds, hr)
		a, h := res.window(len(res.rounds) - 1)
		cooled := "never cooled"
		if hr.coolAt >= 0 {
			cooled = fmt.Sprintf("cooled %v into the run", hr.coolAt.Round(time.Millisecond))
		}
		logf("hanging primary  round %d: %s; after that p99 first chunk %s ms (backup alone %s ms); %.0f timeouts on the primary, %d probes",
			round+1, cooled, ms(pct(h.first, 0.99)), ms(pct(a.first, 0.99)), hr.timeouts, hr.probes())
	}
}

// ownCPU is the CPU used so far by the processes this phase runs: the gateway,
// the driver and the mock, and Postgres.
func (b *bencher) ownCPU() time.Duration {
	return b.procCPU(b.st.gateway) + b.sideCPU() + b.st.pgCPU()
}

// hangingRun runs the hanging primary of round once, and returns the run and the
// primary's moves to cooling and first-byte timeouts during it.
func (b *bencher) hangingRun(ctx context.Context, round int, spec openLoopSpec) (runResult, float64, float64) {
	provider := `provider="` + hangingProvider(round) + `"`
	counters := func() (coolings, timeouts float64) {
		coolings, _ = b.st.gatewaySeries(ctx, "gateway_health_transitions_total", provider, `to="cooling"`)
		timeouts, _ = b.st.gatewaySeries(ctx, "gateway_watchdog_timeouts_total", provider, `kind="first_byte"`)
		return coolings, timeouts
	}
	c0, t0 := counters()
	r := openLoop(ctx, b.clients[gateway], b.urls[gateway]+chatPath, b.hangingRequest(hangingModel(round)), spec)
	c1, t1 := counters()
	return r, c1 - c0, t1 - t0
}

// coolingBegan is when, into the run, the primary began cooling, or -1: the
// moment its failures-th first-byte timeout fired, that is the failures-th
// earliest send time plus first_byte among the requests that waited the
// timeout out. Requests sent after it skip the primary; those already waiting
// on it then are abandoned and fail over at once (they are "before", with a
// wait shorter than the timeout, so the first request answered without the
// full wait no longer marks the moment). Send times, not the schedule: a
// request the driver sent late started its wait late.
func coolingBegan(r runResult, rate int) time.Duration {
	var fired []time.Duration
	for i, s := range r.samples {
		if s.err == "" && s.first >= hangFirstByte {
			fired = append(fired, sentAt(r, i, rate)+hangFirstByte)
		}
	}
	if len(fired) < hangFailures {
		return -1
	}
	slices.Sort(fired)
	return fired[hangFailures-1]
}

// paidBefore counts the hanging run's requests sent before the primary began
// cooling that waited out the whole first-byte timeout: the failures whose
// timeouts cooled it (the others waiting then were abandoned).
func paidBefore(r hangingRound, rate int) int {
	n := 0
	for i, s := range r.hanging.samples {
		if s.err == "" && s.first >= hangFirstByte && (r.coolAt < 0 || sentAt(r.hanging, i, rate) < r.coolAt) {
			n++
		}
	}
	return n
}

// sentAt is when, into the open-loop run r, request i was sent: its due time plus
// the driver's lag.
func sentAt(r runResult, i, rate int) time.Duration {
	t := time.Duration(i) * (time.Second / time.Duration(rate))
	if i < len(r.lag) {
		t += r.lag[i]
	}
	return t
}

// windowStats is one run split at the moment the primary began cooling.
type windowStats struct {
	before int // requests sent before it: for the hanging run, all waited on the primary
	// After it: requests, failed ones, the successful ones' latencies (sorted), and
	// how many had their first chunk no sooner than the timeout (the probes, and
	// whatever the machine's noise delays that long).
	requests, errors int
	first, total     []time.Duration
	slow             int
}

// window splits round i's runs at the moment the primary began cooling (the same
// offset into both runs: the backup-alone run has no cooldown of its own).
func (h *hangingResult) window(i int) (alone, hanging windowStats) {
	r := h.rounds[i]
	at := r.coolAt
	if at < 0 {
		at = time.Duration(math.MaxInt64) // never cooled: every request is "before"
	}
	split := func(rr runResult) windowStats {
		var w windowStats
		for j, s := range rr.samples {
			if sentAt(rr, j, h.spec.rate) < at {
				w.before++
				continue
			}
			w.requests++
			if s.err != "" {
				w.errors++
				continue
			}
			if s.first >= hangFirstByte {
				w.slow++
			}
			w.first = append(w.first, s.first)
			w.total = append(w.total, s.total)
		}
		slices.Sort(w.first)
		slices.Sort(w.total)
		return w
	}
	return split(r.alone), split(r.hanging)
}

// medianOver is the median over rounds of f(round's backup-alone window, its
// hanging window).
func (h *hangingResult) medianOver(f func(alone, hanging windowStats) time.Duration) time.Duration {
	var v []time.Duration
	for i := range h.rounds {
		a, hw := h.window(i)
		v = append(v, f(a, hw))
	}
	return median(v)
}

func latencyOf(w windowStats, first bool) []time.Duration {
	if first {
		return w.first
	}
	return w.total
}

// p99Ratios is, per round, the hanging run's p99 after the first cooldown over the
// backup-alone run's, for the first chunk or the last. The two runs of a round are
// back to back, so they share the machine's mood.
func (h *hangingResult) p99Ratios(first bool) []float64 {
	var out []float64
	for i := range h.rounds {
		a, hw := h.window(i)
		if al := pct(latencyOf(a, first), 0.99); al > 0 {
			out = append(out, float64(pct(latencyOf(hw, first), 0.99))/float64(al))
		}
	}
	return out
}

// p99Ratio is the median of p99Ratios, NaN without any.
func (h *hangingResult) p99Ratio(first bool) float64 {
	v := h.p99Ratios(first)
	if len(v) == 0 {
		return math.NaN()
	}
	slices.Sort(v)
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[len(v)/2]
}

// allowedPaid is the issue's bound on the requests that pay the timeout in one run:
// failures for each cooldown period the run spans, plus the probes.
func (h *hangingResult) allowedPaid(probes int) int {
	periods := int(math.Ceil(float64(h.spec.duration) / float64(hangCooldown)))
	return hangFailures*periods + probes
}

// inFlightFloor is how many requests must wait on the primary before it can cool
// under open-loop load: every request that starts before the failures-th timeout
// fires, that is the failures and the rate × first_byte requests started during
// the last one's wait, less one (the failures-th starts that wait).
func (h *hangingResult) inFlightFloor() int {
	return hangFailures - 1 + int(math.Round(float64(h.spec.rate)*hangFirstByte.Seconds()))
}

// errs is the phase's failed requests by kind, both runs of every round.
func (h *hangingResult) errs() map[string]int {
	out := map[string]int{}
	for _, r := range h.rounds {
		for _, s := range r.alone.samples {
			if s.err != "" {
				out["backup alone: "+s.err]++
			}
		}
		for _, s := range r.hanging.samples {
			if s.err != "" {
				out["hanging primary: "+s.err]++
			}
		}
	}
	return out
}

// write prints the phase's table.
func (h *hangingResult) write(w io.Writer) {
	if len(h.rounds) == 0 {
		return
	}
	fmt.Fprintf(w, "\nHanging primary (gateway only): streams at %d/s for %v per run, %d rounds. The primary (priority 0) sends its headers and never a first byte; first_byte %v, health {failures: %d, cooldown: %v}; the backup (priority 1) is the mock; the backup-alone run is a route with the backup only. The primary cools when timeout number %d fires; the %d or so requests already waiting on it then (rate × first_byte + failures − 1) are abandoned and fail over at once, so only the first %[5]d pay the whole timeout. \"After the first cooldown\": requests sent after that timeout fired (the same offset in the backup-alone run of the round); latencies are medians over rounds.\n\n",
		h.spec.rate, h.spec.duration, len(h.rounds), hangFirstByte, hangFailures, hangCooldown, hangFailures, h.inFlightFloor())
	tb := &table{}
	tb.add("hanging primary", "backup alone", "hanging primary in front", "in front / alone")
	var reqA, reqH, errA, errH int
	var cool, slowA, slowH, primary, foreignA, foreignH []string
	for i, r := range h.rounds {
		a, hw := h.window(i)
		reqA, reqH = reqA+a.requests, reqH+hw.requests
		errA, errH = errA+a.errors, errH+hw.errors
		if r.coolAt < 0 {
			cool = append(cool, "never")
		} else {
			cool = append(cool, fmt.Sprintf("%s / %d", ms(r.coolAt), hw.before))
		}
		slowA = append(slowA, fmt.Sprint(a.slow))
		slowH = append(slowH, fmt.Sprint(hw.slow))
		primary = append(primary, fmt.Sprintf("%.0f / %d", r.timeouts, r.probes()))
		foreignA = append(foreignA, fmt.Sprintf("%.2f", r.foreignAlone))
		foreignH = append(foreignH, fmt.Sprintf("%.2f", r.foreignHanging))
	}
	tb.add("requests / errors after the first cooldown, all rounds", fmt.Sprintf("%d / %d", reqA, errA), fmt.Sprintf("%d / %d", reqH, errH), "")
	tb.add("first cooldown began (ms into the run) / requests sent before it, per round", "–", strings.Join(cool, "; "), "")
	for _, first := range []bool{true, false} {
		name := "last chunk"
		if first {
			name = "first chunk"
		}
		at := func(p float64) (string, string) {
			return ms(h.medianOver(func(a, _ windowStats) time.Duration { return pct(latencyOf(a, first), p) })),
				ms(h.medianOver(func(_, hw windowStats) time.Duration { return pct(latencyOf(hw, first), p) }))
		}
		a50, h50 := at(0.50)
		a99, h99 := at(0.99)
		var per []string
		for _, v := range h.p99Ratios(first) {
			per = append(per, fmt.Sprintf("%.2f", v))
		}
		tb.add(name+" p50 / p99 after the first cooldown (ms)", a50+" / "+a99, h50+" / "+h99,
			"p99 "+ratioOrNA(h.p99Ratio(first))+" (rounds: "+strings.Join(per, ", ")+")")
	}
	tb.add(fmt.Sprintf("first chunk ≥ %v after the first cooldown (probes, and noise), per round", hangFirstByte),
		strings.Join(slowA, ", "), strings.Join(slowH, ", "), "")
	tb.add("primary's first-byte timeouts / probes (gateway metrics), per round", "–", strings.Join(primary, "; "), "")
	tb.add("CPUs used by other processes, per round", strings.Join(foreignA, ", "), strings.Join(foreignH, ", "), "")
	tb.write(w)
}

// writeTargets adds the phase's targets to tb. The requests that paid the timeout
// are the primary's first-byte timeouts as the gateway counts them: one request
// waits on the primary at most once, and latency alone would also count requests
// the machine's noise delayed.
func (h *hangingResult) writeTargets(tb *table, verdict func(ok, measured bool) string) {
	if len(h.rounds) == 0 {
		return
	}
	for _, first := range []bool{true, false} {
		name := "last chunk"
		if first {
			name = "first chunk"
		}
		v := h.p99Ratio(first)
		tb.add("hanging primary: "+name+" p99 after the first cooldown ≤ 1.2x backup alone's", ratioOrNA(v), verdict(v <= 1.2, !math.IsNaN(v)))
	}
	var paid, allowed, after, probes []string
	okIssue, okAfter := true, true
	for _, r := range h.rounds {
		n, p := int(r.timeouts), r.probes()
		later := n - paidBefore(r, h.spec.rate)
		paid = append(paid, fmt.Sprint(n))
		allowed = append(allowed, fmt.Sprint(h.allowedPaid(p)))
		after = append(after, fmt.Sprint(later))
		probes = append(probes, fmt.Sprint(p))
		okIssue = okIssue && n <= h.allowedPaid(p)
		okAfter = okAfter && r.coolAt >= 0 && later <= p
	}
	tb.add(fmt.Sprintf("hanging primary: requests that paid the timeout ≤ failures (%d) per cooldown period (%v) + probes, per run", hangFailures, hangCooldown),
		strings.Join(paid, ", ")+" (allowed "+strings.Join(allowed, ", ")+")", verdict(okIssue, true))
	tb.add("hanging primary: after the first cooldown began, only the probes paid the timeout",
		strings.Join(after, ", ")+" (probes "+strings.Join(probes, ", ")+")", verdict(okAfter, true))
}
