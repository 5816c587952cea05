package report

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

func candidateRecords(cs []Candidate) []record {
	recs := make([]record, len(cs))
	for i, c := range cs {
		recs[i] = record{kind: kindCandidate, cand: c}
	}
	return recs
}

// mustUpsert writes records the way the batcher does (sanitise, then upsert).
func mustUpsert(t testing.TB, w *Writer, recs []record) {
	t.Helper()
	recs = w.prepare(slices.Clone(recs))
	if rejected, err := w.upsert(context.Background(), recs); err != nil || rejected != 0 {
		t.Fatalf("upsert: rejected %d, err %v", rejected, err)
	}
}

// TestUpsertRankRules protects the lifecycle contract in SQL: status only moves
// forward, the first terminal status is final, and it holds whether the records
// arrive one per batch, all in one batch (merged in Go), or replayed twice.
func TestUpsertRankRules(t *testing.T) {
	w := connectedWriter(t, migratedURL(t))
	t0 := baseTime
	mk := func(status string, code int, started time.Time) Candidate {
		return Candidate{Index: 0, Status: status, StatusCode: code, StartedAt: started,
			Provider: "p", Endpoint: "http://h", KeyID: "k", Model: "m", CreatedAt: t0}
	}
	tests := []struct {
		name        string
		seq         []Candidate
		wantStatus  string
		wantCode    int32 // 0: NULL
		wantStarted time.Time
	}{
		{"forward", []Candidate{mk(CandidateAvailable, 0, time.Time{}), mk(CandidatePending, 0, t0), mk(CandidateStreaming, 200, t0), mk(CandidateSuccess, 200, t0)}, CandidateSuccess, 200, t0},
		{"late pending after terminal", []Candidate{mk(CandidateFailed, 502, t0), mk(CandidatePending, 0, t0.Add(-time.Second))}, CandidateFailed, 502, t0},
		{"late available after streaming", []Candidate{mk(CandidateStreaming, 200, t0), mk(CandidateAvailable, 0, time.Time{})}, CandidateStreaming, 200, t0},
		{"pending never by available", []Candidate{mk(CandidatePending, 0, t0), mk(CandidateAvailable, 0, time.Time{})}, CandidatePending, 0, t0},
		{"first terminal wins", []Candidate{mk(CandidatePending, 0, t0), mk(CandidateFailed, 504, t0), mk(CandidateSuccess, 200, t0)}, CandidateFailed, 504, t0},
		{"skipped is terminal", []Candidate{mk(CandidateSkipped, 0, time.Time{}), mk(CandidatePending, 0, t0)}, CandidateSkipped, 0, time.Time{}},
		{"earliest started_at kept", []Candidate{mk(CandidatePending, 0, t0.Add(time.Second)), mk(CandidateStreaming, 200, t0), mk(CandidateSuccess, 200, t0.Add(2*time.Second))}, CandidateSuccess, 200, t0},
		{"status code filled not blanked", []Candidate{mk(CandidateStreaming, 200, t0), mk(CandidateUnused, 0, time.Time{})}, CandidateUnused, 200, t0},
	}
	modes := []struct {
		name  string
		apply func(recs []record)
	}{
		{"one per batch", func(recs []record) {
			for i := range recs {
				mustUpsert(t, w, recs[i:i+1])
			}
		}},
		{"one batch", func(recs []record) { mustUpsert(t, w, recs) }},
		{"replayed twice", func(recs []record) {
			mustUpsert(t, w, recs)
			for i := range recs {
				mustUpsert(t, w, recs[i:i+1])
			}
			mustUpsert(t, w, recs)
		}},
	}
	for _, tt := range tests {
		for _, mode := range modes {
			t.Run(tt.name+"/"+mode.name, func(t *testing.T) {
				id := uuid.New()
				seq := slices.Clone(tt.seq)
				for i := range seq {
					seq[i].RequestID = id
				}
				mode.apply(candidateRecords(seq))
				got, ok := readCandidate(t, w.opts.DatabaseURL.Reveal(), candidateKey{requestID: id})
				if !ok {
					t.Fatal("row missing")
				}
				if got.Status != tt.wantStatus {
					t.Errorf("status = %q, want %q", got.Status, tt.wantStatus)
				}
				var code int32
				if got.StatusCode != nil {
					code = *got.StatusCode
				}
				if code != tt.wantCode {
					t.Errorf("status_code = %d, want %d", code, tt.wantCode)
				}
				var started time.Time
				if got.StartedAt != nil {
					started = *got.StartedAt
				}
				if !started.Equal(tt.wantStarted) {
					t.Errorf("started_at = %v, want %v", started, tt.wantStarted)
				}
			})
		}
	}
}

