package admission

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// SharedSlot names one dimension's slot in a store shared by replicas.
type SharedSlot struct {
	Gate, ID string
	Limit    int
}

// SharedHandle identifies the slots one grant took in the shared store.
type SharedHandle uint64

// ErrSharedUnavailable is wrapped by SharedStore.Take when the store cannot
// answer: the grant then counts against this replica's share only.
var ErrSharedUnavailable = errors.New("gateway shared slots unavailable")

// SharedStore holds the slots several replicas share (internal/quota keeps
// them in Redis). The scheduler still decides who goes next; the store only
// confirms that a slot is free everywhere.
type SharedStore interface {
	// Take takes one slot of every entry of slots at once, or none. When
	// none was taken because a slot is held everywhere, full is its index
	// and h is zero. An error wrapping ErrSharedUnavailable means the
	// store did not answer: h is valid and held locally, and the store
	// counts it once it answers again (so nothing is counted twice).
	Take(ctx context.Context, slots []SharedSlot) (h SharedHandle, full int, err error)
	// Give returns h's slots. The scheduler calls it under its lock, so it
	// must neither block nor call back into the scheduler.
	Give(h SharedHandle)
}

// defaultSharedRetry is how long a gate the shared store refused stays
// closed when no wake arrives first.
const defaultSharedRetry = 50 * time.Millisecond

// localLimit is what a gate enforces for the limit want: all of it while
// the shared store answers (it keeps the total), this replica's share while
// it does not, so that replicas never lift a limit nor refuse everything.
func (s *Scheduler) localLimit(want int) int {
	if s.shared == nil || s.share <= 0 {
		return want
	}
	return max(1, want/s.share)
}

// SetShare switches every dimension gate to a share of its limit: replicas
// is how many replicas were last seen alive while the shared store is
// unreachable, and 0 once it answers again. Slots held above a smaller share
// are not taken back; nothing new starts until active is under it.
func (s *Scheduler) SetShare(replicas int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if replicas == s.share {
		return
	}
	s.share = replicas
	for _, g := range s.gates {
		g.limit = s.localLimit(g.want)
		if replicas > 0 && g.sharedFull {
			// The store's refusals no longer apply: the share rules now.
			s.clearSharedFull(g)
		}
		s.sync(g)
	}
	s.dispatch(s.clock.Now())
	// A gate kept off the idle list while it was refused may be idle now.
	for _, g := range s.gates {
		s.settle(g)
	}
}

// WakeShared reopens the gate that the shared store had refused, because a
// slot of it was freed on some replica. Unknown gates are ignored.
func (s *Scheduler) WakeShared(gate, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.gates[gateKey{gate: gate, id: id}]
	if g == nil || !g.sharedFull {
		return
	}
	s.clearSharedFull(g)
	g.sharedCap = g.active + 1
	s.sync(g)
	s.dispatch(s.clock.Now())
	s.settle(g)
}

func (s *Scheduler) clearSharedFull(g *gate) {
	g.sharedFull = false
	g.sharedCap = 0
	if g.retry != nil {
		g.retry.Stop()
		g.retry = nil
	}
}

// markSharedFull closes g until a wake or the retry timer: the retry covers
// slots that free without a message (a dead replica's leases expiring).
func (s *Scheduler) markSharedFull(g *gate) {
	if g.sharedFull {
		return
	}
	g.sharedFull = true
	s.sync(g)
	key := g.key
	g.retry = s.clock.AfterFunc(s.sharedRetry, func() { s.WakeShared(key.gate, key.id) })
}

// confirm takes the shared slots of a local grant. It returns the lease
// when they were taken (or the store is away and the grant fits this
// replica's share), or a waiter to queue again in the attempt's original
// place when another replica holds them, or an error.
func (s *Scheduler) confirm(ctx context.Context, req Request, l *Lease, first time.Time, place waitPlace) (*Lease, *waiter, error) {
	var slots [MaxDimensions]SharedSlot
	n := int(l.n)
	for i, g := range l.gates[:n] {
		slots[i] = SharedSlot{Gate: g.key.gate, ID: g.key.id, Limit: g.want}
	}
	h, full, err := s.shared.Take(ctx, slots[:n])
	unavailable := errors.Is(err, ErrSharedUnavailable)
	if err != nil && !unavailable {
		s.reclaim(l)
		return nil, nil, fmt.Errorf("gateway admission shared slots: %w", err)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	gs := l.gates[:n]
	if h != 0 {
		if !unavailable || fits(gs) {
			l.shared = h
			s.uncap(gs)
			return l, nil, nil
		}
		// Taken while the store was away, but the share (set by the store
		// before it returned) has no room for it: queue again.
		s.shared.Give(h)
	} else if full >= 0 && full < n {
		s.markSharedFull(gs[full])
		gs[full].sharedCap = 0
	}
	// Give the local slots back without letting the grant count twice.
	s.count(gs, func(g *gate) { g.refused++ })
	s.release(l, true, s.clock.Now())
	if s.closed {
		s.global.rejected++
		return nil, nil, ErrClosed
	}
	// The release may have left a gate idle, and an idle gate may be
	// discarded: look the gates up again rather than keep stale pointers.
	var arr [MaxDimensions]*gate
	for i, d := range req.Dimensions {
		arr[i] = s.resolve(d)
	}
	gs = arr[:n]
	now := s.clock.Now()
	if s.resized {
		s.resized = false
		s.dispatch(now)
	}
	left := req.Budget - now.Sub(first)
	if left <= 0 {
		blamed := s.blockingGate(gs)
		s.count(gs, func(g *gate) { g.timedOut++ })
		s.settleAll(gs)
		return nil, nil, &TimeoutError{Gate: blamed, Budget: req.Budget}
	}
	if s.pending >= s.maxPending {
		s.count(gs, func(g *gate) { g.rejected++ })
		s.settleAll(gs)
		return nil, nil, ErrQueueFull
	}
	return nil, s.requeue(req, &arr, place, left, now), nil
}

// uncap lifts the one-at-a-time cap of woken gates after a confirmed
// grant: the store has room again, so the next waiters may try.
func (s *Scheduler) uncap(gs []*gate) {
	lifted := false
	for _, g := range gs {
		if g.sharedCap > 0 {
			g.sharedCap = 0
			s.sync(g)
			lifted = true
		}
	}
	if lifted {
		s.dispatch(s.clock.Now())
	}
}

// fits reports that every gate of a grant is within its limit, the grant
// included.
func fits(gs []*gate) bool {
	for _, g := range gs {
		if g.active > g.limit {
			return false
		}
	}
	return true
}
