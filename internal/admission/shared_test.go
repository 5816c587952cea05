package admission

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// fakeStore is a shared store whose answers the test sets: room per gate id
// (slots other replicas leave), or unavailable.
type fakeStore struct {
	mu          sync.Mutex
	room        map[string]int
	unavailable bool
	next        SharedHandle
	held        map[SharedHandle][]string
	takes       int
}

func newFakeStore() *fakeStore {
	return &fakeStore{room: map[string]int{}, held: map[SharedHandle][]string{}}
}

func (f *fakeStore) Take(_ context.Context, slots []SharedSlot) (SharedHandle, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.takes++
	f.next++
	if f.unavailable {
		f.held[f.next] = nil
		return f.next, -1, fmt.Errorf("%w: fake", ErrSharedUnavailable)
	}
	for i, s := range slots {
		if f.room[s.ID] <= 0 {
			return 0, i, nil
		}
	}
	ids := make([]string, len(slots))
	for i, s := range slots {
		f.room[s.ID]--
		ids[i] = s.ID
	}
	f.held[f.next] = ids
	return f.next, -1, nil
}

func (f *fakeStore) Give(h SharedHandle) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range f.held[h] {
		f.room[id]++
	}
	delete(f.held, h)
}

func (f *fakeStore) setRoom(id string, n int) {
	f.mu.Lock()
	f.room[id] = n
	f.mu.Unlock()
}

func (f *fakeStore) heldCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.held)
}

// TestSharedRefusalRequeuesInPlace: an attempt the store refuses holds
// nothing while it waits, keeps its place ahead of younger attempts, and
// runs when a slot is freed on another replica (a wake).
func TestSharedRefusalRequeuesInPlace(t *testing.T) {
	clk := newFakeClock()
	st := newFakeStore()
	s := New(Config{GlobalLimit: 10, Clock: clk, Shared: st, SharedRetry: time.Hour})
	st.setRoom("a", 0) // other replicas hold every slot
	out := make(chan result, 2)
	ctx := context.Background()
	acquireAsync(ctx, s, "old", req(Foreground, time.Minute, target("a", 2)), out)
	waitPending(t, s, 1)
	snap := s.Stats()
	if snap.Global.Active != 0 || gateOf(t, snap, TargetGate, "a").Active != 0 {
		t.Fatalf("a refused attempt holds slots while it waits: %+v", snap.Global)
	}
	if got := gateOf(t, snap, TargetGate, "a").SharedRefused; got != 1 {
		t.Fatalf("shared_refused = %d, want 1", got)
	}
	// A younger attempt of the same class queues behind it.
	acquireAsync(ctx, s, "young", req(Foreground, time.Minute, target("a", 2)), out)
	waitPending(t, s, 2)
	st.setRoom("a", 1)
	s.WakeShared(TargetGate, "a")
	first := recv(t, out)
	if first.name != "old" || first.err != nil {
		t.Fatalf("first admitted: %s %v, want old", first.name, first.err)
	}
	// The young one was refused in turn (room was 1) and waits again.
	waitPending(t, s, 1)
	first.lease.Release()
	s.WakeShared(TargetGate, "a")
	second := recv(t, out)
	if second.name != "young" || second.err != nil {
		t.Fatalf("second: %s %v", second.name, second.err)
	}
	second.lease.Release()
	checkRest(t, s)
	if st.heldCount() != 0 {
		t.Fatalf("store still holds %d grants", st.heldCount())
	}
}

// TestSharedRetryAndBudget: without a wake the retry timer reopens the
// gate (slots of a dead replica expire silently); a budget that runs out
// while refused is a TimeoutError naming the target gate.
func TestSharedRetryAndBudget(t *testing.T) {
	clk := newFakeClock()
	st := newFakeStore()
	s := New(Config{GlobalLimit: 10, Clock: clk, Shared: st, SharedRetry: 50 * time.Millisecond})
	out := make(chan result, 1)
	acquireAsync(context.Background(), s, "x", req(Foreground, time.Second, target("a", 1)), out)
	waitPending(t, s, 1)
	st.setRoom("a", 1)
	clk.Advance(50 * time.Millisecond)
	r := recv(t, out)
	if r.err != nil {
		t.Fatalf("after the retry: %v", r.err)
	}
	r.lease.Release()

	st.setRoom("a", 0)
	acquireAsync(context.Background(), s, "y", req(Foreground, 200*time.Millisecond, target("a", 1)), out)
	waitPending(t, s, 1)
	for range 4 {
		clk.Advance(50 * time.Millisecond)
	}
	r = recv(t, out)
	var te *TimeoutError
	if !errors.As(r.err, &te) || te.Gate != TargetGate {
		t.Fatalf("err = %v, want a TimeoutError on %s", r.err, TargetGate)
	}
	checkRest(t, s)
}

// TestSharedDegradedShare: with the store away each replica enforces its
// share, never nothing and never everything; back to the whole limit when
// the store answers.
func TestSharedDegradedShare(t *testing.T) {
	st := newFakeStore()
	st.unavailable = true
	s := New(Config{GlobalLimit: 10, Clock: newFakeClock(), Shared: st})
	s.SetShare(3) // three replicas were alive
	l1 := mustAcquire(t, s, req(Interactive, 0, target("a", 7)))
	l2 := mustAcquire(t, s, req(Interactive, 0, target("a", 7)))
	if _, err := s.Acquire(context.Background(), req(Interactive, 0, target("a", 7))); err == nil {
		t.Fatal("admitted over the share 7/3 = 2")
	}
	if _, err := s.Acquire(context.Background(), req(Interactive, 0, target("b", 1))); err != nil {
		t.Fatalf("a limit of 1 shared by 3 must still admit one: %v", err)
	}
	st.mu.Lock()
	st.unavailable = false
	st.room["a"] = 5
	st.mu.Unlock()
	s.SetShare(0)
	l3 := mustAcquire(t, s, req(Interactive, 0, target("a", 7)))
	if got := gateOf(t, s.Stats(), TargetGate, "a").Limit; got != 7 {
		t.Fatalf("limit after recovery %d, want 7", got)
	}
	l1.Release()
	l2.Release()
	l3.Release()
}

// checkRest asserts the scheduler is at rest with its counters balanced.
func checkRest(t *testing.T, s *Scheduler) {
	t.Helper()
	snap := s.Stats()
	if !s.Idle() || snap.Global.Active != 0 || snap.Pending != 0 {
		t.Fatalf("not at rest: %+v", snap)
	}
	for _, g := range snap.Targets {
		if g.Admitted != g.Released || g.Active != 0 || g.Pending != 0 {
			t.Fatalf("gate %s/%s unbalanced: %+v", g.Gate, g.ID, g)
		}
	}
}
