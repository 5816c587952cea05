package admission

import (
	"context"
	"errors"
	"testing"
	"time"
)

const long = time.Hour // a budget no test reaches unless it advances the fake clock

// TestAcquireAllDimensionsAtomically protects the all-or-nothing rule: an
// attempt waiting on one full dimension holds none of the others.
func TestAcquireAllDimensionsAtomically(t *testing.T) {
	s := New(Config{GlobalLimit: 4, Clock: newFakeClock()})
	client := Dimension{Gate: "gateway_client", ID: "c1", Label: "app-1", Limit: 1}
	holder := mustAcquire(t, s, req(Interactive, 0, target("a", 1)))

	out := make(chan result, 1)
	enqueue(t, context.Background(), s, "w", req(Interactive, long, target("a", 1), client), out)

	snap := s.Stats()
	if got := gateOf(t, snap, "gateway_client", "c1"); got.Active != 0 || got.Pending != 1 {
		t.Fatalf("client gate active/pending = %d/%d while waiting on target, want 0/1", got.Active, got.Pending)
	}
	if snap.Global.Active != 1 {
		t.Fatalf("global active = %d while one attempt waits, want 1 (no hoarding)", snap.Global.Active)
	}
	// The client slot is free, so another attempt for the client on another
	// target gets it at once.
	other := mustAcquire(t, s, req(Interactive, 0, target("b", 1), client))
	other.Release()

	holder.Release()
	r := recv(t, out)
	if r.err != nil {
		t.Fatalf("waiter: %v", r.err)
	}
	snap = s.Stats()
	if snap.Global.Active != 1 || gateOf(t, snap, TargetGate, "a").Active != 1 || gateOf(t, snap, "gateway_client", "c1").Active != 1 {
		t.Fatalf("after grant: %+v", snap)
	}
	r.lease.Release()
	if !s.Idle() {
		t.Fatal("not idle after all releases")
	}
}

// TestNoHoarding protects the global gate from attempts that wait on a
// target: they must not hold a global slot while they wait.
func TestNoHoarding(t *testing.T) {
	s := New(Config{GlobalLimit: 2, Clock: newFakeClock()})
	holder := mustAcquire(t, s, req(Interactive, 0, target("a", 1)))
	out := make(chan result, 3)
	for i := range 3 {
		enqueue(t, context.Background(), s, "a", req(Interactive, long, target("a", 1)), out)
		if active := s.Stats().Global.Active; active != 1 {
			t.Fatalf("global active = %d with %d waiters on a full target, want 1", active, i+1)
		}
	}
	// The second global slot is free for anyone else.
	b := mustAcquire(t, s, req(Background, 0, target("b", 1)))
	b.Release()
	holder.Release()
	for range 3 {
		r := recv(t, out)
		if r.err != nil {
			t.Fatal(r.err)
		}
		r.lease.Release()
	}
	if !s.Idle() {
		t.Fatal("not idle")
	}
}

// TestNoHeadOfLineBlocking protects independent targets from an attempt of
// higher priority that waits on a full target ahead of them.
func TestNoHeadOfLineBlocking(t *testing.T) {
	s := New(Config{GlobalLimit: 2, Clock: newFakeClock()})
	holdA := mustAcquire(t, s, req(Interactive, 0, target("a", 1)))
	out := make(chan result, 4)
	enqueue(t, context.Background(), s, "urgent-a", req(Urgent, long, target("a", 1)), out)

	// Room now on b and on the global gate: granted at once despite the
	// urgent attempt queued ahead.
	b, err := s.Acquire(context.Background(), req(Maintenance, 0, target("b", 1)))
	if err != nil {
		t.Fatalf("attempt for b behind a blocked urgent attempt: %v", err)
	}
	// Global gate now full (holdA, b): queue global-only work and more b.
	enqueue(t, context.Background(), s, "global-only", req(Background, long), out)
	enqueue(t, context.Background(), s, "b", req(Maintenance, long, target("b", 1)), out)

	// A global slot frees while a is still full: the urgent attempt cannot
	// run, so the best runnable one (global-only, Background) gets it.
	g := releaseExpect(t, s, b, out, "global-only")
	// Freeing the target a slot and the global slot: urgent-a runs, b still waits.
	holdA.Release()
	if r := recv(t, out); r.name != "urgent-a" || r.err != nil {
		t.Fatalf("got %s (%v), want urgent-a", r.name, r.err)
	} else {
		defer r.lease.Release()
	}
	g.Release()
	if r := recv(t, out); r.name != "b" || r.err != nil {
		t.Fatalf("got %s (%v), want b", r.name, r.err)
	} else {
		r.lease.Release()
	}
}

