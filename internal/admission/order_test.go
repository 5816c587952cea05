package admission

import (
	"context"
	"testing"
	"time"
)

// grantOrder releases the single global slot again and again and returns
// the names of the waiters in the order they were granted.
func grantOrder(t *testing.T, s *Scheduler, first *Lease, out <-chan result, n int) []string {
	t.Helper()
	var names []string
	l := first
	for range n {
		l.Release()
		r := recv(t, out)
		if r.err != nil {
			t.Fatalf("%s: %v", r.name, r.err)
		}
		names = append(names, r.name)
		l = r.lease
	}
	l.Release()
	return names
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestStrictPriorityFIFO protects the order of service: class first, then
// arrival, across targets.
func TestStrictPriorityFIFO(t *testing.T) {
	s := New(Config{GlobalLimit: 1, Clock: newFakeClock()})
	holder := mustAcquire(t, s, req(Interactive, 0))
	out := make(chan result, 8)
	for _, w := range []struct {
		name string
		p    Priority
		id   string
	}{
		{"bg1", Background, "a"},
		{"int1", Interactive, "b"},
		{"fg1", Foreground, "a"},
		{"int2", Interactive, "a"},
		{"maint1", Maintenance, "c"},
		{"urgent1", Urgent, "c"},
		{"bg2", Background, "b"},
		{"int3", Interactive, ""},
	} {
		r := req(w.p, long)
		if w.id != "" {
			r.Dimensions = []Dimension{target(w.id, 10)}
		}
		enqueue(t, context.Background(), s, w.name, r, out)
	}
	got := grantOrder(t, s, holder, out, 8)
	want := []string{"urgent1", "int1", "int2", "int3", "fg1", "bg1", "bg2", "maint1"}
	if !equal(got, want) {
		t.Fatalf("grant order %v, want %v", got, want)
	}
}

// TestAgingPromotesOneClassPerInterval protects low classes from
// starvation: one class per interval since enqueue, FIFO with the natives
// of the class reached.
func TestAgingPromotesOneClassPerInterval(t *testing.T) {
	clk := newFakeClock()
	const every = 10 * time.Second
	s := New(Config{GlobalLimit: 1, AgingInterval: every, Clock: clk})
	holder := mustAcquire(t, s, req(Interactive, 0))
	out := make(chan result, 4)

	enqueue(t, context.Background(), s, "maint@0", req(Maintenance, long, target("a", 5)), out)
	clk.Advance(every) // maint@0 is Background now
	enqueue(t, context.Background(), s, "bg@10", req(Background, long, target("b", 5)), out)
	enqueue(t, context.Background(), s, "fg@10", req(Foreground, long, target("b", 5)), out)
	if got := s.Stats().Global.Promotions; got != 1 {
		t.Fatalf("promotions after one interval = %d, want 1", got)
	}

	clk.Advance(every - time.Nanosecond) // nothing crosses a boundary yet
	holder.Release()
	r := recv(t, out)
	if r.name != "fg@10" {
		t.Fatalf("first grant %s, want fg@10 (Foreground beats two Background attempts)", r.name)
	}
	clk.Advance(time.Nanosecond)
	// t = 20s: maint@0 is Foreground (two steps), bg@10 is Foreground (one
	// step); same class, so the older one goes first.
	got := grantOrder(t, s, r.lease, out, 2)
	if want := []string{"maint@0", "bg@10"}; !equal(got, want) {
		t.Fatalf("grant order %v, want %v", got, want)
	}
	snap := s.Stats()
	if snap.Global.Promotions != 3 || gateOf(t, snap, TargetGate, "a").Promotions != 2 || gateOf(t, snap, TargetGate, "b").Promotions != 1 {
		t.Fatalf("promotions global %d a %d b %d, want 3 2 1", snap.Global.Promotions,
			gateOf(t, snap, TargetGate, "a").Promotions, gateOf(t, snap, TargetGate, "b").Promotions)
	}
}

// TestAgingStopsAtInteractive protects Urgent: aged work never reaches it,
// and Urgent itself never ages.
func TestAgingStopsAtInteractive(t *testing.T) {
	clk := newFakeClock()
	s := New(Config{GlobalLimit: 1, AgingInterval: time.Second, Clock: clk})
	holder := mustAcquire(t, s, req(Interactive, 0))
	out := make(chan result, 3)
	enqueue(t, context.Background(), s, "maint", req(Maintenance, long), out)
	clk.Advance(1000 * time.Second)
	enqueue(t, context.Background(), s, "int", req(Interactive, long), out)
	enqueue(t, context.Background(), s, "urgent", req(Urgent, long), out)
	if got := s.Stats().Global.Promotions; got != 3 {
		t.Fatalf("live promotions = %d, want 3 (Maintenance to Interactive, no further)", got)
	}
	got := grantOrder(t, s, holder, out, 3)
	if want := []string{"urgent", "maint", "int"}; !equal(got, want) {
		t.Fatalf("grant order %v, want %v", got, want)
	}
	if got := s.Stats().Global.Promotions; got != 3 {
		t.Fatalf("promotions = %d, want 3", got)
	}
}

// TestAgingDefaultInterval protects the documented default of 30s.
func TestAgingDefaultInterval(t *testing.T) {
	clk := newFakeClock()
	s := New(Config{GlobalLimit: 1, Clock: clk})
	holder := mustAcquire(t, s, req(Interactive, 0))
	out := make(chan result, 2)
	enqueue(t, context.Background(), s, "bg", req(Background, long), out)
	enqueue(t, context.Background(), s, "fg", req(Foreground, long), out)
	clk.Advance(29 * time.Second)
	if p := s.Stats().Global.Promotions; p != 0 {
		t.Fatalf("promotions at 29s = %d, want 0", p)
	}
	clk.Advance(time.Second)
	// Both promoted once: bg is Foreground, fg is Interactive.
	got := grantOrder(t, s, holder, out, 2)
	if want := []string{"fg", "bg"}; !equal(got, want) {
		t.Fatalf("grant order %v, want %v", got, want)
	}
}

// TestWaitAccounting protects the wait sums in snapshots: the fast path
// waits zero, a queued grant the time since it was enqueued, on every gate it
// passed.
func TestWaitAccounting(t *testing.T) {
	clk := newFakeClock()
	s := New(Config{GlobalLimit: 1, Clock: clk})
	holder := mustAcquire(t, s, req(Interactive, 0, target("a", 1)))
	clk.Advance(time.Second) // held, not waited: must not count
	if g := s.Stats().Global; g.Admitted != 1 || g.WaitTotalSeconds != 0 || g.WaitMaxSeconds != 0 {
		t.Fatalf("fast path wait stats %+v, want one grant that waited 0", g)
	}
	out := make(chan result, 1)
	enqueue(t, context.Background(), s, "w", req(Background, long, target("a", 1)), out)
	clk.Advance(3 * time.Second)
	holder.Release()
	r := recv(t, out)
	r.lease.Release()
	snap := s.Stats()
	for _, g := range []GateStats{snap.Global, gateOf(t, snap, TargetGate, "a")} {
		if g.Admitted != 2 || g.WaitTotalSeconds != 3 || g.WaitAvgSeconds != 1.5 || g.WaitMaxSeconds != 3 || g.Peak != 1 {
			t.Errorf("%s wait stats %+v, want 2 grants, 3s total, 1.5s avg, 3s max", g.Gate, g)
		}
		// Waits 0 and 3 s: nearest rank puts p50 on 0 and p99 on 3 s.
		if g.WaitP50Seconds != 0 || g.WaitP99Seconds != 3 {
			t.Errorf("%s wait p50 %v p99 %v, want 0 and 3", g.Gate, g.WaitP50Seconds, g.WaitP99Seconds)
		}
	}
}

// TestWaitPercentilesRecent: the percentiles cover the last 128 grants only,
// so an old slow wait leaves them.
func TestWaitPercentilesRecent(t *testing.T) {
	clk := newFakeClock()
	s := New(Config{GlobalLimit: 1, Clock: clk})
	holder := mustAcquire(t, s, req(Interactive, 0, target("a", 1)))
	out := make(chan result, 1)
	enqueue(t, context.Background(), s, "w", req(Background, long, target("a", 1)), out)
	clk.Advance(5 * time.Second)
	holder.Release()
	recv(t, out).lease.Release()
	if g := s.Stats().Global; g.WaitP99Seconds != 5 {
		t.Fatalf("p99 %v, want 5 while the slow grant is recent", g.WaitP99Seconds)
	}
	for range 128 {
		mustAcquire(t, s, req(Interactive, 0, target("a", 1))).Release()
	}
	if g := s.Stats().Global; g.WaitP99Seconds != 0 || g.WaitMaxSeconds != 5 {
		t.Fatalf("after 128 fast grants: p99 %v max %v, want 0 and 5", g.WaitP99Seconds, g.WaitMaxSeconds)
	}
}
