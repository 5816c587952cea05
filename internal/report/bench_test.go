package report

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/llmgw/gateway/internal/secret"
)

// benchCandidate is what the attempt loop records for a finished attempt.
func benchCandidate(id uuid.UUID, i int) Candidate {
	return Candidate{
		RequestID: id, Index: i, Provider: "primary", Endpoint: "https://api.openai.com",
		KeyID: "primary#0", Model: "gpt-4o-mini", Status: CandidateSuccess, StatusCode: 200,
		Latency: 850 * time.Millisecond, FirstByte: 120 * time.Millisecond,
		StartedAt: baseTime, FinishedAt: baseTime.Add(time.Second), CreatedAt: baseTime,
	}
}

// drainQueue empties w.queue in the background, standing in for a batcher that
// keeps up, so a benchmark measures only the enqueue. The returned func stops it.
func drainQueue(w *Writer) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var scratch []record
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				scratch = w.queue.take(scratch[:0], w.queue.limit)
			case <-done:
				return
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// BenchmarkRecordCandidate measures the request-path cost of recording: the
// shared lock, the struct copy and the append under the queue's mutex
// (target < 1 µs, ≤ 1 alloc).
func BenchmarkRecordCandidate(b *testing.B) {
	w, _ := newTestWriter(b, "postgres://postgres@127.0.0.1:1/x", nil)
	c := benchCandidate(uuid.New(), 0)
	overflowed := func() uint64 { st := w.Stats(); return st.Spooled + st.Dropped }
	b.Run("serial", func(b *testing.B) {
		// The queue is emptied with the timer stopped, so only the enqueue is
		// measured and the fast path is always taken.
		b.ReportAllocs()
		before := overflowed()
		n := 0
		for b.Loop() {
			w.RecordCandidate(c)
			if n++; n == w.queue.limit {
				b.StopTimer()
				w.queue.take(nil, n)
				n = 0
				b.StartTimer()
			}
		}
		if d := overflowed() - before; d != 0 {
			b.Fatalf("%d records overflowed to the spool; the benchmark measured the slow path", d)
		}
		w.queue.take(nil, w.queue.limit)
	})
	stop := drainQueue(w)
	defer stop()
	b.Run("parallel", func(b *testing.B) {
		// With GOMAXPROCS producers the single drainer can fall behind, and the
		// overflowed records take the spool path; report how many did.
		b.ReportAllocs()
		before := overflowed()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				w.RecordCandidate(c)
			}
		})
		b.ReportMetric(float64(overflowed()-before)/float64(b.N), "overflow/op")
	})
}

// BenchmarkWriterThroughput measures sustained rows/s from RecordCandidate to
// committed rows in Postgres through the real batcher. The producer backs off
// when the queue is three quarters full, so what is measured is the writer, not
// the overflow spool.
//
//   - distinct: every record is a new row (the database's worst case);
//   - lifecycle: each row gets available, pending, streaming, success (4
//     records folded into one row per batch where they meet).
func BenchmarkWriterThroughput(b *testing.B) {
	for _, bc := range []struct {
		mode      string
		batchSize int
	}{{"distinct", 1000}, {"lifecycle", 1000}, {"distinct", 5000}, {"lifecycle", 5000}} {
		mode := bc.mode
		b.Run(fmt.Sprintf("%s/batch=%d", mode, bc.batchSize), func(b *testing.B) {
			dsn := migratedURL(b)
			w, _ := newTestWriter(b, dsn, func(o *Options) { o.BatchSize, o.Redactor = bc.batchSize, benchRedactor() })
			w.Start(context.Background())
			waitFor(b, "state ok", 10*time.Second, func() bool { return w.State() == StateOK })
			const rowsPerOp = 50_000
			limit := w.queue.limit * 3 / 4
			var records uint64
			start := time.Now()
			for b.Loop() {
				id := uuid.New()
				for i := range rowsPerOp {
					for w.queue.len() > limit {
						time.Sleep(50 * time.Microsecond)
					}
					c := benchCandidate(id, i)
					if mode == "lifecycle" {
						for _, st := range []string{CandidateAvailable, CandidatePending, CandidateStreaming} {
							c2 := c
							c2.Status = st
							w.RecordCandidate(c2)
							records++
						}
					}
					w.RecordCandidate(c)
					records++
				}
				waitFor(b, "rows written", time.Minute, func() bool { return w.Stats().Written == records })
			}
			elapsed := time.Since(start)
			if st := w.Stats(); st.Spooled != 0 || st.Dropped != 0 {
				b.Fatalf("stats %+v: writer fell back to the spool", st)
			}
			rows := float64(b.N * rowsPerOp)
			b.ReportMetric(rows/elapsed.Seconds(), "rows/s")
			b.ReportMetric(float64(records)/elapsed.Seconds(), "records/s")
		})
	}
}

