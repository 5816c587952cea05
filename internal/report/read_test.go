package report

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestTimeline protects GET /admin/requests/{id}: candidates come back ordered
// by (candidate_index, retry_index) whatever order they were written in, NULLs
// are JSON null, keys are snake_case, and an unknown id is ErrNotFound.
func TestTimeline(t *testing.T) {
	w := connectedWriter(t, migratedURL(t))
	id := uuid.New()
	var recs []record
	for _, k := range [][2]int{{2, 0}, {0, 1}, {1, 0}, {0, 0}} {
		recs = append(recs, record{kind: kindCandidate, cand: Candidate{RequestID: id, Index: k[0], RetryIndex: k[1],
			Provider: "p", Status: CandidateFailed, StatusCode: 502, ErrorType: ErrorTypeUpstreamConnect, CreatedAt: baseTime}})
	}
	recs = append(recs, record{kind: kindRequest, req: Request{ID: id, Status: RequestFailed, StatusCode: 502,
		Model: "gpt", CandidateCount: 4, CreatedAt: baseTime, Latency: 1200 * time.Millisecond}})
	mustUpsert(t, w, recs)

	tl, err := w.Timeline(context.Background(), id)
	if err != nil {
		t.Fatalf("Timeline: %v", err)
	}
	var order [][2]int32
	for _, c := range tl.Candidates {
		order = append(order, [2]int32{c.CandidateIndex, c.RetryIndex})
	}
	want := [][2]int32{{0, 0}, {0, 1}, {1, 0}, {2, 0}}
	if len(order) != len(want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("order %v, want %v", order, want)
		}
	}
	if tl.Request.LatencyMS == nil || *tl.Request.LatencyMS != 1200 || tl.Request.FinishedAt != nil {
		t.Errorf("request %+v, want latency 1200 and no finished_at", tl.Request)
	}
	b, err := json.Marshal(tl)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"request":{"id":`, `"candidate_index":0`, `"error_type":"upstream_connect_error"`, `"finished_at":null`, `"candidate_count":4`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("JSON lacks %s: %s", key, b)
		}
	}

	if _, err := w.Timeline(context.Background(), uuid.New()); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown id: err %v, want ErrNotFound", err)
	}
}

// TestTimelineBeforeConnect: reads before Postgres was ever reached fail fast.
func TestTimelineBeforeConnect(t *testing.T) {
	w, _ := newTestWriter(t, "postgres://postgres@127.0.0.1:1/x", nil)
	if _, err := w.Timeline(context.Background(), uuid.New()); !errors.Is(err, ErrUnavailable) {
		t.Errorf("err %v, want ErrUnavailable", err)
	}
}
