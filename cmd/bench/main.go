// Command bench measures what the gateway costs: it drives the same load straight at
// a mock upstream (direct), through a bare httputil.ReverseProxy (baseline, see
// cmd/baselineproxy) and through the gateway with its full default path (client key,
// planning, admission, Postgres records, metrics), and prints one markdown table with
// latency, the latency each proxy adds over direct, throughput, CPU per request and
// peak memory, and the targets as met or missed.
//
// Run it with `make bench` (which builds bin/gateway and bin/mockupstream first) from
// the repository root. Everything runs as child processes on loopback ports:
//
//   - open loop, non-streaming: fixed rates (500, 1000, 2000 RPS), latency measured
//     from each request's scheduled start, so coordinated omission cannot hide stalls;
//   - closed loop: 64 keep-alive connections as fast as they go, for throughput;
//   - streaming at a moderate rate: time to the first and to the last chunk;
//   - 2,000 slow streams held open at once, for the proxies' resident memory;
//   - hanging primary (gateway only): streams through a primary that never sends a
//     first byte in front of a backup, against the backup alone, for what provider
//     health saves (hanging.go);
//   - tail rescue (gateway only): streams through a primary that answers 5% of them
//     after a 2 s first byte, in front of a fast backup, with hedging off and on
//     (after: p95), for the first chunk's p99 and the upstream requests hedging adds
//     (tail.go).
//
// Runs are interleaved and repeated: each round runs the three targets back to back
// in a rotated order, latency figures are medians over rounds of each round's
// percentile, and added latency is paired within a round. A neighbour that steals
// the CPU during one run then moves one round, not the result.
//
// Environment: BENCH_QUICK=1 runs fewer rates, one round and shorter runs (about a
// minute); BENCH_PPROF=DIR also captures the gateway's CPU and allocation profiles
// under load, and its heap with the streams open, into DIR (about 30 s more); BENCH_OUT=FILE writes the report there too;
// BENCH_JSON=FILE (default data/bench-results.json) is where the results go as JSON, for
// cmd/benchchart's chart and table; BENCH_KEEP=1 keeps
// the temp dir with the processes' logs; BENCH_BIN (default bin) holds the binaries;
// BENCH_RECORDS=off runs the gateway without Postgres, to see what records cost;
// BENCH_PG=shared skips scripts/pg-local.sh and uses the server on 127.0.0.1:5432;
// BENCH_PROMPT=BYTES makes the stream phase's requests a conversation of about that size;
// BENCH_KEYS=N inserts N API keys in Postgres before the gateway starts and reports their load;
// BENCH_ONLY=hold (or open, closed, stream, hanging, tail, translate, ledger, replicas, budget, tracing, cache, comma-separated) runs
// only those phases, for iterating on one figure.
//
// The ledger phase (ledger.go) times the operator console's reads, GET /admin/requests and
// GET /admin/stats/providers, against a scratch database of a million generated request rows
// served by a second gateway process; BENCH_ONLY=ledger runs it alone.
//
// The budget phase (budget.go) drives the same load at a gateway with its budgets in
// Redis for a client without a budget and one with a budget it never reaches, and
// counts at Redis the calls a budget adds per request; BENCH_ONLY=budget runs it alone.
package main

