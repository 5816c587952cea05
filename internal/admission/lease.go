package admission

import (
	"sync/atomic"
	"time"
)

// Lease is the set of slots granted to one attempt. Both release methods are
// idempotent and safe from any goroutine, so callers can release on every
// exit path (a deferred Release after an explicit one is harmless). Methods
// on a nil *Lease do nothing.
type Lease struct {
	s         *Scheduler
	gates     [MaxDimensions]*gate
	n         uint8
	grantedAt time.Time
	heldNanos atomic.Int64 // how long the global slot was held, set on its release
	shared    SharedHandle // the slots taken in the shared store; 0 when none
	place     waitPlace    // a fast-path grant's place in the queue, should the store refuse it

	// Guarded by s.mu.
	holdsGlobal bool
	holdsRest   bool
}

// ReleaseGlobal gives back only the global execution slot; the dimension
// slots stay held. Hold modes use it to free execution capacity while the
// provider keeps generating on the target.
func (l *Lease) ReleaseGlobal() {
	if l == nil || l.s == nil {
		return
	}
	s := l.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.holdsGlobal {
		s.release(l, false, s.clock.Now())
	}
}

// Release gives back every slot the lease still holds.
func (l *Lease) Release() {
	if l == nil || l.s == nil {
		return
	}
	s := l.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.holdsGlobal || l.holdsRest {
		s.release(l, true, s.clock.Now())
	}
}

// GlobalHeld is how long the global slot was held; it is zero until
// ReleaseGlobal or Release has given the slot back.
func (l *Lease) GlobalHeld() time.Duration {
	if l == nil {
		return 0
	}
	return time.Duration(l.heldNanos.Load())
}

// release gives back the global slot and, when all is set, the dimension
// slots, then hands the freed room to queued work. The caller holds s.mu.
func (s *Scheduler) release(l *Lease, all bool, now time.Time) {
	if l.holdsGlobal {
		l.holdsGlobal = false
		s.giveBack(&s.global)
		l.heldNanos.Store(int64(max(now.Sub(l.grantedAt), 0)))
	}
	gs := l.gates[:l.n]
	if all && l.holdsRest {
		l.holdsRest = false
		for _, g := range gs {
			s.giveBack(g)
		}
		if l.shared != 0 {
			s.shared.Give(l.shared)
			l.shared = 0
		}
	}
	if !l.holdsGlobal && !l.holdsRest {
		s.leases--
		if s.closed && s.leases == 0 {
			close(s.drained)
		}
	}
	s.dispatch(now)
	// After dispatch: a gate that queued work just took over is not idle.
	s.settleAll(gs)
}