// TestRequestRankRules: a request's terminal status is final too.
func TestRequestRankRules(t *testing.T) {
	w := connectedWriter(t, migratedURL(t))
	id := uuid.New()
	pending := Request{ID: id, Status: RequestPending, Model: "gpt", Stream: true, Client: "app-1", Priority: "interactive", CandidateCount: 3, CreatedAt: baseTime}
	done := Request{ID: id, Status: RequestSuccess, StatusCode: 200, Latency: 1500 * time.Millisecond,
		FirstByte: 300 * time.Millisecond, HasUsage: true, PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15,
		FinishedAt: baseTime.Add(2 * time.Second), CreatedAt: baseTime.Add(time.Hour)}
	failed := Request{ID: id, Status: RequestFailed, StatusCode: 502}
	recs := []record{{kind: kindRequest, req: done}, {kind: kindRequest, req: pending}, {kind: kindRequest, req: failed}}
	for i := range recs {
		mustUpsert(t, w, recs[i:i+1])
	}
	mustUpsert(t, w, recs) // and again, merged
	tl, err := w.Timeline(context.Background(), id)
	if err != nil {
		t.Fatalf("Timeline: %v", err)
	}
	r := tl.Request
	if r.Status != RequestSuccess || r.StatusCode == nil || *r.StatusCode != 200 {
		t.Errorf("status = %q/%v, want success/200", r.Status, r.StatusCode)
	}
	if r.TotalTokens == nil || *r.TotalTokens != 15 || r.LatencyMS == nil || *r.LatencyMS != 1500 {
		t.Errorf("tokens/latency = %v/%v, want 15/1500", r.TotalTokens, r.LatencyMS)
	}
	// The first record that arrived was the terminal one, so the pending record's
	// descriptive fields never made it; that is the price of strict ranking.
	if !r.CreatedAt.Equal(baseTime.Add(time.Hour)) {
		t.Errorf("created_at = %v, want the first stored value", r.CreatedAt)
	}
}

// TestMergeMatchesSequential protects the in-batch merge: folding a random
// sequence in Go and upserting once yields the same row as upserting each record
// on its own, and in any chunking the final status is the first record of the
// highest rank.
func TestMergeMatchesSequential(t *testing.T) {
	w := connectedWriter(t, migratedURL(t))
	rng := rand.New(rand.NewPCG(1, 2))
	statuses := []string{CandidateAvailable, CandidatePending, CandidateStreaming, CandidateSuccess, CandidateFailed, CandidateUnused}
	randomCandidate := func() Candidate {
		c := Candidate{Status: statuses[rng.IntN(len(statuses))], CreatedAt: baseTime.Add(time.Duration(rng.IntN(5)) * time.Second)}
		if rng.IntN(2) == 0 {
			c.Provider = fmt.Sprintf("p%d", rng.IntN(3))
		}
		if rng.IntN(2) == 0 {
			c.StatusCode = 200 + rng.IntN(400)
		}
		if rng.IntN(2) == 0 {
			c.StartedAt = baseTime.Add(time.Duration(rng.IntN(10)) * time.Second)
		}
		if rng.IntN(3) == 0 {
			c.ErrorMessage = fmt.Sprintf("e%d", rng.IntN(9))
			c.Latency = time.Duration(rng.IntN(1000)) * time.Millisecond
		}
		return c
	}
	for trial := range 30 {
		seq := make([]Candidate, 2+rng.IntN(6))
		for i := range seq {
			seq[i] = randomCandidate()
		}
		ids := [3]uuid.UUID{uuid.New(), uuid.New(), uuid.New()}
		with := func(id uuid.UUID) []record {
			s := slices.Clone(seq)
			for i := range s {
				s[i].RequestID = id
			}
			return candidateRecords(s)
		}
		one := with(ids[0])
		for i := range one {
			mustUpsert(t, w, one[i:i+1])
		}
		mustUpsert(t, w, with(ids[1]))
		chunked := with(ids[2])
		cut := 1 + rng.IntN(len(chunked)-1)
		mustUpsert(t, w, chunked[:cut])
		mustUpsert(t, w, chunked[cut:])

		seqRow, _ := readCandidate(t, w.opts.DatabaseURL.Reveal(), candidateKey{requestID: ids[0]})
		mergedRow, _ := readCandidate(t, w.opts.DatabaseURL.Reveal(), candidateKey{requestID: ids[1]})
		chunkRow, _ := readCandidate(t, w.opts.DatabaseURL.Reveal(), candidateKey{requestID: ids[2]})
		if seqRow.String() != mergedRow.String() {
			t.Errorf("trial %d: sequential row %s != merged row %s", trial, seqRow, mergedRow)
		}
		if seqRow.Status != chunkRow.Status {
			t.Errorf("trial %d: sequential status %q != chunked status %q", trial, seqRow.Status, chunkRow.Status)
		}
	}
}