import (
	"context"
	"debug/buildinfo"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// What the mock upstream does for every benchmark request.
const (
	benchModel  = "gpt-4o-mini"
	mockLatency = time.Millisecond // before the answer (or the stream's headers)
	mockWords   = 20               // words of a non-streaming answer
	// A streaming answer: this many content chunks, this far apart.
	streamChunks   = 5
	streamInterval = 5 * time.Millisecond
)

// settings size the benchmark; quick mode keeps it under a minute.
type settings struct {
	quick        bool
	binDir       string
	rates        []int
	openDur      time.Duration
	rounds       int
	closedConns  int
	closedDur    time.Duration
	streamRates  []int
	streamDur    time.Duration
	streamRounds int
	hold         holdSpec
	hanging      hangingSpec
	tail         tailSpec
	translate    translateSpec
	ledger       ledgerSpec
	replicas     replicasSpec
	budgetPhase  budgetSpec
	tracePhase   traceSpec
	cachePhase   cacheSpec
	budget       time.Duration // the whole run, a safety net over the sizes above
	pprofDir     string
	recordsOff   bool            // diagnostic: the gateway without Postgres records
	promptBytes  int             // BENCH_PROMPT: the stream phase's conversation size; 0: one short message
	only         map[string]bool // BENCH_ONLY: the phases to run; empty runs all
	apiKeys      int             // BENCH_KEYS: api_keys rows in Postgres before the gateway starts
}

// phases BENCH_ONLY can name.
var phaseNames = []string{"open", "closed", "stream", "hold", "hanging", "tail", "translate", "ledger", "replicas", "budget", "tracing", "cache"}

// runs reports whether phase is part of this run.
func (s settings) runs(phase string) bool { return len(s.only) == 0 || s.only[phase] }

func loadSettings() settings {
	s := settings{
		binDir: "bin", rates: []int{500, 1000, 2000}, openDur: 2500 * time.Millisecond, rounds: 5,
		closedConns: 64, closedDur: 2500 * time.Millisecond,
		// Five stream rounds, not three: the first chunk's added p50 is
		// a few hundred µs, and its per-round ratio spread 0.7-2.1x in one
		// run; the median of three moved with a single disturbed round.
		streamRates: []int{500, 1000}, streamDur: 3 * time.Second, streamRounds: 5,
		hold:    holdSpec{streams: 2000, rampRate: 1000, hold: 4 * time.Second},
		hanging: hangingSpec{rate: 200, duration: 8 * time.Second, rounds: 3},
		tail:    tailSpec{rate: 200, duration: 6 * time.Second, rounds: 3, warmup: 1500 * time.Millisecond},
		// Seven translate rounds of 2 s, not three of 3 s: the per-round
		// ratio of two added times of 0.25-0.4 ms spread 0.83-2.38x in one
		// run, so the median of three was one disturbed round's.
		translate:   translateSpec{rate: 200, duration: 2 * time.Second, rounds: 7},
		ledger:      ledgerSpec{rows: 1_000_000, samples: 300, warmup: 20},
		replicas:    replicasSpec{attempts: 20000, conns: 48, duration: 3 * time.Second, rounds: 3, redisAddr: "127.0.0.1:6379"},
		budgetPhase: budgetSpec{rate: 500, duration: 2500 * time.Millisecond, rounds: 5, sharedAddr: "127.0.0.1:6379"},
		// Tracing's off target is 2% wide: twice the rounds of the other
		// phases, and longer runs, so that the 10 ms CPU ticks and one
		// noisy round cannot decide it (5 rounds of 2.5 s swung ±7%).
		tracePhase: traceSpec{rate: 500, duration: 4 * time.Second, rounds: 10},
		cachePhase: cacheSpec{rate: 500, duration: 2500 * time.Millisecond, rounds: 5},
		budget:     540 * time.Second, pprofDir: os.Getenv("BENCH_PPROF"),
		recordsOff: os.Getenv("BENCH_RECORDS") == "off",
	}
	if v := os.Getenv("BENCH_BIN"); v != "" {
		s.binDir = v
	}
	if v := os.Getenv("BENCH_PROMPT"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			fmt.Fprintf(os.Stderr, "bench: BENCH_PROMPT=%q: want a size in bytes\n", v)
			os.Exit(2)
		}
		s.promptBytes = n
	}
	if v := os.Getenv("BENCH_KEYS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			fmt.Fprintf(os.Stderr, "bench: BENCH_KEYS=%q: want a number of keys\n", v)
			os.Exit(2)
		}
		s.apiKeys = n
	}
	if q := os.Getenv("BENCH_QUICK"); q != "" && q != "0" && q != "false" {
		s.quick = true
		s.rates, s.openDur, s.rounds = []int{1000, 2000}, 1500*time.Millisecond, 1
		s.closedDur = 1500 * time.Millisecond
		s.streamRates, s.streamDur, s.streamRounds = []int{500}, 1500*time.Millisecond, 1
		s.hold.hold = time.Second
		s.hanging.duration, s.hanging.rounds = 5*time.Second, 1
		s.tail.duration, s.tail.rounds = 4*time.Second, 1
		s.translate.duration, s.translate.rounds = 1500*time.Millisecond, 1
		s.ledger.rows, s.ledger.samples, s.ledger.warmup = 200_000, 100, 10
		s.replicas.attempts, s.replicas.duration, s.replicas.rounds = 4000, 1500*time.Millisecond, 1
		s.budgetPhase.duration, s.budgetPhase.rounds = 1500*time.Millisecond, 2
		s.tracePhase.duration, s.tracePhase.rounds = 1500*time.Millisecond, 2
		s.cachePhase.duration, s.cachePhase.rounds = 1500*time.Millisecond, 2
		s.budget = 100 * time.Second
	}
	if v := os.Getenv("BENCH_ONLY"); v != "" {
		s.only = map[string]bool{}
		for _, p := range strings.Split(v, ",") {
			s.only[strings.TrimSpace(p)] = true
		}
	}
	if s.pprofDir != "" {
		s.budget += 30 * time.Second // two extra 12 s profiled runs
	}
	if s.runs("budget") {
		s.budget += 60 * time.Second // a gateway with Redis, then ~35 s of runs
	}
	s.tracePhase.baseRef, s.tracePhase.baseBin = os.Getenv("BENCH_TRACE_BASE_REF"), os.Getenv("BENCH_TRACE_BASE_BIN")
	if v := os.Getenv("BENCH_TRACE_OUTAGE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			fmt.Fprintf(os.Stderr, "bench: BENCH_TRACE_OUTAGE=%q: want a duration (5m)\n", v)
			os.Exit(2)
		}
		s.tracePhase.outage = d
	}
	if s.runs("tracing") {
		// Building the baseline, four gateways, then four runs a round;
		// and the outage, when asked for.
		s.budget += 90*time.Second + 4*time.Duration(s.tracePhase.rounds)*(s.tracePhase.duration+2*time.Second) + s.tracePhase.outage
	}
	if s.runs("cache") {
		s.budget += 60 * time.Second // a gateway, then four runs per round
	}
	if s.runs("ledger") {
		s.budget += 150 * time.Second // generating the ledger, then ~17 query shapes
	}
	return s
}

