package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The budget phase (issue 30): what a budget costs a request when the
// budgets live in Redis. One gateway with GATEWAY_REDIS_URL serves two
// clients of the same model: one without a budget, one with a budget far
// above what the phase spends, so every request reserves and settles and
// none is refused. The same open-loop load goes to each in alternating runs
// (the order rotated per round), and Redis's own counters are read around
// each run:
//
//   - script calls (evalsha, eval, fcall) per request, and Redis's read
//     events per request (every round trip, pipelined or not), each minus
//     the unbudgeted run's per request, so what every request pays anyway
//     (the shared admission gate's take, the quota heartbeat) cancels out;
//   - of the script calls, those that reserve (the reserve script is the
//     only one to HSET, once per budget) and those that settle (the settle
//     script is the only one to HDEL, once per budget), since Redis counts
//     the commands a script runs in its commandstats too.
//
// The latency figure is each round's budgeted p50 over its unbudgeted p50,
// the median over rounds.
//
// Redis is a private redis-server on a loopback port when one is on PATH,
// so other users of the shared Redis cannot move the counters (INFO
// commandstats is server-wide); else the shared one at spec.sharedAddr,
// database budgetDB, emptied first, with a note that the counts may carry
// other clients' commands.
const (
	budgetDB         = 7
	budgetFreeClient = "bench-free"
	budgetClient     = "bench-budgeted"
	budgetUSD        = 1_000_000 // a day: the phase spends well under a cent
)

// Targets of the phase.
const (
	budgetMaxReserves = 1.0 // script calls to reserve, per budgeted request
	budgetMaxSettles  = 1.0 // script calls to settle, per budgeted request
	budgetMaxP50Ratio = 1.1 // budgeted p50 / unbudgeted p50
	// budgetSlack absorbs what the subtraction leaves that is not per
	// request: the unbudgeted side's own script calls per request move by
	// a few hundredths from run to run (admission releases go in batches,
	// renewals by the clock; measured 1.93-1.98). An extra call on every
	// request is 1.0 above the target, far outside it.
	budgetSlack = 0.1
)

type budgetSpec struct {
	rate       int
	duration   time.Duration
	rounds     int
	sharedAddr string // the fallback Redis, when redis-server is not on PATH
}

// redisCounts are Redis's counters at one moment, or their change over a run.
type redisCounts struct {
	scripts  float64 // evalsha + eval + fcall (and their _ro forms)
	reserves float64 // HSET: only the reserve script runs it, once per budget
	settles  float64 // HDEL: only the settle script runs it, once per budget
	reads    float64 // total_reads_processed: read events, one per round trip
	usec     float64 // the script calls' time inside Redis, µs
}

func (c redisCounts) minus(o redisCounts) redisCounts {
	return redisCounts{c.scripts - o.scripts, c.reserves - o.reserves, c.settles - o.settles, c.reads - o.reads, c.usec - o.usec}
}

func (c redisCounts) plus(o redisCounts) redisCounts {
	return redisCounts{c.scripts + o.scripts, c.reserves + o.reserves, c.settles + o.settles, c.reads + o.reads, c.usec + o.usec}
}

func (c redisCounts) per(n int) redisCounts {
	f := float64(max(n, 1))
	return redisCounts{c.scripts / f, c.reserves / f, c.settles / f, c.reads / f, c.usec / f}
}

// budgetRun is one run: its samples, what Redis counted meanwhile, and
// the CPU the gateway and (when it is the phase's own) Redis used.
type budgetRun struct {
	run             runResult
	redis           redisCounts
	gwCPU, redisCPU time.Duration
}

type budgetRound struct{ free, budgeted budgetRun }

type budgetResult struct {
	spec   budgetSpec
	redis  string // which Redis, for the report
	rounds []budgetRound
	spent  float64 // the budget's spend at the end (GET /admin/budgets), to show requests settled
	err    string
}

// budgets runs the phase into rep.budget.
func (b *bencher) budgets(ctx context.Context, rep *report) {
	res := &budgetResult{spec: b.s.budgetPhase}
	rep.budget = res
	if err := b.runBudget(ctx, res); err != nil {
		res.err = err.Error()
		logf("budget phase: %v", err)
		return
	}
	c, lat := res.added(), res.p50Ratio()
	logf("budget: %.3f reserve + %.3f settle script calls, %.3f added round trips per request; p50 %.2fx",
		c.reserves, c.settles, c.reads, lat)
}