// TestReplayOutOfOrderTwice protects replay idempotence: the spool holds a
// realistic set of lifecycles shuffled, twice over, and replaying it yields
// exactly one row per key with its final state.
func TestReplayOutOfOrderTwice(t *testing.T) {
	dsn := migratedURL(t)
	w := connectedWriter(t, dsn)
	var recs []record
	var keys []candidateKey
	var reqIDs []uuid.UUID
	for range 40 {
		id := uuid.New()
		reqIDs = append(reqIDs, id)
		recs = append(recs,
			record{kind: kindRequest, req: Request{ID: id, Status: RequestPending, Model: "m", CreatedAt: baseTime}},
			record{kind: kindRequest, req: Request{ID: id, Status: RequestSuccess, StatusCode: 200, CreatedAt: baseTime}})
		for idx := range 3 {
			recs = append(recs, candidateRecords(lifecycle(id, idx))...)
			keys = append(keys, candidateKey{requestID: id, index: idx})
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2 {
		shuffled := slices.Clone(recs)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if err := w.spool.append(shuffled, true); err != nil {
			t.Fatalf("spool append: %v", err)
		}
		// A new segment per pass, as after a restart.
		w.spool.mu.Lock()
		_ = w.spool.sealActive()
		w.spool.mu.Unlock()
	}
	w.opts.BatchSize = 37 // chunks that split lifecycles across batches
	if err := w.replay(context.Background()); err != nil {
		t.Fatalf("replay: %v", err)
	}
	if got, want := w.Stats().Replayed, uint64(2*len(recs)); got != want {
		t.Errorf("Replayed = %d, want %d", got, want)
	}
	if w.spool.hasData.Load() {
		t.Error("spool still has data after replay")
	}
	if n := queryInt(t, dsn, "SELECT count(*) FROM request_candidates"); n != len(keys) {
		t.Errorf("%d candidate rows, want %d", n, len(keys))
	}
	if n := queryInt(t, dsn, "SELECT count(*) FROM requests WHERE status = 'success'"); n != len(reqIDs) {
		t.Errorf("%d successful requests, want %d", n, len(reqIDs))
	}
	for _, k := range keys {
		got, _ := readCandidate(t, dsn, k)
		want := lifecycle(k.requestID, k.index)[3]
		if got.Status != CandidateSuccess || got.FirstByteMS == nil || *got.FirstByteMS != 40 ||
			got.LatencyMS == nil || *got.LatencyMS != 900 || got.StartedAt == nil || !got.StartedAt.Equal(want.StartedAt) {
			t.Fatalf("row %v = %+v, want the success record", k, got)
		}
	}
}

// TestInsertPresumedNewFallsBack protects the plain-INSERT path: a batch whose
// rows all carry their initial record is inserted without ON CONFLICT, and
// when one of them exists after all (a late or repeated record) the batch is
// upserted instead, with the rank rules, and nothing is dropped.
func TestInsertPresumedNewFallsBack(t *testing.T) {
	dsn := migratedURL(t)
	w, logs := newTestWriter(t, dsn, nil)
	if err := w.connect(context.Background()); err != nil {
		t.Fatalf("connect: %v", err)
	}
	w.healthy.Store(true)
	id, fresh := uuid.New(), uuid.New()
	mustUpsert(t, w, []record{
		{kind: kindRequest, req: Request{ID: id, Status: RequestSuccess, StatusCode: 200, Model: "m", CreatedAt: baseTime}},
		{kind: kindCandidate, cand: lifecycle(id, 0)[3]},
	})
	// Every row of this batch holds its initial status, so it is presumed new,
	// but id's rows exist and are finished.
	mustUpsert(t, w, []record{
		{kind: kindRequest, req: Request{ID: id, Status: RequestPending, Model: "late", CreatedAt: baseTime.Add(time.Hour)}},
		{kind: kindCandidate, cand: lifecycle(id, 0)[0]},
		{kind: kindRequest, req: Request{ID: fresh, Status: RequestPending, Model: "m", CreatedAt: baseTime}},
		{kind: kindCandidate, cand: lifecycle(fresh, 0)[0]},
	})
	if n := queryInt(t, dsn, "SELECT count(*) FROM requests WHERE id = $1 AND status = 'success' AND model = 'm'", id); n != 1 {
		t.Error("existing request changed by a late pending record")
	}
	if got, _ := readCandidate(t, dsn, candidateKey{requestID: id}); got.Status != CandidateSuccess {
		t.Errorf("existing candidate %q, want success", got.Status)
	}
	if n := queryInt(t, dsn, "SELECT count(*) FROM requests WHERE id = $1 AND status = 'pending'", fresh); n != 1 {
		t.Error("new request of the refused batch not written")
	}
	if got, ok := readCandidate(t, dsn, candidateKey{requestID: fresh}); !ok || got.Status != CandidateAvailable {
		t.Errorf("new candidate %q (found %v), want available", got.Status, ok)
	}
	if st := w.Stats(); st.Dropped != 0 {
		t.Errorf("stats %+v, want nothing dropped", st)
	}
	if strings.Contains(logs.String(), "row by row") {
		t.Errorf("the unique violation was handled as a bad row:\n%s", logs.String())
	}
}

// TestFillChoosesStatement: only a batch whose every row is presumed new
// skips ON CONFLICT.
func TestFillChoosesStatement(t *testing.T) {
	reqs := []Request{{ID: uuid.New()}, {ID: uuid.New()}}
	cands := []Candidate{{RequestID: reqs[0].ID}}
	tests := []struct {
		name            string
		reqNew, candNew []bool
		want            string
	}{
		{"all new", []bool{true, true}, []bool{true}, insertBatchSQL},
		{"one request not new", []bool{true, false}, []bool{true}, upsertBatchSQL},
		{"candidate not new", []bool{true, true}, []bool{false}, upsertBatchSQL},
		{"no flags", nil, nil, upsertBatchSQL},
	}
	var a batchArgs
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sql, args := a.fill(reqs, tt.reqNew, cands, tt.candNew)
			if sql != tt.want {
				t.Errorf("statement %.40q..., want %.40q...", sql, tt.want)
			}
			if want := len(candidateParams) + len(requestParams); len(args) != want {
				t.Errorf("%d arguments, want %d", len(args), want)
			}
		})
	}
	if strings.Contains(insertBatchSQL, "ON CONFLICT") || strings.Count(upsertBatchSQL, "ON CONFLICT") != 2 {
		t.Error("insertBatchSQL must not upsert, upsertBatchSQL must upsert both tables")
	}
}