var logStart = time.Now()

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench %5.1fs: "+format+"\n", append([]any{time.Since(logStart).Seconds()}, args...)...)
}

func main() {
	if err := run(); err != nil {
		logf("%v", err)
		os.Exit(1)
	}
}

func run() error {
	s := loadSettings()
	for p := range s.only {
		if !slices.Contains(phaseNames, p) {
			return fmt.Errorf("BENCH_ONLY: unknown phase %q (have %v)", p, phaseNames)
		}
	}
	if _, err := os.Stat("go.mod"); err != nil {
		return fmt.Errorf("run from the repository root (make bench does): %w", err)
	}
	if s.pprofDir != "" {
		if err := os.MkdirAll(s.pprofDir, 0o755); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, s.budget)
	defer cancel()
	started := time.Now()

	st, err := startStack(ctx, s)
	if err != nil {
		return err
	}
	defer st.close()
	logf("mock %s, baseline %s, gateway %s (logs in %s)", st.mockURL, st.baselineURL, st.gateURL, st.tmp)

	b := &bencher{s: s, st: st, clients: map[string]*http.Client{}, urls: map[string]string{
		direct: st.mockURL, baseline: st.baselineURL, gateway: st.gateURL,
	}}
	for _, t := range targetNames {
		b.clients[t] = newClient()
	}
	rep := &report{header: environment(s, st, started), records: map[string]float64{}}
	if err := b.runAll(ctx, rep); err != nil {
		return err
	}
	if ctx.Err() != nil {
		rep.notes = append(rep.notes, fmt.Sprintf("**run cut short**: %v (time budget %v); the table holds what finished", context.Cause(ctx), s.budget))
	}
	rep.notes = append(rep.notes, fmt.Sprintf("whole benchmark took %v", time.Since(started).Round(time.Second)))

	var out strings.Builder
	rep.write(&out)
	fmt.Print(out.String())
	if path := os.Getenv("BENCH_OUT"); path != "" {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			return err
		}
	}
	path := jsonPath()
	if err := writeJSON(path, rep.results(s, started)); err != nil {
		return err
	}
	logf("results in %s (make bench-chart draws them)", path)
	return nil
}

