package report

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestHolderSplit protects which records wait a flush: only rows with no
// terminal record in the batch and none held before, in their order.
func TestHolderSplit(t *testing.T) {
	a := uuid.MustParse("aaaaaaaa-0000-7000-8000-000000000000")
	b := uuid.MustParse("bbbbbbbb-0000-7000-8000-000000000000")
	req := func(id uuid.UUID, status string) record {
		return record{kind: kindRequest, req: Request{ID: id, Status: status}}
	}
	cand := func(id uuid.UUID, index int, status string) record {
		return record{kind: kindCandidate, cand: Candidate{RequestID: id, Index: index, Status: status}}
	}
	// name renders a record as "ra:pending" (request a) or "ca1:pending"
	// (candidate 1 of request a).
	name := func(r record) string {
		if r.kind == kindRequest {
			return "r" + r.req.ID.String()[:1] + ":" + r.req.Status
		}
		return "c" + r.cand.RequestID.String()[:1] + strconv.Itoa(r.cand.Index) + ":" + r.cand.Status
	}
	tests := []struct {
		name      string
		recs      []record
		carried   int
		wantWrite []string
		wantHold  []string
	}{
		{"terminal rows are written",
			[]record{req(a, RequestPending), cand(a, 0, CandidateAvailable), cand(a, 0, CandidateSuccess), req(a, RequestSuccess)}, 0,
			[]string{"ra:pending", "ca0:available", "ca0:success", "ra:success"}, nil},
		{"in-flight rows wait, in order",
			[]record{req(a, RequestPending), cand(a, 0, CandidateAvailable), req(b, RequestFailed), cand(a, 0, CandidatePending)}, 0,
			[]string{"rb:failed"},
			[]string{"ra:pending", "ca0:available", "ca0:pending"}},
		{"held rows are written next time, finished or not",
			[]record{req(a, RequestPending), cand(a, 0, CandidatePending), cand(a, 0, CandidateStreaming), cand(a, 1, CandidateAvailable)}, 2,
			[]string{"ra:pending", "ca0:pending", "ca0:streaming"},
			[]string{"ca1:available"}},
		{"a candidate finishing does not release its request",
			[]record{req(a, RequestPending), cand(a, 0, CandidateFailed), cand(a, 1, CandidatePending)}, 0,
			[]string{"ca0:failed"},
			[]string{"ra:pending", "ca1:pending"}},
		{"every terminal status counts",
			[]record{cand(a, 0, CandidateUnused), cand(a, 1, CandidateSkipped), cand(a, 2, CandidateCancelled), req(a, RequestCancelled)}, 0,
			[]string{"ca0:unused", "ca1:skipped", "ca2:cancelled", "ra:cancelled"}, nil},
	}
	h := newHolder()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs := slices.Clone(tt.recs)
			n := h.split(recs, tt.carried)
			var write, hold []string
			for _, r := range recs[:n] {
				write = append(write, name(r))
			}
			for _, r := range recs[n:] {
				hold = append(hold, name(r))
			}
			if !slices.Equal(write, tt.wantWrite) || !slices.Equal(hold, tt.wantHold) {
				t.Errorf("write %v hold %v, want write %v hold %v", write, hold, tt.wantWrite, tt.wantHold)
			}
			if len(h.reqs) != 0 || len(h.cands) != 0 || len(h.held) != 0 {
				t.Error("holder keeps state between batches")
			}
		})
	}
}

