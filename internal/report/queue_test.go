package report

import (
	"testing"

	"github.com/google/uuid"
)

// TestRecordQueue protects the queue's contract with the batcher: records
// come out oldest first, a push beyond the limit is refused (the caller
// spools), and the batcher is signalled once a whole batch waits, not per
// record.
func TestRecordQueue(t *testing.T) {
	q := newRecordQueue(5, 3)
	rec := func(i int) *record {
		return &record{kind: kindCandidate, cand: Candidate{RequestID: uuid.UUID{byte(i)}, Index: i}}
	}
	signalled := func() bool {
		select {
		case <-q.ready:
			return true
		default:
			return false
		}
	}
	for i := range 2 {
		if !q.push(rec(i)) {
			t.Fatalf("push %d refused below the limit", i)
		}
	}
	if signalled() {
		t.Fatal("signalled before a whole batch waited")
	}
	q.push(rec(2))
	if !signalled() {
		t.Fatal("not signalled with a whole batch waiting")
	}
	q.push(rec(3))
	q.push(rec(4))
	if q.push(rec(5)) {
		t.Fatal("push beyond the limit accepted")
	}
	if n := q.len(); n != 5 {
		t.Fatalf("len %d, want 5", n)
	}
	got := q.take(nil, 2)
	got = q.take(got, 10)
	if len(got) != 5 || q.len() != 0 {
		t.Fatalf("took %d, %d left; want 5, 0", len(got), q.len())
	}
	for i := range got {
		if got[i].cand.Index != i {
			t.Fatalf("record %d is %d: not oldest first", i, got[i].cand.Index)
		}
	}
	if got := q.take(nil, 0); len(got) != 0 {
		t.Fatalf("take 0 returned %d records", len(got))
	}
}