// environment is the report's header: when, where and how it was measured.
func environment(s settings, st *stack, started time.Time) []string {
	mode := "full"
	if s.quick {
		mode = "quick (BENCH_QUICK=1)"
	}
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		first, _, _ := strings.Cut(string(b), "\n")
		mem = strings.Join(strings.Fields(first)[1:], " ")
	}
	gover, _ := exec.Command("go", "env", "GOVERSION").Output()
	lines := []string{
		fmt.Sprintf("Measured %s, mode %s. Gateway under test: %s/gateway built %s from %s.",
			started.Format("2006-01-02 15:04 MST"), mode, s.binDir, st.gatewayBuilt.UTC().Format("2006-01-02 15:04:05 MST"),
			builtFrom(s.binDir)),
		fmt.Sprintf("Machine: %d CPUs (%s), MemTotal %s, %s %s/%s; load driver, mock, proxies and Postgres share it.",
			runtime.NumCPU(), model, mem, strings.TrimSpace(string(gover)), runtime.GOOS, runtime.GOARCH),
		fmt.Sprintf("Mock upstream: %v latency, %d-word answers; streams %d chunks %v apart. Postgres: %s.",
			mockLatency, mockWords, streamChunks, streamInterval, st.pg.source),
		fmt.Sprintf("Open loop %v per run at %v RPS, closed loop %d connections %v per run, %d rounds each; streams %v per second %v per run, %d rounds; each round runs the three targets back to back in a rotated order; latency figures are medians over rounds of each round's percentile, added latency is paired within a round.",
			s.openDur, s.rates, s.closedConns, s.closedDur, s.rounds, s.streamRates, s.streamDur, s.streamRounds),
	}
	if s.apiKeys > 0 {
		lines = append(lines, fmt.Sprintf("BENCH_KEYS=%d: the gateway loaded %d API keys from Postgres at start in %s (its log); the load driver is still a routes-file client.",
			s.apiKeys, s.apiKeys, st.keysLoad))
	}
	if s.promptBytes > 0 {
		lines = append(lines, fmt.Sprintf("BENCH_PROMPT=%d: each stream request carries a conversation of %d bytes.", s.promptBytes, len(longConversation(s.promptBytes))))
	}
	return lines
}

// requests the benchmark sends; the client key is the gateway's, and direct and
// baseline requests carry it too so that every path sends the same bytes.
func (b *bencher) nonStreaming() *request {
	return &request{
		body:   []byte(`{"model":"` + benchModel + `","messages":[{"role":"user","content":"Say hello in one short sentence."}],"max_tokens":32}`),
		header: b.header(nil),
	}
}

func (b *bencher) streaming(chunks int, interval time.Duration) *request {
	return &request{
		body: []byte(`{"model":"` + benchModel + `","messages":[{"role":"user","content":"Say hello in one short sentence."}],` +
			`"max_tokens":32,"stream":true,"stream_options":{"include_usage":true}}`),
		header: b.header(map[string]string{
			"X-Mock-Chunks": fmt.Sprint(chunks), "X-Mock-Chunk-Interval": interval.String(),
		}),
		stream: true,
	}
}

// longConversation is a streaming chat request of about size bytes: the
// conversation a chat application sends with every turn, which the gateway
// reads and validates whole before its upstream request leaves, where the
// bare proxy streams it through (BENCH_PROMPT).
func longConversation(size int) []byte {
	var sb strings.Builder
	sb.WriteString(`{"model":"` + benchModel + `","messages":[`)
	turn := strings.Repeat(`Tell me more about the sea, the \"deep\" part of it. `, 20)
	for i := 0; sb.Len() < size; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		fmt.Fprintf(&sb, `{"role":%q,"content":"%s(%d)"}`, role, turn, i)
	}
	sb.WriteString(`],"max_tokens":32,"stream":true,"stream_options":{"include_usage":true}}`)
	return []byte(sb.String())
}

func (b *bencher) header(extra map[string]string) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Authorization", "Bearer "+b.st.clientKey)
	for k, v := range extra {
		h.Set(k, v)
	}
	return h
}

// builtFrom names the commit the gateway binary in binDir was built from: its
// VCS stamp when the toolchain wrote one, else (stamping is off with
// GOFLAGS=-buildvcs=false) this checkout's HEAD for the default bin/, and
// nothing it cannot know for a BENCH_BIN from elsewhere.
func builtFrom(binDir string) string {
	if info, err := buildinfo.ReadFile(filepath.Join(binDir, "gateway")); err == nil {
		rev, modified := "", false
		for _, kv := range info.Settings {
			switch kv.Key {
			case "vcs.revision":
				rev = kv.Value
			case "vcs.modified":
				modified = kv.Value == "true"
			}
		}
		if len(rev) > 7 {
			rev = rev[:7]
		}
		switch {
		case rev != "" && modified:
			return "commit " + rev + " plus uncommitted changes"
		case rev != "":
			return "commit " + rev
		}
	}
	if binDir != "bin" {
		return "a build without a VCS stamp (BENCH_BIN=" + binDir + "): say which commit when you report it"
	}
	head, _ := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	return "the working tree at commit " + strings.TrimSpace(string(head)) + " (uncommitted changes included)"
}
