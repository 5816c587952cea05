package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// blockingStore is a fakeStore whose Take waits until hold is closed, so a
// test can act while a grant's confirmation is on the wire.
type blockingStore struct {
	*fakeStore
	entered chan struct{}
	hold    chan struct{}
}

func (b *blockingStore) Take(ctx context.Context, slots []SharedSlot) (SharedHandle, int, error) {
	b.entered <- struct{}{}
	<-b.hold
	return b.fakeStore.Take(ctx, slots)
}

// TestReviewFastPathRefusalKeepsArrivalOrder: an attempt granted on the
// fast path whose confirmation the store refuses must not fall behind an
// attempt that arrived after it (and queued only because the first one held
// the local slot during the round trip).
func TestReviewFastPathRefusalKeepsArrivalOrder(t *testing.T) {
	clk := newFakeClock()
	st := &blockingStore{fakeStore: newFakeStore(), entered: make(chan struct{}, 16), hold: make(chan struct{})}
	s := New(Config{GlobalLimit: 10, Clock: clk, Shared: st, SharedRetry: time.Hour})
	st.setRoom("a", 0) // another replica holds the only slot
	out := make(chan result, 2)
	ctx := context.Background()
	acquireAsync(ctx, s, "first", req(Foreground, time.Minute, target("a", 1)), out)
	<-st.entered // first holds the local slot while Redis answers
	enqueue(t, ctx, s, "second", req(Foreground, time.Minute, target("a", 1)), out)
	close(st.hold)       // Redis answers: every slot is held elsewhere
	waitPending(t, s, 2) // first was refused and queued again
	st.setRoom("a", 1)
	s.WakeShared(TargetGate, "a")
	got := recv(t, out)
	if got.err != nil {
		t.Fatal(got.err)
	}
	if got.name != "first" {
		t.Errorf("after the wake %q ran first; want %q, which arrived first", got.name, "first")
	}
	got.lease.Release()
	s.WakeShared(TargetGate, "a")
	last := recv(t, out)
	if last.err == nil {
		last.lease.Release()
	}
	checkRest(t, s)
}

// TestReviewSharedStorm: attempts on many targets and a few clients meet a
// store that refuses, answers again, goes away (SetShare) and wakes gates,
// while callers cancel. At rest nothing is held locally or in the store,
// every gate's admitted equals released, and the invariants hold
// throughout.
func TestReviewSharedStorm(t *testing.T) {
	st := newFakeStore()
	s := New(Config{GlobalLimit: 8, MaxPending: 64, Shared: st, SharedRetry: 2 * time.Millisecond})
	for i := range 100 {
		st.setRoom(fmt.Sprint("t", i), 1+i%3)
	}
	for i := range 4 {
		st.setRoom(fmt.Sprint("c", i), 2)
	}
	stop, checked := make(chan struct{}), make(chan struct{})
	go sharedChecker(t, s, stop, checked)
	chaos := make(chan struct{})
	go func() {
		defer close(chaos)
		for i := 0; ; i++ {
			select {
			case <-stop:
				s.SetShare(0)
				return
			case <-time.After(time.Millisecond):
			}
			switch i % 7 {
			case 0:
				// One replica last seen: the share is the whole limit, so
				// the checker's active <= limit holds (a smaller share
				// leaves slots above it by design).
				s.SetShare(1)
				st.mu.Lock()
				st.unavailable = true
				st.mu.Unlock()
			case 3:
				st.mu.Lock()
				st.unavailable = false
				st.mu.Unlock()
				s.SetShare(0)
			default:
				s.WakeShared(TargetGate, fmt.Sprint("t", i%100))
				s.WakeShared(ClientGate, fmt.Sprint("c", i%4))
			}
		}
	}()
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := range 150 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%5)*time.Millisecond+time.Millisecond)
				r := Request{Priority: Priority(i % int(numPriorities)), Budget: time.Duration(i%4) * 2 * time.Millisecond,
					Dimensions: []Dimension{target(fmt.Sprint("t", (w*7+i)%100), 2),
						{Gate: ClientGate, ID: fmt.Sprint("c", w%4), Label: "client", Limit: 3}}}
				if l, err := s.Acquire(ctx, r); err == nil {
					time.Sleep(time.Duration(i%3) * 100 * time.Microsecond)
					l.Release()
				}
				cancel()
			}
		})
	}
	wg.Wait()
	close(stop)
	<-checked
	<-chaos
	time.Sleep(10 * time.Millisecond) // retry timers still due fire and find nothing to do
	checkRest(t, s)
	if n := st.heldCount(); n != 0 {
		t.Fatalf("the store still holds %d grants at rest", n)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestReviewGatesRefusedThenDegradedAreForgotten: gates the store refused
// and that nothing holds or waits on any more must end up on the idle list
// (at most idleGatesKept kept), whether the retry timer reopens them or the
// store going away (SetShare) does.
func TestReviewGatesRefusedThenDegradedAreForgotten(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reopen func(s *Scheduler, clk *fakeClock)
	}{
		{"retry timer", func(_ *Scheduler, clk *fakeClock) { clk.Advance(time.Hour) }},
		{"store goes away", func(s *Scheduler, _ *fakeClock) { s.SetShare(2) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			st := newFakeStore() // no room anywhere: every gate is held elsewhere
			s := New(Config{GlobalLimit: 10, Clock: clk, Shared: st, SharedRetry: time.Hour})
			const gates = idleGatesKept + 16
			for i := range gates {
				_, err := s.Acquire(context.Background(), req(Foreground, 0, target(fmt.Sprint("g", i), 4)))
				var te *TimeoutError
				if !errors.As(err, &te) {
					t.Fatalf("gate %d: %v, want a TimeoutError (refused, no budget)", i, err)
				}
			}
			tc.reopen(s, clk)
			if n := len(s.Stats().Targets); n > idleGatesKept {
				t.Fatalf("%d gates kept with nothing held or queued, want at most %d", n, idleGatesKept)
			}
			checkRest(t, s)
		})
	}
}