// TestDataErrorDropsOnlyRefusedRows: when Postgres refuses a row for its data,
// the batch is retried row by row and only that row's records are dropped,
// whichever statement the batch took first.
func TestDataErrorDropsOnlyRefusedRows(t *testing.T) {
	dsn := migratedURL(t)
	w := connectedWriter(t, dsn)
	// A constraint the sanitiser knows nothing about stands in for any row
	// Postgres refuses.
	if _, err := w.pool.Load().Exec(context.Background(),
		`ALTER TABLE request_candidates ADD CONSTRAINT test_refuse CHECK (provider <> 'refuse-me')`); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		first int // which lifecycle record each candidate starts with: 0 available (presumed new), 1 pending
	}{
		{"presumed new", 0},
		{"upserted", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := uuid.New()
			good, bad := lifecycle(id, 0), lifecycle(id, 1)
			for i := range bad {
				bad[i].Provider = "refuse-me"
			}
			recs := []record{{kind: kindRequest, req: Request{ID: id, Status: RequestPending, CreatedAt: baseTime}}}
			recs = append(recs, candidateRecords(good[tt.first:])...)
			recs = append(recs, candidateRecords(bad[tt.first:])...)
			recs = append(recs, record{kind: kindRequest, req: Request{ID: id, Status: RequestSuccess, StatusCode: 200}})
			dropped := w.Stats().Dropped
			rejected, err := w.upsert(context.Background(), w.prepare(recs))
			if err != nil {
				t.Fatalf("upsert: %v", err)
			}
			if want := len(bad) - tt.first; rejected != want || w.Stats().Dropped-dropped != uint64(want) {
				t.Errorf("rejected %d, dropped %d, want %d", rejected, w.Stats().Dropped-dropped, want)
			}
			if got, ok := readCandidate(t, dsn, candidateKey{requestID: id}); !ok || got.Status != CandidateSuccess {
				t.Errorf("good candidate %q (found %v), want success", got.Status, ok)
			}
			if _, ok := readCandidate(t, dsn, candidateKey{requestID: id, index: 1}); ok {
				t.Error("refused candidate stored")
			}
			if n := queryInt(t, dsn, "SELECT count(*) FROM requests WHERE id = $1 AND status = 'success'", id); n != 1 {
				t.Error("request of the batch not stored")
			}
		})
	}
}