// releaseExpect releases l and expects the named waiter's grant.
func releaseExpect(t *testing.T, s *Scheduler, l *Lease, out <-chan result, want string) *Lease {
	t.Helper()
	l.Release()
	r := recv(t, out)
	if r.name != want || r.err != nil {
		t.Fatalf("after release got %s (%v), want %s", r.name, r.err, want)
	}
	return r.lease
}

// TestTimeoutNamesTheFullGate protects the error operators read: the gate
// with no room at expiry, the target gate when both were full.
func TestTimeoutNamesTheFullGate(t *testing.T) {
	tests := []struct {
		name       string
		fullGlobal bool
		fullTarget bool
		want       string
	}{
		{"global full", true, false, GlobalGate},
		{"target full", false, true, TargetGate},
		{"both full", true, true, TargetGate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newFakeClock()
			s := New(Config{GlobalLimit: 2, Clock: clk})
			var held []*Lease
			if tt.fullTarget {
				held = append(held, mustAcquire(t, s, req(Interactive, 0, target("a", 1))))
			}
			if tt.fullGlobal {
				for len(held) < 2 {
					held = append(held, mustAcquire(t, s, req(Interactive, 0)))
				}
			}
			const budget = 250 * time.Millisecond
			out := make(chan result, 1)
			enqueue(t, context.Background(), s, "w", req(Interactive, budget, target("a", 1)), out)
			clk.Advance(budget - time.Nanosecond)
			if p := s.Stats().Pending; p != 1 {
				t.Fatalf("expired before its budget: pending %d", p)
			}
			clk.Advance(time.Nanosecond)
			r := recv(t, out)
			var te *TimeoutError
			if !errors.As(r.err, &te) {
				t.Fatalf("err = %v, want *TimeoutError", r.err)
			}
			if te.Gate != tt.want || te.Budget != budget {
				t.Fatalf("TimeoutError = %+v, want gate %s budget %s", te, tt.want, budget)
			}
			if want := "gateway admission gate " + tt.want + " timed out after 250ms"; te.Error() != want {
				t.Fatalf("message %q, want %q", te.Error(), want)
			}
			snap := s.Stats()
			if snap.Global.TimedOut != 1 || gateOf(t, snap, TargetGate, "a").TimedOut != 1 || snap.Pending != 0 {
				t.Fatalf("counters after timeout: %+v", snap)
			}
			for _, l := range held {
				l.Release()
			}
			if !s.Idle() {
				t.Fatal("not idle")
			}
		})
	}
}

// TestZeroBudgetDoesNotWait protects Budget <= 0: room now or fail now.
func TestZeroBudgetDoesNotWait(t *testing.T) {
	s := New(Config{GlobalLimit: 1, Clock: newFakeClock()})
	l, err := s.Acquire(context.Background(), req(Interactive, 0, target("a", 1)))
	if err != nil {
		t.Fatalf("zero budget with room: %v", err)
	}
	for _, budget := range []time.Duration{0, -time.Second} {
		_, err = s.Acquire(context.Background(), req(Interactive, budget, target("b", 1)))
		var te *TimeoutError
		if !errors.As(err, &te) || te.Gate != GlobalGate || te.Budget != budget {
			t.Fatalf("budget %s without room: err = %v, want TimeoutError on %s", budget, err, GlobalGate)
		}
	}
	if p := s.Stats().Pending; p != 0 {
		t.Fatalf("pending = %d, want 0", p)
	}
	l.Release()
}

// TestQueueBounded protects memory and latency: beyond MaxPending queued
// attempts, admission fails at once.
func TestQueueBounded(t *testing.T) {
	s := New(Config{GlobalLimit: 1, MaxPending: 2, Clock: newFakeClock()})
	holder := mustAcquire(t, s, req(Interactive, 0))
	out := make(chan result, 2)
	enqueue(t, context.Background(), s, "1", req(Interactive, long, target("a", 5)), out)
	enqueue(t, context.Background(), s, "2", req(Interactive, long, target("a", 5)), out)
	_, err := s.Acquire(context.Background(), req(Urgent, long, target("a", 5)))
	if !errors.Is(err, ErrQueueFull) {
		t.Fatalf("third queued attempt: err = %v, want ErrQueueFull", err)
	}
	snap := s.Stats()
	if snap.Global.Rejected != 1 || gateOf(t, snap, TargetGate, "a").Rejected != 1 || snap.Pending != 2 {
		t.Fatalf("after rejection: %+v", snap)
	}
	holder.Release()
	for range 2 {
		r := recv(t, out)
		if r.err != nil {
			t.Fatal(r.err)
		}
		r.lease.Release()
	}
}

