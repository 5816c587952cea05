package admission

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
)

// BenchmarkAcquireRelease is the fast path every attempt takes when there is
// room: global + one target, nothing queued.
func BenchmarkAcquireRelease(b *testing.B) {
	s := New(Config{GlobalLimit: 256})
	r := req(Interactive, 250*time.Millisecond, target("3f9a1c0de4b2a7f6e5d4c3b2a1908f7e6d5c4b3a2918f7e6d5c4b3a29180f7e6", 8))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l, err := s.Acquire(ctx, r)
		if err != nil {
			b.Fatal(err)
		}
		l.Release()
	}
}

// BenchmarkAcquireReleaseParallel contends 2 to 8 goroutines for 4 slots,
// so most attempts queue and are handed a slot by a release.
func BenchmarkAcquireReleaseParallel(b *testing.B) {
	for _, goroutines := range []int{2, 4, 8} {
		b.Run(fmt.Sprint("goroutines=", goroutines), func(b *testing.B) {
			s := New(Config{GlobalLimit: 4})
			r := req(Interactive, 10*time.Second, target("t", 4))
			// RunParallel starts parallelism*GOMAXPROCS goroutines.
			b.SetParallelism(max(1, goroutines/runtime.GOMAXPROCS(0)))
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					l, err := s.Acquire(ctx, r)
					if err != nil {
						b.Error(err)
						return
					}
					l.Release()
				}
			})
		})
	}
}

// BenchmarkDispatch measures one grant with n attempts queued over 50
// targets: half the targets are full (their attempts stay queued and must be
// skipped without being looked at), the other half are limited only by the
// single global slot. Each op releases the global slot (one grant) and
// queues one new attempt so the queue stays at n. The cost per op must not
// grow with n beyond log(n).
//
// timers=real includes the runtime timer of each queued attempt's budget
// (the runtime's own timer heap is O(log n) per add and stop); timers=none
// uses a clock whose timers cost nothing, isolating the scheduler's index.
func BenchmarkDispatch(b *testing.B) {
	for _, timers := range []string{"real", "none"} {
		for _, n := range []int{100, 1000, 10000} {
			b.Run(fmt.Sprintf("timers=%s/queued=%d", timers, n), func(b *testing.B) {
				var clock Clock
				if timers == "none" {
					clock = frozenClock{time.Now()}
				}
				benchmarkDispatch(b, n, clock)
			})
		}
	}
}

// frozenClock never moves and never fires.
type frozenClock struct{ t time.Time }

func (c frozenClock) Now() time.Time                      { return c.t }
func (frozenClock) AfterFunc(time.Duration, func()) Timer { return frozenTimer{} }

type frozenTimer struct{}

func (frozenTimer) Stop() bool { return true }

func benchmarkDispatch(b *testing.B, n int, clock Clock) {
	s := New(Config{GlobalLimit: 1, MaxPending: 2 * n, Clock: clock})
	const targets = 50
	dims := make([]Dimension, targets)
	for i := range dims {
		dims[i] = target(fmt.Sprintf("target-%02d", i), n)
	}
	// Fill the first half of the targets, holding only the target slot.
	for i := range targets / 2 {
		d := dims[i]
		d.Limit = 1
		dims[i] = d
		l, err := s.Acquire(context.Background(), Request{Dimensions: []Dimension{d}})
		if err != nil {
			b.Fatal(err)
		}
		l.ReleaseGlobal()
		defer l.Release()
	}
	slot, err := s.Acquire(context.Background(), Request{})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	queue := func(d Dimension) {
		r := Request{Priority: Priority(1 + rng.IntN(4)), Budget: time.Hour, Dimensions: []Dimension{d}}
		_, w, err := s.try(context.Background(), r)
		if err != nil || w == nil {
			b.Fatalf("queue: %v", err)
		}
	}
	for i := range n {
		queue(dims[i%targets])
	}
	next := 0
	for b.Loop() {
		s.mu.Lock()
		now := s.clock.Now()
		// The heaps ignore the global gate, so the best runnable
		// attempt now is the one the release below will grant.
		w := s.best(now)
		s.release(slot, true, now)
		s.mu.Unlock()
		if w == nil || w.state != stateGranted {
			b.Fatal("release did not grant the best runnable attempt")
		}
		slot = w.lease
		queue(dims[targets/2+next%(targets/2)])
		next++
	}
	// Reject what is queued (stopping its timers), then end the slot.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = s.Close(ctx)
	slot.Release()
}

// BenchmarkScrape is what a Prometheus scrape costs the scheduler: the time
// its lock is held to read the gauges, with 1,000 targets that have nothing
// queued (each with a slot in use) and 10,000 attempts queued on ten full
// ones. Every request's Acquire and Release waits for that lock meanwhile.
func BenchmarkScrape(b *testing.B) {
	s := scrapeScheduler(b, 1000, 10, 10000)
	b.Run("read=Stats", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = s.Stats()
		}
	})
	b.Run("read=Usage", func(b *testing.B) {
		var buf []GateUsage
		b.ReportAllocs()
		for b.Loop() {
			buf = s.Usage(buf).Targets
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = s.Close(ctx)
}

// scrapeScheduler builds a scheduler holding one target slot on each of idle
// targets and queued attempts spread over hot full targets.
func scrapeScheduler(b *testing.B, idle, hot, queued int) *Scheduler {
	clock := &settableClock{now: time.Now()}
	s := New(Config{GlobalLimit: idle + hot + 1, MaxPending: queued, Clock: clock})
	for i := range idle + hot {
		d := target(fmt.Sprintf("target-%04d", i), 2)
		if i >= idle {
			d.Limit = 1
		}
		if _, err := s.Acquire(context.Background(), Request{Dimensions: []Dimension{d}}); err != nil {
			b.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range queued {
		d := target(fmt.Sprintf("target-%04d", idle+i%hot), 1)
		r := Request{Priority: Priority(1 + rng.IntN(4)), Budget: time.Hour, Dimensions: []Dimension{d}}
		if _, w, err := s.try(context.Background(), r); err != nil || w == nil {
			b.Fatalf("queue: %v", err)
		}
	}
	// A minute later the queued attempts have aged: Stats counts their
	// promotions.
	clock.now = clock.now.Add(time.Minute)
	return s
}

// settableClock moves only when the benchmark sets it and never fires.
type settableClock struct{ now time.Time }

func (c *settableClock) Now() time.Time                      { return c.now }
func (*settableClock) AfterFunc(time.Duration, func()) Timer { return frozenTimer{} }