// TestFlushHoldsInFlightRowsOneFlush: a request whose last records come one
// flush after its first is written once, finished; one still running then is
// written anyway, so nothing waits longer than one extra flush.
func TestFlushHoldsInFlightRowsOneFlush(t *testing.T) {
	dsn := migratedURL(t)
	w := connectedWriter(t, dsn)
	ctx := context.Background()
	done, running := uuid.New(), uuid.New()
	first := func(id uuid.UUID) []record {
		return []record{
			{kind: kindRequest, req: Request{ID: id, Status: RequestPending, Model: "m", CreatedAt: baseTime}},
			{kind: kindCandidate, cand: lifecycle(id, 0)[0]},
			{kind: kindCandidate, cand: lifecycle(id, 0)[1]},
		}
	}
	batch, carried := w.flush(ctx, append(first(done), first(running)...), 0)
	if carried != 6 || len(batch) != 6 {
		t.Fatalf("held %d records (batch %d), want all 6", carried, len(batch))
	}
	if n := queryInt(t, dsn, "SELECT count(*) FROM requests") + queryInt(t, dsn, "SELECT count(*) FROM request_candidates"); n != 0 {
		t.Fatalf("%d rows written while held, want 0", n)
	}
	batch = append(batch,
		record{kind: kindCandidate, cand: lifecycle(done, 0)[3]},
		record{kind: kindRequest, req: Request{ID: done, Status: RequestSuccess, StatusCode: 200}})
	batch, carried = w.flush(ctx, batch, carried)
	if carried != 0 || len(batch) != 0 {
		t.Fatalf("held %d records again, want none", carried)
	}
	if st := w.Stats(); st.Written != 8 || st.Dropped != 0 || st.Spooled != 0 {
		t.Errorf("stats %+v, want 8 written", st)
	}
	if n := queryInt(t, dsn, "SELECT count(*) FROM requests WHERE id = $1 AND status = 'success' AND model = 'm'", done); n != 1 {
		t.Error("finished request not written whole")
	}
	if got, _ := readCandidate(t, dsn, candidateKey{requestID: done}); got.Status != CandidateSuccess {
		t.Errorf("finished candidate %s, want success", got.Status)
	}
	if n := queryInt(t, dsn, "SELECT count(*) FROM requests WHERE id = $1 AND status = 'pending'", running); n != 1 {
		t.Error("running request not written after its second flush")
	}
	if got, _ := readCandidate(t, dsn, candidateKey{requestID: running}); got.Status != CandidatePending {
		t.Errorf("running candidate %q, want pending", got.Status)
	}
}

// TestFlushHoldsNothingWhileDown: with Postgres unreachable every record goes
// to the spool at once; holding would only delay making it durable.
func TestFlushHoldsNothingWhileDown(t *testing.T) {
	w, _ := newTestWriter(t, "postgres://postgres@127.0.0.1:1/x", nil)
	id := uuid.New()
	recs := candidateRecords(lifecycle(id, 0)[:2])
	batch, carried := w.flush(context.Background(), recs, 0)
	if carried != 0 || len(batch) != 0 {
		t.Errorf("held %d records while down", carried)
	}
	if st := w.Stats(); st.Spooled != 2 {
		t.Errorf("stats %+v, want 2 spooled", st)
	}
}

// TestCloseWritesHeldRecords: records held back by a flush are written by
// Close, not lost.
func TestCloseWritesHeldRecords(t *testing.T) {
	dsn := migratedURL(t)
	w, _ := newTestWriter(t, dsn, func(o *Options) {
		o.FlushInterval = time.Hour // only a full batch or Close flushes
		o.BatchSize = 2
	})
	w.Start(context.Background())
	waitFor(t, "state ok", 10*time.Second, func() bool { return w.State() == StateOK })
	id := uuid.New()
	w.RecordRequest(Request{ID: id, Status: RequestPending, CreatedAt: baseTime})
	w.RecordCandidate(lifecycle(id, 0)[1]) // the batch is full: flushed, both held
	waitFor(t, "batch taken", 10*time.Second, func() bool { return w.Stats().QueueDepth == 0 })
	if err := w.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if st := w.Stats(); st.Written != 2 || st.Spooled != 0 || st.Dropped != 0 {
		t.Errorf("stats %+v, want 2 written", st)
	}
	if got, ok := readCandidate(t, dsn, candidateKey{requestID: id}); !ok || got.Status != CandidatePending {
		t.Errorf("candidate %+v (found %v), want pending", got, ok)
	}
}