// TestCancelLeavesQueue protects capacity from clients that went away: a
// cancelled attempt leaves the queue at once and never receives a slot.
func TestCancelLeavesQueue(t *testing.T) {
	s := New(Config{GlobalLimit: 1, Clock: newFakeClock()})
	holder := mustAcquire(t, s, req(Interactive, 0))
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan result, 2)
	enqueue(t, ctx, s, "cancelled", req(Interactive, long, target("a", 1)), out)
	enqueue(t, context.Background(), s, "next", req(Background, long, target("a", 1)), out)
	cancel()
	r := recv(t, out)
	if r.name != "cancelled" || !errors.Is(r.err, context.Canceled) || r.lease != nil {
		t.Fatalf("got %s %v, want cancelled with context.Canceled", r.name, r.err)
	}
	waitPending(t, s, 1)
	holder.Release()
	if r := recv(t, out); r.name != "next" || r.err != nil {
		t.Fatalf("got %s (%v), want next", r.name, r.err)
	} else {
		r.lease.Release()
	}
	snap := s.Stats()
	if snap.Global.Cancelled != 1 || gateOf(t, snap, TargetGate, "a").Cancelled != 1 {
		t.Fatalf("cancelled counters: %+v", snap)
	}

	// A context already done gets no slot even with room.
	done, stop := context.WithCancel(context.Background())
	stop()
	if l, err := s.Acquire(done, req(Interactive, long)); !errors.Is(err, context.Canceled) || l != nil {
		t.Fatalf("Acquire with done ctx = %v, %v", l, err)
	}
	// A deadline surfaces as DeadlineExceeded.
	holder = mustAcquire(t, s, req(Interactive, 0))
	dctx, dcancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer dcancel()
	if _, err := s.Acquire(dctx, req(Interactive, long)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	holder.Release()
	if !s.Idle() {
		t.Fatal("not idle")
	}
}

// TestGrantRacingCancellationIsReturned protects against a leaked slot when
// the grant and the caller's cancellation happen at the same moment.
func TestGrantRacingCancellationIsReturned(t *testing.T) {
	s := New(Config{GlobalLimit: 1, Clock: newFakeClock()})
	holder := mustAcquire(t, s, req(Interactive, 0))
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan result, 1)
	enqueue(t, ctx, s, "w", req(Interactive, long, target("a", 1)), out)

	// Under the lock, the waiter cannot act on its cancellation before the
	// grant lands: both are pending when it wakes.
	s.mu.Lock()
	cancel()
	s.release(holder, true, s.clock.Now())
	s.mu.Unlock()

	r := recv(t, out)
	if !errors.Is(r.err, context.Canceled) || r.lease != nil {
		t.Fatalf("got %v %v, want context.Canceled and no lease", r.lease, r.err)
	}
	if !s.Idle() {
		t.Fatal("slot granted at cancellation leaked")
	}
	snap := s.Stats()
	g := snap.Global
	if g.Admitted != 2 || g.Released != 2 || g.Reclaimed != 1 || g.Cancelled != 1 {
		t.Fatalf("global counters %+v, want admitted 2 released 2 reclaimed 1 cancelled 1", g)
	}
}

