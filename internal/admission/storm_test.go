package admission

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// tally is what callers observed for one gate.
type tally struct {
	attempts, granted, timedOut, cancelled, rejected atomic.Uint64
	holding                                          atomic.Int64
}

// TestStorm protects the accounting under concurrency: thousands of
// acquires, cancellations, expiries and (repeated, concurrent) releases from
// many goroutines, with real timers, must never over-admit a gate, and must
// leave every gate at rest with counters that match what callers saw:
//
//	active == 0, pending == 0, admitted == released,
//	granted to callers == admitted - reclaimed, cancelled == ctx errors,
//	timed_out == TimeoutErrors, rejected == ErrQueueFull.
func TestStorm(t *testing.T) {
	const (
		workers = 48
		ops     = 150
	)
	s := New(Config{GlobalLimit: 6, MaxPending: 24, AgingInterval: 500 * time.Microsecond})
	targets := make([]Dimension, 6)
	for i := range targets {
		targets[i] = target(fmt.Sprint("t", i), 1+i%3)
	}
	clients := make([]Dimension, 3)
	for i := range clients {
		clients[i] = Dimension{Gate: "gateway_client", ID: fmt.Sprint("c", i), Label: "app", Limit: 3}
	}
	limits := map[gateKey]int{{GlobalGate, ""}: 6}
	tallies := map[gateKey]*tally{{GlobalGate, ""}: {}}
	for _, d := range append(append([]Dimension(nil), targets...), clients...) {
		limits[gateKey{d.Gate, d.ID}] = d.Limit
		tallies[gateKey{d.Gate, d.ID}] = &tally{}
	}

	stop, checked := make(chan struct{}), make(chan struct{})
	go checker(t, s, stop, checked)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			for range ops {
				stormOp(t, s, rng, targets, clients, limits, tallies)
			}
		})
	}
	wg.Wait()
	close(stop)
	<-checked
	if err := s.check(); err != nil {
		t.Fatal(err)
	}
	if !s.Idle() {
		t.Fatalf("not idle after the storm: %+v", s.Stats())
	}
	snap := s.Stats()
	all := append([]GateStats{snap.Global}, snap.Targets...)
	if len(all) != len(tallies) {
		t.Fatalf("snapshot has %d gates, want %d", len(all), len(tallies))
	}
	for _, g := range all {
		tl := tallies[gateKey{g.Gate, g.ID}]
		if g.Active != 0 || g.Pending != 0 || g.Admitted != g.Released {
			t.Errorf("%s/%s at rest: active %d pending %d admitted %d released %d", g.Gate, g.ID, g.Active, g.Pending, g.Admitted, g.Released)
		}
		if got := g.Admitted - g.Reclaimed; got != tl.granted.Load() {
			t.Errorf("%s/%s: admitted-reclaimed %d, callers got %d leases", g.Gate, g.ID, got, tl.granted.Load())
		}
		if g.TimedOut != tl.timedOut.Load() || g.Cancelled != tl.cancelled.Load() || g.Rejected != tl.rejected.Load() {
			t.Errorf("%s/%s: timed_out/cancelled/rejected %d/%d/%d, callers saw %d/%d/%d", g.Gate, g.ID,
				g.TimedOut, g.Cancelled, g.Rejected, tl.timedOut.Load(), tl.cancelled.Load(), tl.rejected.Load())
		}
		if sum := g.Admitted - g.Reclaimed + g.TimedOut + g.Cancelled + g.Rejected; sum != tl.attempts.Load() {
			t.Errorf("%s/%s: outcomes sum to %d, attempts %d", g.Gate, g.ID, sum, tl.attempts.Load())
		}
		if g.Peak > g.Limit {
			t.Errorf("%s/%s: peak %d over limit %d", g.Gate, g.ID, g.Peak, g.Limit)
		}
	}
	if snap.Global.Admitted == 0 || snap.Global.TimedOut == 0 || snap.Global.Cancelled == 0 || snap.Global.Rejected == 0 {
		t.Errorf("storm did not exercise every outcome: %+v", snap.Global)
	}
	t.Logf("global: %+v", snap.Global)
}

