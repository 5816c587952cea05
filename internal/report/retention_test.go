package report

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestRetentionDeletesOnlyOld protects GATEWAY_REPORT_RETENTION: rows older than
// the cutoff go, in batches smaller than the backlog, and newer rows stay.
func TestRetentionDeletesOnlyOld(t *testing.T) {
	dsn := migratedURL(t)
	w := connectedWriter(t, dsn)
	w.retentionBatch = 3 // force several statements per table
	now := baseTime
	var recs []record
	for i := range 10 {
		created := now.Add(-48 * time.Hour) // expired
		if i%2 == 0 {
			created = now.Add(-time.Hour) // kept
		}
		id := uuid.New()
		recs = append(recs,
			record{kind: kindRequest, req: Request{ID: id, Status: RequestSuccess, CreatedAt: created}},
			record{kind: kindCandidate, cand: Candidate{RequestID: id, Status: CandidateSuccess, CreatedAt: created}},
			record{kind: kindCandidate, cand: Candidate{RequestID: id, Index: 1, Status: CandidateUnused, CreatedAt: created}})
	}
	mustUpsert(t, w, recs)

	reqs, cands, err := w.deleteExpired(context.Background(), now.Add(-24*time.Hour))
	if err != nil {
		t.Fatalf("deleteExpired: %v", err)
	}
	if reqs != 5 || cands != 10 {
		t.Errorf("deleted %d requests, %d candidates; want 5, 10", reqs, cands)
	}
	if n := queryInt(t, dsn, "SELECT count(*) FROM requests WHERE created_at < $1", now.Add(-24*time.Hour)); n != 0 {
		t.Errorf("%d expired requests left", n)
	}
	if n := queryInt(t, dsn, "SELECT count(*) FROM requests"); n != 5 {
		t.Errorf("%d requests left, want 5", n)
	}
	if n := queryInt(t, dsn, "SELECT count(*) FROM request_candidates"); n != 10 {
		t.Errorf("%d candidates left, want 10", n)
	}
}

// TestRetentionLoop: the background job runs on its own once the store is up,
// using the injected clock.
func TestRetentionLoop(t *testing.T) {
	dsn := migratedURL(t)
	w, _ := newTestWriter(t, dsn, func(o *Options) { o.Retention = time.Hour })
	w.retentionFirst = 50 * time.Millisecond
	w.retentionEvery = 50 * time.Millisecond
	w.now = func() time.Time { return baseTime }
	w.Start(context.Background())
	w.RecordCandidate(Candidate{RequestID: uuid.New(), Status: CandidateFailed, CreatedAt: baseTime.Add(-2 * time.Hour)})
	w.RecordCandidate(Candidate{RequestID: uuid.New(), Status: CandidateFailed, CreatedAt: baseTime})
	waitFor(t, "written", 10*time.Second, func() bool { return w.Stats().Written == 2 })
	waitFor(t, "expired row deleted", 10*time.Second, func() bool {
		return queryInt(t, dsn, "SELECT count(*) FROM request_candidates") == 1
	})
}
