package admission

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind: every
// waiter and every budget timer must end with its attempt.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeClock only moves when Advance is called; timers fire inside Advance,
// on the caller's goroutine and outside the clock's own lock (the
// scheduler's expire takes the scheduler lock, which may be held by code
// calling Timer.Stop).
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c    *fakeClock
	when time.Time
	f    func()
	done bool
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, when: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.done {
		return false
	}
	t.done = true
	return true
}

// Advance moves time forward and runs the timers that became due, in order.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due, keep []*fakeTimer
	for _, t := range c.timers {
		switch {
		case t.done:
		case !t.when.After(c.now):
			t.done = true
			due = append(due, t)
		default:
			keep = append(keep, t)
		}
	}
	c.timers = keep
	c.mu.Unlock()
	slices.SortStableFunc(due, func(a, b *fakeTimer) int { return a.when.Compare(b.when) })
	for _, t := range due {
		t.f()
	}
}

// result is the outcome of one asynchronous Acquire.
type result struct {
	name  string
	lease *Lease
	err   error
}

// acquireAsync runs Acquire on its own goroutine and reports to out.
func acquireAsync(ctx context.Context, s *Scheduler, name string, req Request, out chan<- result) {
	go func() {
		l, err := s.Acquire(ctx, req)
		out <- result{name: name, lease: l, err: err}
	}()
}

// enqueue starts an Acquire and returns once it is queued, so tests control
// the enqueue order exactly.
func enqueue(t *testing.T, ctx context.Context, s *Scheduler, name string, req Request, out chan<- result) {
	t.Helper()
	before := s.Stats().Pending
	acquireAsync(ctx, s, name, req, out)
	waitPending(t, s, before+1)
}

// waitPending polls until n attempts are queued; queuing happens on another
// goroutine, and polling is the only way to observe it from outside.
func waitPending(t *testing.T, s *Scheduler, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		p := s.Stats().Pending
		if p == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pending = %d, want %d", p, n)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

func recv(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no Acquire result within 5s")
		return result{}
	}
}

// mustAcquire acquires with room expected now.
func mustAcquire(t *testing.T, s *Scheduler, req Request) *Lease {
	t.Helper()
	l, err := s.Acquire(context.Background(), req)
	if err != nil {
		t.Fatalf("Acquire(%+v): %v", req, err)
	}
	return l
}

func target(id string, limit int) Dimension {
	return Dimension{Gate: TargetGate, ID: id, Label: "provider-" + id, Limit: limit}
}

func req(p Priority, budget time.Duration, dims ...Dimension) Request {
	return Request{Priority: p, Budget: budget, Dimensions: dims}
}

// gateOf finds a dimension gate in a snapshot.
func gateOf(t *testing.T, snap Snapshot, gate, id string) GateStats {
	t.Helper()
	for _, g := range snap.Targets {
		if g.Gate == gate && g.ID == id {
			return g
		}
	}
	t.Fatalf("gate %s/%s not in snapshot", gate, id)
	return GateStats{}
}
