package report

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The Postgres CPU benchmark: what one gateway request costs the database, as
// the load benchmark (docs/benchmarks.md) counts it, but isolated from the
// gateway and the mock so that one write path can be compared with another.

// userHZ is the unit of utime and stime in /proc/<pid>/stat: USER_HZ, 100 on
// every Linux ABI the gateway runs on (getconf CLK_TCK).
const userHZ = 100

// procCPU returns the CPU time (user + system) a process has used.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; fields after its ')' are fixed.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	// fields[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(fields) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	utime, err := strconv.ParseInt(fields[11], 10, 64)
	if err != nil {
		return 0, err
	}
	stime, err := strconv.ParseInt(fields[12], 10, 64)
	if err != nil {
		return 0, err
	}
	return time.Duration(utime+stime) * time.Second / userHZ, nil
}

// backendCPU sums the CPU time of every backend connected to the pool's
// database (the benchmark's database is its own, so these are the writer's
// connections plus the one asking). Postgres must run on this machine.
func backendCPU(tb testing.TB, pool *pgxpool.Pool) map[int]time.Duration {
	tb.Helper()
	rows, err := pool.Query(context.Background(),
		`SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
	if err != nil {
		tb.Fatalf("list backends: %v", err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		tb.Fatalf("list backends: %v", err)
	}
	cpu := make(map[int]time.Duration, len(pids))
	for _, pid := range pids {
		d, err := procCPU(int(pid))
		if err != nil {
			tb.Fatalf("backend %d: %v (is Postgres on this machine?)", pid, err)
		}
		cpu[int(pid)] = d
	}
	return cpu
}

// cpuSince is the backend CPU used since before (a backend that appeared
// meanwhile counts from zero).
func cpuSince(before, after map[int]time.Duration) time.Duration {
	var d time.Duration
	for pid, t := range after {
		d += t - before[pid]
	}
	return d
}

// walLSN is the cluster's current WAL insert position. WAL volume is
// cluster-wide, so other databases' writes during a run inflate it.
func walLSN(tb testing.TB, pool *pgxpool.Pool) int64 {
	tb.Helper()
	var n int64
	if err := pool.QueryRow(context.Background(),
		`SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn`).Scan(&n); err != nil {
		tb.Fatalf("wal lsn: %v", err)
	}
	return n
}

// loadShape describes the records a steady load puts into each batch.
type loadShape struct {
	perBatch int  // requests finishing per flush (rate × FlushInterval)
	stream   bool // a streaming candidate record between pending and success
	// straddleEvery: every n-th request has only its first records (through
	// pending, or streaming) in one batch and the rest in a later one. 0: none.
	straddleEvery int
	// lastAfter is how many batches later a straddling request's last records
	// come: 1 (the next batch) unless set, more for long streams.
	lastAfter int
}

// requestRecords returns the records the attempt loop produces for one
// single-candidate request, in order, and where the first batch's share ends
// when the request straddles two batches.
func requestRecords(id uuid.UUID, t0 time.Time, stream bool) (recs []record, split int) {
	req := Request{ID: id, CreatedAt: t0, Model: "bench-model", Stream: stream,
		Client: "bench", Priority: "interactive", Status: RequestPending, CandidateCount: 1}
	cand := Candidate{RequestID: id, Provider: "mock", Endpoint: "http://127.0.0.1:9001",
		KeyID: "mock#0", Model: "mock-model", Status: CandidateAvailable, CreatedAt: t0}
	recs = append(recs, record{kind: kindRequest, req: req}, record{kind: kindCandidate, cand: cand})
	cand.Status, cand.StartedAt = CandidatePending, t0.Add(50*time.Microsecond)
	recs = append(recs, record{kind: kindCandidate, cand: cand})
	if stream {
		cand.Status, cand.StatusCode, cand.FirstByte = CandidateStreaming, 200, 1500*time.Microsecond
		recs = append(recs, record{kind: kindCandidate, cand: cand})
	}
	split = len(recs)
	end := t0.Add(1200 * time.Microsecond)
	if stream {
		end = t0.Add(30 * time.Millisecond)
	}
	cand.Status, cand.StatusCode, cand.FinishedAt = CandidateSuccess, 200, end
	cand.Latency = end.Sub(cand.StartedAt)
	if !stream {
		cand.FirstByte = cand.Latency
	}
	req.Status, req.StatusCode, req.FinishedAt, req.Latency = RequestSuccess, 200, end, end.Sub(t0)
	req.FirstByte = cand.FirstByte + 100*time.Microsecond
	req.HasUsage, req.PromptTokens, req.CompletionTokens, req.TotalTokens = true, 12, 20, 32
	// The cost of a priced model, as the gateway records it since issue 30.
	cand.HasUsage, cand.PromptTokens, cand.CompletionTokens = true, 12, 20
	cand.HasCost, cand.CostUSD = true, 0.000213
	req.HasCost, req.CostUSD = true, 0.000213
	recs = append(recs, record{kind: kindCandidate, cand: cand}, record{kind: kindRequest, req: req})
	return recs, split
}

// loadBatches generates consecutive batches of a steady load: each holds the
// last records of earlier straddling requests that are due, plus perBatch new
// requests.
type loadBatches struct {
	shape loadShape
	later [][]record // later[i]: records due i+1 batches from now
	n     int
}

// next returns the next batch. Request ids are UUIDv7, as the gateway makes
// them (internal/api): time-ordered keys land at the right edge of the primary
// key indexes, where random ones would touch a random leaf page each.
func (g *loadBatches) next() []record {
	lag := max(g.shape.lastAfter, 1)
	for len(g.later) < lag {
		g.later = append(g.later, nil)
	}
	batch := g.later[0]
	copy(g.later, g.later[1:])
	g.later[lag-1] = nil
	t0 := time.Now().UTC().Truncate(time.Microsecond)
	for i := range g.shape.perBatch {
		g.n++
		recs, split := requestRecords(uuid.Must(uuid.NewV7()), t0.Add(time.Duration(i)*time.Millisecond), g.shape.stream)
		if g.shape.straddleEvery > 0 && g.n%g.shape.straddleEvery == 0 {
			batch = append(batch, recs[:split]...)
			g.later[lag-1] = append(g.later[lag-1], recs[split:]...)
			continue
		}
		batch = append(batch, recs...)
	}
	return batch
}

// BenchmarkPostgresCPU reports the Postgres backend CPU the writer costs per
// gateway request (pg-µs/req), batch by batch as the batcher writes them, for
// the load shapes of the load benchmark: a single-candidate request finishing
// within one flush interval, and streams (30 ms long, so about a third of them
// straddle two batches). Run with -benchtime of a few seconds: /proc counts
// CPU in 10 ms ticks. WAL bytes are cluster-wide (other databases' writes
// inflate them). go-µs/req is this test process's CPU: generating the records
// as well as writing them, so only differences between methods mean anything.
func BenchmarkPostgresCPU(b *testing.B) {
	for _, bc := range []struct {
		name  string
		shape loadShape
	}{
		{"plain/10rps", loadShape{perBatch: 1}},
		{"plain/500rps", loadShape{perBatch: 50}},
		{"plain/1000rps", loadShape{perBatch: 100}},
		{"plain/2000rps", loadShape{perBatch: 200}},
		{"plain/9000rps", loadShape{perBatch: 900}},
		{"stream/200ps", loadShape{perBatch: 20, stream: true, straddleEvery: 3}},
		{"stream/200ps-no-straddle", loadShape{perBatch: 20, stream: true}},
		{"stream/500ps", loadShape{perBatch: 50, stream: true, straddleEvery: 3}},
		{"stream/200ps-all-straddle", loadShape{perBatch: 20, stream: true, straddleEvery: 1}},
		// Streams of a few seconds, as LLM answers are: every row is written
		// twice, first while streaming and then when it ends.
		{"stream/200ps-long", loadShape{perBatch: 20, stream: true, straddleEvery: 1, lastAfter: 30}},
		{"stream/1000ps-long", loadShape{perBatch: 100, stream: true, straddleEvery: 1, lastAfter: 30}},
	} {
		for _, method := range []string{"unnest", "unnest-nohold", "copy"} {
			b.Run(bc.name+"/"+method, func(b *testing.B) {
				benchPostgresCPU(b, bc.shape, method)
			})
		}
	}
}

// benchPostgresCPU runs one load shape through one write method: "unnest" is
// the batcher's flush, "unnest-nohold" the same without holding records back
// (see holder), "copy" the COPY + temp table transaction it all replaced.
func benchPostgresCPU(b *testing.B, shape loadShape, method string) {
	w := connectedWriter(b, migratedURL(b))
	pool := w.pool.Load()
	// REPORT_BENCH_SQL runs after the migrations, to measure a schema variant
	// (an index dropped, a fillfactor) without writing a migration for it.
	if sql := os.Getenv("REPORT_BENCH_SQL"); sql != "" {
		if _, err := pool.Exec(context.Background(), sql); err != nil {
			b.Fatalf("REPORT_BENCH_SQL: %v", err)
		}
	}
	gen := &loadBatches{shape: shape}
	w.noHold = method == "unnest-nohold"
	var batch []record
	carried := 0
	write := func() {
		if method == "copy" {
			recs := w.prepare(gen.next())
			m := w.merger
			m.reset()
			for i := range recs {
				m.add(&recs[i])
			}
			if err := copyUpsertMerged(context.Background(), pool, m.reqs, m.cands); err != nil {
				b.Fatalf("copy upsert: %v", err)
			}
			return
		}
		// What the batcher does, held records included.
		batch, carried = w.flush(context.Background(), append(batch, gen.next()...), carried)
	}
	for range 20 { // warm up: connections, plan caches, the tables' first pages
		write()
	}
	cpu0, wal0 := backendCPU(b, pool), walLSN(b, pool)
	self0, err := procCPU(os.Getpid())
	if err != nil {
		b.Fatal(err)
	}
	batches := 0
	for b.Loop() {
		write()
		batches++
	}
	self1, err := procCPU(os.Getpid())
	if err != nil {
		b.Fatal(err)
	}
	cpu, wal := cpuSince(cpu0, backendCPU(b, pool)), walLSN(b, pool)-wal0
	if st := w.Stats(); st.Spooled != 0 || st.Dropped != 0 {
		b.Fatalf("stats %+v: batches were not written", st)
	}
	reqs := float64(batches * shape.perBatch)
	b.ReportMetric(float64(cpu.Microseconds())/reqs, "pg-µs/req")
	b.ReportMetric(float64(cpu.Microseconds())/float64(batches), "pg-µs/batch")
	b.ReportMetric(float64(wal)/reqs, "wal-B/req")
	b.ReportMetric(float64((self1-self0).Microseconds())/reqs, "go-µs/req")
}