func (b *bencher) runBudget(ctx context.Context, res *budgetResult) error {
	spec := res.spec
	addr, rp, err := privateRedis(ctx, b.st.tmp)
	if err != nil {
		logf("budget: no private redis-server (%v); using %s db %d", err, spec.sharedAddr, budgetDB)
		addr = spec.sharedAddr
		res.redis = fmt.Sprintf("the shared Redis at %s, database %d (its counters are server-wide: other clients' commands meanwhile count too)", addr, budgetDB)
	} else {
		defer rp.stop(3 * time.Second)
		res.redis = "a private redis-server on " + addr
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, DB: budgetDB})
	defer rdb.Close()
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		return fmt.Errorf("no Redis at %s: %w", addr, err)
	}
	defer rdb.FlushDB(context.WithoutCancel(ctx))

	freeKey, budgetKey := "sk-bench-free-"+randomHex(12), "sk-bench-budget-"+randomHex(12)
	routes := filepath.Join(b.st.tmp, "config", "budget-routes.yaml") // away from the logs, as stack.go explains
	sum := func(k string) string { return fmt.Sprintf("%x", sha256.Sum256([]byte(k))) }
	yaml := phaseRoutes(b.st.mockURL, fmt.Sprintf(`clients:
  - { name: %s, key_sha256: "%s", priority: interactive }
  - { name: %s, key_sha256: "%s", priority: interactive, budget: { usd: %d, per: day } }
`, budgetFreeClient, sum(freeKey), budgetClient, sum(budgetKey), budgetUSD))
	if err := os.WriteFile(routes, []byte(yaml), 0o600); err != nil {
		return err
	}
	env := slices.Concat(cleanEnv(), []string{
		"GATEWAY_LISTEN_ADDR=" + loopbackAny,
		"GATEWAY_CONFIG=" + routes,
		"GATEWAY_DATABASE_URL=" + b.st.pg.dsn, // the ledger budgets rebuild from; empty with records off
		"GATEWAY_SPOOL_DIR=" + filepath.Join(b.st.tmp, "spool-budget"),
		"GATEWAY_LOG_FORMAT=json",
		"GATEWAY_ADMIN_TOKEN=" + b.st.adminToken,
		"GATEWAY_REPLICA_ID=bench-budget",
		"GATEWAY_REDIS_URL=" + fmt.Sprintf("redis://%s/%d", addr, budgetDB),
		"GATEWAY_SHUTDOWN_GRACE=2s",
		"BENCH_UPSTREAM_KEY=sk-upstream-" + randomHex(8),
	})
	gw, base, err := b.st.startPhaseGateway(ctx, "gateway-budget", env)
	if err != nil {
		return err
	}
	defer gw.stop(5 * time.Second)

	rq := func(key string) *request {
		r := b.nonStreaming()
		r.header = r.header.Clone()
		r.header.Set("Authorization", "Bearer "+key)
		return r
	}
	reqs := map[string]*request{"free": rq(freeKey), "budgeted": rq(budgetKey)}
	clients := map[string]*http.Client{"free": newClient(), "budgeted": newClient()}
	for _, c := range clients {
		defer c.CloseIdleConnections()
	}
	run := openLoopSpec{rate: spec.rate, duration: spec.duration, maxInFlight: maxInFlight, timeout: requestTimeout}
	warm := run
	warm.duration = time.Second
	// Warm-up, not measured: the pools, the budget's first window (rebuilt
	// from the ledger once), the scripts loaded into Redis.
	for _, which := range []string{"free", "budgeted"} {
		r := openLoop(ctx, clients[which], base+chatPath, reqs[which], warm)
		if n := runErrors(r); n > 0 {
			return fmt.Errorf("%s warm-up: %d of %d requests failed (first: %s)", which, n, len(r.samples), firstErr(r))
		}
	}
	for round := range spec.rounds {
		var br budgetRound
		for _, which := range rotate([]string{"free", "budgeted"}, round) {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			sleepCtx(ctx, 200*time.Millisecond) // the last run's settles and releases land before the counters are read
			c0, err := readRedisCounts(ctx, rdb)
			if err != nil {
				return err
			}
			g0, r0 := b.procCPU(gw), b.procCPU(rp)
			r := openLoop(ctx, clients[which], base+chatPath, reqs[which], run)
			sleepCtx(ctx, 200*time.Millisecond)
			c1, err := readRedisCounts(ctx, rdb)
			if err != nil {
				return err
			}
			one := budgetRun{run: r, redis: c1.minus(c0), gwCPU: b.procCPU(gw) - g0, redisCPU: b.procCPU(rp) - r0}
			if which == "free" {
				br.free = one
			} else {
				br.budgeted = one
			}
			t := totals(r)
			logf("budget round %d %-8s %5d req %3d err  p50 %s ms  %.3f scripts, %.3f round trips per request", round+1, which,
				len(r.samples), runErrors(r), ms(pct(t, 0.5)), one.redis.scripts/float64(max(len(r.samples), 1)), one.redis.reads/float64(max(len(r.samples), 1)))
		}
		res.rounds = append(res.rounds, br)
	}
	res.spent = b.budgetSpent(ctx, base)
	return nil
}