// TestReleaseIdempotent protects every exit path: releases can repeat, in
// any order, from any goroutine.
func TestReleaseIdempotent(t *testing.T) {
	clk := newFakeClock()
	s := New(Config{GlobalLimit: 1, Clock: clk})
	l := mustAcquire(t, s, req(Interactive, 0, target("a", 1)))
	clk.Advance(5 * time.Second)
	l.ReleaseGlobal()
	l.ReleaseGlobal()
	if got := l.GlobalHeld(); got != 5*time.Second {
		t.Fatalf("GlobalHeld = %s, want 5s", got)
	}
	snap := s.Stats()
	if snap.Global.Active != 0 || gateOf(t, snap, TargetGate, "a").Active != 1 {
		t.Fatalf("after ReleaseGlobal: global %d target %d, want 0 and 1", snap.Global.Active, gateOf(t, snap, TargetGate, "a").Active)
	}
	clk.Advance(time.Second)
	done := make(chan struct{})
	for range 4 {
		go func() {
			l.Release()
			l.ReleaseGlobal()
			done <- struct{}{}
		}()
	}
	for range 4 {
		<-done
	}
	if got := l.GlobalHeld(); got != 5*time.Second {
		t.Fatalf("GlobalHeld changed by Release to %s", got)
	}
	snap = s.Stats()
	if snap.Global.Released != 1 || gateOf(t, snap, TargetGate, "a").Released != 1 || !s.Idle() {
		t.Fatalf("after repeated releases: %+v", snap)
	}
	var nilLease *Lease
	nilLease.Release()
	nilLease.ReleaseGlobal()

	// Release without ReleaseGlobal gives back both at once.
	l = mustAcquire(t, s, req(Interactive, 0, target("a", 1)))
	l.Release()
	l.Release()
	if !s.Idle() {
		t.Fatal("not idle")
	}
}

// TestReleaseGlobalHandsOverSlot protects hold modes: freeing the global
// slot of a lease that keeps its target lets queued work run.
func TestReleaseGlobalHandsOverSlot(t *testing.T) {
	s := New(Config{GlobalLimit: 1, Clock: newFakeClock()})
	l := mustAcquire(t, s, req(Interactive, 0, target("a", 1)))
	out := make(chan result, 2)
	enqueue(t, context.Background(), s, "a", req(Interactive, long, target("a", 1)), out)
	enqueue(t, context.Background(), s, "b", req(Background, long, target("b", 1)), out)
	l.ReleaseGlobal()
	r := recv(t, out)
	if r.name != "b" || r.err != nil {
		t.Fatalf("got %s (%v), want b: a's target is still held", r.name, r.err)
	}
	l.Release() // target a free, but the global slot is b's
	if p := s.Stats().Pending; p != 1 {
		t.Fatalf("pending = %d, want 1", p)
	}
	r.lease.Release()
	r = recv(t, out)
	if r.name != "a" || r.err != nil {
		t.Fatalf("got %s (%v), want a", r.name, r.err)
	}
	r.lease.Release()
}

// TestTargetLimitFirstSeenWins protects a gate from a request carrying a
// different limit while the gate is in use; an idle gate adopts the new one.
// TestTargetLimitResizesInPlace: a reloaded max_concurrency reaches the gate
// through the next request's dimension, with the gate's active slots and
// queue kept; a smaller limit takes nothing back and admits nothing until
// active is under it.
func TestTargetLimitResizesInPlace(t *testing.T) {
	clk := newFakeClock()
	s := New(Config{GlobalLimit: 10, Clock: clk})
	l1 := mustAcquire(t, s, req(Interactive, 0, target("a", 1)))
	if _, err := s.Acquire(context.Background(), req(Interactive, 0, target("a", 1))); err == nil {
		t.Fatal("second attempt admitted over a limit of 1")
	}
	// Queued under the old limit, then the limit grows: the queued attempt
	// goes first, before the request that carried the new limit.
	queued := make(chan *Lease, 1)
	go func() {
		l, _ := s.Acquire(context.Background(), req(Interactive, time.Hour, target("a", 1)))
		queued <- l
	}()
	waitPending(t, s, 1)
	l2 := mustAcquire(t, s, req(Interactive, 0, target("a", 3)))
	l3 := <-queued
	if l3 == nil {
		t.Fatal("queued attempt not admitted after the gate grew")
	}
	st := gateOf(t, s.Stats(), TargetGate, "a")
	if st.Limit != 3 || st.Active != 3 {
		t.Fatalf("after growing: limit %d active %d, want 3 and 3", st.Limit, st.Active)
	}
	// Shrink to 1 with three active: nothing new until active is under 1.
	if _, err := s.Acquire(context.Background(), req(Interactive, 0, target("a", 1))); err == nil {
		t.Fatal("admitted over a shrunk limit")
	}
	l1.Release()
	l2.Release()
	if _, err := s.Acquire(context.Background(), req(Interactive, 0, target("a", 1))); err == nil {
		t.Fatal("admitted with active 1 at limit 1")
	}
	l3.Release()
	l4 := mustAcquire(t, s, req(Interactive, 0, target("a", 1)))
	l4.Release()
	if st := gateOf(t, s.Stats(), TargetGate, "a"); st.Active != 0 || st.Limit != 1 {
		t.Fatalf("at rest: %+v", st)
	}
}