// sharedChecker is checker, except that a gate at rest but not idle is
// allowed: a refused gate stays off the idle list while its retry is due
// (by design), and SetShare leaves such gates behind (the bug
// TestReviewGatesRefusedThenDegradedAreForgotten shows).
func sharedChecker(t *testing.T, s *Scheduler, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			if err := s.check(); err != nil && !strings.Contains(err.Error(), "idle false with active 0 pending 0") {
				t.Errorf("invariant: %v", err)
				return
			}
		}
	}
}

// ctxStore answers like fakeStore but, when fail is set, returns that error
// (a caller that gave up, as quota.Store does) after the take.
type ctxStore struct {
	*blockingStore
	fail error
}

func (c *ctxStore) Take(ctx context.Context, slots []SharedSlot) (SharedHandle, int, error) {
	h, full, err := c.blockingStore.Take(ctx, slots)
	if c.fail != nil && h != 0 {
		c.Give(h)
		return 0, -1, c.fail
	}
	return h, full, err
}

// TestReviewConfirmationInFlight: what happens while a grant's
// confirmation is on the wire: the scheduler closing (the store refuses or
// confirms), or the caller giving up (the store reports it). Nothing stays
// held locally or in the store, Close returns once the lease is gone, and
// the counters balance.
func TestReviewConfirmationInFlight(t *testing.T) {
	for _, tc := range []struct {
		name    string
		room    int
		fail    error
		closeIt bool
		want    func(error) bool
	}{
		{"closed, refused", 0, nil, true, func(err error) bool { return errors.Is(err, ErrClosed) }},
		{"closed, confirmed", 1, nil, true, func(err error) bool { return err == nil }},
		{"caller gave up", 1, context.Canceled, false, func(err error) bool { return errors.Is(err, context.Canceled) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bs := &blockingStore{fakeStore: newFakeStore(), entered: make(chan struct{}, 4), hold: make(chan struct{})}
			st := &ctxStore{blockingStore: bs, fail: tc.fail}
			s := New(Config{GlobalLimit: 10, Clock: newFakeClock(), Shared: st, SharedRetry: time.Hour})
			st.setRoom("a", tc.room)
			out := make(chan result, 1)
			acquireAsync(context.Background(), s, "x", req(Foreground, time.Minute, target("a", 1)), out)
			<-bs.entered
			closed := make(chan error, 1)
			if tc.closeIt {
				go func() { closed <- s.Close(context.Background()) }()
				for {
					l, err := s.Acquire(context.Background(), req(Foreground, 0))
					if errors.Is(err, ErrClosed) {
						break
					}
					l.Release()
				}
			}
			close(bs.hold)
			r := recv(t, out)
			if !tc.want(r.err) {
				t.Fatalf("Acquire: lease=%v err=%v", r.lease != nil, r.err)
			}
			if r.lease != nil {
				r.lease.Release()
			}
			if tc.closeIt {
				if err := <-closed; err != nil {
					t.Fatalf("Close: %v", err)
				}
			}
			snap := s.Stats()
			if snap.Global.Active != 0 || snap.Pending != 0 {
				t.Fatalf("not at rest: %+v", snap.Global)
			}
			for _, g := range snap.Targets {
				if g.Admitted != g.Released || g.Active != 0 || g.Pending != 0 {
					t.Fatalf("gate %s unbalanced: %+v", g.ID, g)
				}
			}
			if n := st.heldCount(); n != 0 {
				t.Fatalf("store holds %d grants", n)
			}
		})
	}
}