func stormOp(t *testing.T, s *Scheduler, rng *rand.Rand, targets, clients []Dimension, limits map[gateKey]int, tallies map[gateKey]*tally) {
	r := Request{Priority: Priority(rng.IntN(numPriorities))}
	switch rng.IntN(4) {
	case 0: // global only
	case 1, 2:
		r.Dimensions = []Dimension{targets[rng.IntN(len(targets))]}
	case 3:
		r.Dimensions = []Dimension{targets[rng.IntN(len(targets))], clients[rng.IntN(len(clients))]}
	}
	if rng.IntN(8) > 0 {
		r.Budget = time.Duration(rng.IntN(2000)) * time.Microsecond
	}
	keys := []gateKey{{GlobalGate, ""}}
	for _, d := range r.Dimensions {
		keys = append(keys, gateKey{d.Gate, d.ID})
	}
	each := func(f func(*tally)) {
		for _, k := range keys {
			f(tallies[k])
		}
	}
	each(func(tl *tally) { tl.attempts.Add(1) })

	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	switch rng.IntN(4) {
	case 0:
		ctx, cancel = context.WithTimeout(ctx, time.Duration(rng.IntN(1500))*time.Microsecond)
	case 1:
		ctx, cancel = context.WithCancel(ctx)
		stop := time.AfterFunc(time.Duration(rng.IntN(1000))*time.Microsecond, cancel)
		defer stop.Stop()
	}
	defer cancel()

	l, err := s.Acquire(ctx, r)
	var te *TimeoutError
	switch {
	case err == nil:
		each(func(tl *tally) { tl.granted.Add(1) })
	case errors.As(err, &te):
		each(func(tl *tally) { tl.timedOut.Add(1) })
		return
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		each(func(tl *tally) { tl.cancelled.Add(1) })
		return
	case errors.Is(err, ErrQueueFull):
		each(func(tl *tally) { tl.rejected.Add(1) })
		return
	default:
		t.Errorf("unexpected error %v", err)
		return
	}

	// Holders per gate must stay within its limit at every moment.
	for _, k := range keys {
		if n := tallies[k].holding.Add(1); n > int64(limits[k]) {
			t.Errorf("gate %v over-admitted: %d holders, limit %d", k, n, limits[k])
		}
	}
	time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
	if rng.IntN(2) == 0 {
		tallies[keys[0]].holding.Add(-1)
		l.ReleaseGlobal()
		time.Sleep(time.Duration(rng.IntN(100)) * time.Microsecond)
		for _, k := range keys[1:] {
			tallies[k].holding.Add(-1)
		}
	} else {
		for _, k := range keys {
			tallies[k].holding.Add(-1)
		}
	}
	if rng.IntN(4) == 0 {
		// Two owners racing to release, as a defer and an explicit release
		// on different goroutines would.
		done := make(chan struct{})
		go func() { l.Release(); close(done) }()
		l.Release()
		<-done
	} else {
		l.Release()
	}
	l.Release()
	l.ReleaseGlobal()
}

// TestCloseUnderLoad protects shutdown racing with traffic: every Acquire
// ends, Close returns once the last lease is released, nothing leaks.
func TestCloseUnderLoad(t *testing.T) {
	s := New(Config{GlobalLimit: 3, MaxPending: 8})
	var wg sync.WaitGroup
	started := make(chan struct{}, 16)
	for i := range 16 {
		wg.Go(func() {
			started <- struct{}{}
			for {
				l, err := s.Acquire(context.Background(), req(Priority(i%numPriorities), 5*time.Millisecond, target(fmt.Sprint(i%4), 1)))
				switch {
				case errors.Is(err, ErrClosed):
					return
				case err == nil:
					time.Sleep(100 * time.Microsecond)
					l.Release()
				}
			}
		})
	}
	for range 16 {
		<-started
	}
	time.Sleep(20 * time.Millisecond)
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("Close = %v", err)
	}
	wg.Wait()
	if !s.Idle() || !s.Stats().Closed {
		t.Fatalf("after Close under load: %+v", s.Stats())
	}
}