// TestOlderVersionNeverResizes: a request planned before a reload that
// fails over after it carries the old limit; it must not set it back.
func TestOlderVersionNeverResizes(t *testing.T) {
	s := New(Config{GlobalLimit: 10, Clock: newFakeClock()})
	v := func(limit int, version uint64) Request {
		d := target("a", limit)
		d.Version = version
		return req(Interactive, 0, d)
	}
	l1 := mustAcquire(t, s, v(1, 1))
	l2 := mustAcquire(t, s, v(3, 2)) // reloaded: 3
	l3 := mustAcquire(t, s, v(1, 1)) // planned before the reload: still admitted under 3
	if got := gateOf(t, s.Stats(), TargetGate, "a").Limit; got != 3 {
		t.Fatalf("limit %d after an older request, want 3", got)
	}
	if _, err := s.Acquire(context.Background(), v(1, 1)); err == nil {
		t.Fatal("admitted over 3")
	}
	// Another reload shrinks it to 2: with 3 active nothing new starts.
	if _, err := s.Acquire(context.Background(), v(2, 3)); err == nil {
		t.Fatal("admitted over a shrunk limit")
	}
	l1.Release()
	l2.Release()
	if got := gateOf(t, s.Stats(), TargetGate, "a").Limit; got != 2 {
		t.Fatalf("limit %d, want 2", got)
	}
	l4 := mustAcquire(t, s, v(1, 1)) // old request, admitted under 2 now that 1 is active
	l3.Release()
	l4.Release()
}

// TestInvalidRequests protects callers from silent misuse.
func TestInvalidRequests(t *testing.T) {
	s := New(Config{})
	eight := make([]Dimension, 8)
	for i := range eight {
		eight[i] = target(string(rune('a'+i)), 1)
	}
	tests := map[string]Request{
		"unknown priority":  {Priority: 7},
		"too many":          {Dimensions: eight},
		"duplicate":         req(Interactive, 0, target("a", 1), target("a", 2)),
		"no gate name":      req(Interactive, 0, Dimension{ID: "x", Limit: 1}),
		"global as a dim":   req(Interactive, 0, Dimension{Gate: GlobalGate, Limit: 1}),
		"zero limit":        req(Interactive, 0, target("a", 0)),
		"negative limit":    req(Interactive, 0, target("a", -1)),
		"dup among several": req(Interactive, 0, target("a", 1), target("b", 1), target("a", 1)),
	}
	for name, r := range tests {
		if _, err := s.Acquire(context.Background(), r); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%s: err = %v, want ErrInvalidRequest", name, err)
		}
	}
	seven := eight[:7]
	l, err := s.Acquire(context.Background(), Request{Dimensions: seven})
	if err != nil {
		t.Fatalf("seven dimensions: %v", err)
	}
	l.Release()
	if !s.Idle() {
		t.Fatal("not idle")
	}
}

// TestCloseRejectsQueuedAndWaitsForLeases protects shutdown: queued work
// fails with ErrClosed, active work may finish, Close waits for it.
func TestCloseRejectsQueuedAndWaitsForLeases(t *testing.T) {
	s := New(Config{GlobalLimit: 1, Clock: newFakeClock()})
	l := mustAcquire(t, s, req(Interactive, 0, target("a", 1)))
	out := make(chan result, 1)
	enqueue(t, context.Background(), s, "queued", req(Interactive, long, target("a", 1)), out)

	short, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Close(short); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close with a lease active and ctx done = %v, want context.Canceled", err)
	}
	if r := recv(t, out); !errors.Is(r.err, ErrClosed) {
		t.Fatalf("queued attempt err = %v, want ErrClosed", r.err)
	}
	if _, err := s.Acquire(context.Background(), req(Urgent, 0)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Acquire after Close = %v, want ErrClosed", err)
	}
	snap := s.Stats()
	if !snap.Closed || snap.Pending != 0 || snap.Global.Active != 1 || gateOf(t, snap, TargetGate, "a").Rejected != 1 {
		t.Fatalf("snapshot after Close: %+v", snap)
	}

	closed := make(chan error, 1)
	go func() { closed <- s.Close(context.Background()) }()
	l.ReleaseGlobal() // the target slot is still held: Close keeps waiting
	select {
	case err := <-closed:
		t.Fatalf("Close returned %v while a target slot was held", err)
	case <-time.After(10 * time.Millisecond):
	}
	l.Release()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return after the last release")
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("second Close = %v", err)
	}
}