// batchUpsertCandidates is the alternative to copyUpsert measured in
// BenchmarkUpsert: one INSERT ... ON CONFLICT per row, pipelined in a pgx.Batch.
func batchUpsertCandidates(ctx context.Context, pool *pgxpool.Pool, cands []Candidate) error {
	sql := strings.Replace(copyUpsertCandidatesSQL,
		"SELECT "+strings.Join(candidateColumns, ", ")+" FROM pg_temp.report_candidates_in",
		"VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)", 1)
	var batch pgx.Batch
	var vals [17]any
	for i := range cands {
		batch.Queue(sql, append([]any(nil), candidateValues(&cands[i], &vals)...)...)
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return tx.SendBatch(ctx, &batch).Close()
	})
}

// BenchmarkUpsert compares ways of writing a 1000-row batch: one statement over
// array parameters (what the writer uses), COPY into a temp table plus one
// upsert statement in a transaction (what it used before), and a pipelined
// pgx.Batch of per-row upserts.
func BenchmarkUpsert(b *testing.B) {
	const rows = 1000
	dsn := migratedURL(b)
	w := connectedWriter(b, dsn)
	pool := w.pool.Load()
	newBatch := func() []Candidate {
		id := uuid.New()
		cands := make([]Candidate, rows)
		for i := range cands {
			cands[i] = benchCandidate(id, i)
		}
		return cands
	}
	run := func(b *testing.B, write func([]Candidate) error) {
		for b.Loop() {
			b.StopTimer()
			cands := newBatch()
			b.StartTimer()
			if err := write(cands); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*rows)/b.Elapsed().Seconds(), "rows/s")
	}
	b.Run("unnest", func(b *testing.B) {
		run(b, func(cands []Candidate) error {
			return w.upsertMerged(context.Background(), pool, nil, nil, cands, nil)
		})
	})
	b.Run("copy", func(b *testing.B) {
		run(b, func(cands []Candidate) error {
			return copyUpsertMerged(context.Background(), pool, nil, cands)
		})
	})
	b.Run("batch", func(b *testing.B) {
		run(b, func(cands []Candidate) error {
			return batchUpsertCandidates(context.Background(), pool, cands)
		})
	})
	if n := queryInt(b, dsn, "SELECT count(*) FROM request_candidates"); n == 0 {
		b.Fatal("no rows written")
	}
}

// BenchmarkSpoolAppend measures how fast an outage can be absorbed: one
// 1000-record batch appended and fsynced per op, as the batcher does when
// Postgres is unreachable.
func BenchmarkSpoolAppend(b *testing.B) {
	s, err := openSpool(b.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer s.close()
	id := uuid.New()
	recs := make([]record, 1000)
	for i := range recs {
		recs[i] = record{kind: kindCandidate, cand: benchCandidate(id, i)}
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.append(recs, true); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(recs))/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkSanitize measures the batcher's per-record cleaning (prepare):
// the text checks and redaction every record passes before it is written
// or spooled. Redaction was once 60% of the writer's CPU, so the common
// records (a success, a request) must stay cheap; a failed candidate with
// a provider's error body is the case redaction exists for.
func BenchmarkSanitize(b *testing.B) {
	now := baseTime
	red := benchRedactor()
	failed := benchCandidate(uuid.New(), 1)
	failed.Status, failed.StatusCode, failed.ErrorType = CandidateFailed, 401, ErrorTypeUpstreamHTTP
	failed.ErrorMessage = `{"error":{"message":"Incorrect API key provided. You can find your API key at ` +
		`https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`
	req := Request{ID: uuid.New(), Model: "gpt-4o-mini", Route: "chat", Client: "team-a", Priority: "interactive",
		Status: RequestSuccess, StatusCode: 200, Latency: time.Second, CreatedAt: baseTime}
	for _, bc := range []struct {
		name string
		rec  record
	}{
		{"success", record{kind: kindCandidate, cand: benchCandidate(uuid.New(), 0)}},
		{"failed", record{kind: kindCandidate, cand: failed}},
		{"request", record{kind: kindRequest, req: req}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rec := bc.rec
				if reject := rec.sanitize(now, red); reject != "" {
					b.Fatal(reject)
				}
			}
		})
	}
}

// benchRedactor knows a gateway's secrets: 32 provider keys of two shapes.
func benchRedactor() *secret.Redactor {
	var keys []string
	for i := range 16 {
		keys = append(keys, fmt.Sprintf("gsk_%02dBenchKey0123456789abcdefghijklmnopqrstuvwxyzAB", i),
			fmt.Sprintf("%02d5e17e1a0c0ffee00d15ea5e0ba5eb", i))
	}
	return secret.NewRedactor(keys...)
}