// privateRedis starts redis-server on a free loopback port, without
// persistence, and returns its address and process.
func privateRedis(ctx context.Context, dir string) (string, *proc, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", nil, err
	}
	// The port is picked here and handed over (redis-server cannot report
	// one the kernel chose); a clash shows as a redis-server that exits.
	l, err := net.Listen("tcp", loopbackAny)
	if err != nil {
		return "", nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	p, err := startProc("redis-budget", dir, bin, []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no"}, cleanEnv())
	if err != nil {
		return "", nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	deadline := time.Now().Add(10 * time.Second)
	for rdb.Ping(ctx).Err() != nil {
		if p.exited() || time.Now().After(deadline) || ctx.Err() != nil {
			p.stop(3 * time.Second)
			return "", nil, fmt.Errorf("redis-server on %s did not answer: %s", addr, p.logTail(5))
		}
		sleepCtx(ctx, 50*time.Millisecond)
	}
	return addr, p, nil
}

// readRedisCounts reads INFO commandstats and stats.
func readRedisCounts(ctx context.Context, rdb *redis.Client) (redisCounts, error) {
	s, err := rdb.Info(ctx, "commandstats", "stats").Result()
	if err != nil {
		return redisCounts{}, fmt.Errorf("redis INFO: %w", err)
	}
	return parseRedisInfo(s), nil
}

// parseRedisInfo picks the counters out of an INFO answer.
func parseRedisInfo(s string) redisCounts {
	var c redisCounts
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		if k == "total_reads_processed" {
			c.reads, _ = strconv.ParseFloat(v, 64)
			continue
		}
		name, found := strings.CutPrefix(k, "cmdstat_")
		if !found {
			continue
		}
		var n, usec float64
		for _, f := range strings.Split(v, ",") {
			fk, fv, _ := strings.Cut(f, "=")
			switch fk {
			case "calls":
				n, _ = strconv.ParseFloat(fv, 64)
			case "usec":
				usec, _ = strconv.ParseFloat(fv, 64)
			}
		}
		switch name {
		case "evalsha", "eval", "fcall", "evalsha_ro", "eval_ro", "fcall_ro":
			c.scripts += n
			c.usec += usec
		case "hset":
			c.reserves += n
		case "hdel":
			c.settles += n
		}
	}
	return c
}

// budgetSpent is the budgeted client's spend from GET /admin/budgets.
func (b *bencher) budgetSpent(ctx context.Context, base string) float64 {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/admin/budgets", nil)
	req.Header.Set("Authorization", "Bearer "+b.st.adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return math.NaN()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var v struct {
		Budgets []struct {
			SpentUSD float64 `json:"spent_usd"`
		} `json:"budgets"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &v) != nil || len(v.Budgets) == 0 {
		return math.NaN()
	}
	return v.Budgets[0].SpentUSD
}

func firstErr(r runResult) string {
	for _, s := range r.samples {
		if s.err != "" {
			return s.err
		}
	}
	return ""
}

// requests counts both sides' requests over every round.
func (r *budgetResult) requests() (free, budgeted int) {
	for _, rr := range r.rounds {
		free += len(rr.free.run.samples)
		budgeted += len(rr.budgeted.run.samples)
	}
	return free, budgeted
}

// perRequest is each side's Redis counts per request over every round.
func (r *budgetResult) perRequest() (free, budgeted redisCounts) {
	nf, nb := r.requests()
	for _, rr := range r.rounds {
		free, budgeted = free.plus(rr.free.redis), budgeted.plus(rr.budgeted.redis)
	}
	return free.per(nf), budgeted.per(nb)
}

// cpuPerRequest is each side's gateway and Redis CPU per request (µs)
// over every round.
func (r *budgetResult) cpuPerRequest() (freeGW, budGW, freeRedis, budRedis float64) {
	nf, nb := r.requests()
	var fg, bg, fr, br time.Duration
	for _, rr := range r.rounds {
		fg, bg = fg+rr.free.gwCPU, bg+rr.budgeted.gwCPU
		fr, br = fr+rr.free.redisCPU, br+rr.budgeted.redisCPU
	}
	us := func(d time.Duration, n int) float64 { return float64(d) / 1e3 / float64(max(n, 1)) }
	return us(fg, nf), us(bg, nb), us(fr, nf), us(br, nb)
}

// added is what a budget adds per request: the budgeted side's counts per
// request minus the unbudgeted side's.
func (r *budgetResult) added() redisCounts {
	f, b := r.perRequest()
	return b.minus(f)
}

// p50Ratios is each round's budgeted p50 over its unbudgeted p50.
func (r *budgetResult) p50Ratios() []float64 {
	var out []float64
	for _, rr := range r.rounds {
		f, b := pct(totals(rr.free.run), 0.5), pct(totals(rr.budgeted.run), 0.5)
		if f > 0 && b > 0 {
			out = append(out, float64(b)/float64(f))
		}
	}
	return out
}

func (r *budgetResult) p50Ratio() float64 {
	per := r.p50Ratios()
	if len(per) == 0 {
		return math.NaN()
	}
	return medianFloat(per)
}

// p50s are the median over rounds of each side's p50.
func (r *budgetResult) p50s() (free, budgeted time.Duration) {
	var f, b []time.Duration
	for _, rr := range r.rounds {
		f, b = append(f, pct(totals(rr.free.run), 0.5)), append(b, pct(totals(rr.budgeted.run), 0.5))
	}
	return median(f), median(b)
}

func (r *budgetResult) measured() bool { return r.err == "" && len(r.rounds) > 0 }

func (r *budgetResult) write(w io.Writer) {
	fmt.Fprintf(w, "\nBudgets in Redis (issue 30): one gateway with GATEWAY_REDIS_URL, a client without a budget and one with a budget it never reaches, the same load (%d RPS non-stream, %v per run) to each in alternating runs, %d rounds in a rotated order; Redis: %s. Redis figures are INFO deltas per request; \"added\" is the budgeted side's minus the unbudgeted side's.\n\n",
		r.spec.rate, r.spec.duration, r.spec.rounds, r.redis)
	if !r.measured() {
		fmt.Fprintf(w, "Not measured: %s\n", r.err)
		return
	}
	f, b := r.perRequest()
	a := b.minus(f)
	nf, nb := r.requests()
	tb := &table{}
	tb.add("per request", "no budget", "budget", "added")
	cell := func(v float64) string { return fmt.Sprintf("%.3f", v) }
	tb.add("requests, all rounds", fmt.Sprint(nf), fmt.Sprint(nb), "")
	tb.add("Redis script calls", cell(f.scripts), cell(b.scripts), cell(a.scripts))
	tb.add("  of which reserve (HSET)", cell(f.reserves), cell(b.reserves), cell(a.reserves))
	tb.add("  of which settle (HDEL, one per reservation settled)", cell(f.settles), cell(b.settles), cell(a.settles))
	tb.add("Redis round trips (read events)", cell(f.reads), cell(b.reads), cell(a.reads))
	tb.add("time inside Redis running scripts (µs)", fmt.Sprintf("%.1f", f.usec), fmt.Sprintf("%.1f", b.usec), fmt.Sprintf("%.1f", a.usec))
	fg, bg, fr, br := r.cpuPerRequest()
	tb.add("gateway CPU (µs)", fmt.Sprintf("%.0f", fg), fmt.Sprintf("%.0f", bg), fmt.Sprintf("%+.0f", bg-fg))
	if br > 0 {
		tb.add("Redis CPU (µs)", fmt.Sprintf("%.0f", fr), fmt.Sprintf("%.0f", br), fmt.Sprintf("%+.0f", br-fr))
	}
	fp, bp := r.p50s()
	tb.add("latency p50 (ms, median of rounds)", msAdded(fp), msAdded(bp), ratioOrNA(r.p50Ratio())+fmt.Sprintf(" (%+.3f ms)", float64(bp-fp)/1e6))
	var per []string
	for _, v := range r.p50Ratios() {
		per = append(per, fmt.Sprintf("%.2f", v))
	}
	tb.add("p50 ratio per round", "", "", strings.Join(per, ", "))
	tb.write(w)
	if !math.IsNaN(r.spent) {
		fmt.Fprintf(w, "\nThe budget's spend at the end: %.6f USD of %d (GET /admin/budgets).\n", r.spent, budgetUSD)
	}
}

func (r *budgetResult) writeTargets(tb *table, verdict func(ok, measured bool) string) {
	a, lat := r.added(), r.p50Ratio()
	settles := a.scripts - a.reserves
	tb.add("budget in Redis: script calls per budgeted request ≤ 1 to reserve + ≤ 1 to settle",
		fmt.Sprintf("%.3f + %.3f (%.3f round trips added)", a.reserves, settles, a.reads),
		verdict(a.reserves <= budgetMaxReserves+budgetSlack && settles <= budgetMaxSettles+budgetSlack &&
			a.reads <= budgetMaxReserves+budgetMaxSettles+budgetSlack, r.measured()))
	tb.add("budget in Redis: p50 latency of a budgeted request ≤ 1.1x an unbudgeted one's",
		ratioOrNA(lat), verdict(lat <= budgetMaxP50Ratio, r.measured() && !math.IsNaN(lat)))
}

func (r *budgetResult) errs() map[string]int {
	m := map[string]int{}
	for _, rr := range r.rounds {
		for _, run := range []runResult{rr.free.run, rr.budgeted.run} {
			for _, s := range run.samples {
				if s.err != "" {
					m["budget phase: "+s.err]++
				}
			}
		}
	}
	return m
}
