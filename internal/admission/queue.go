package admission

import (
	"container/heap"
	"time"
)

// waitState is where a queued attempt is. Only stateQueued ever changes, and
// only under Scheduler.mu, so whichever of grant, expiry, cancellation or
// Close gets the lock first decides the outcome.
type waitState uint8

const (
	stateQueued waitState = iota
	stateGranted
	stateTimedOut
	stateCancelled
	stateClosed
)

// waiter is one queued attempt.
type waiter struct {
	seq    uint64
	enq    time.Time
	base   Priority
	budget time.Duration
	n      int
	gates  [MaxDimensions]*gate // request order: the lease and TimeoutError use it

	lane       *lane
	prev, next *waiter

	timer Timer
	ready chan struct{} // closed once the state is final

	// Final outcome, written before ready is closed.
	state   waitState
	lease   *Lease
	timeout *TimeoutError
}

// laneKey is the gate set of a lane in canonical (creation serial) order.
// It is an array of pointers, so it is a map key without allocation.
type laneKey struct {
	n int
	g [MaxDimensions]*gate
}

// lane holds the queued attempts that ask for exactly the same gates; they
// are runnable or blocked together.
type lane struct {
	key     laneKey
	gateIdx [MaxDimensions]int // position of this lane in key.g[i].lanes
	queues  [numPriorities]fifo
	heapIdx [numPriorities]int // position in Scheduler.runnable[class], -1 when absent
	blocked int                // how many of its gates are full
	size    int
}

type fifo struct{ head, tail *waiter }

// effective is the class of a queued attempt at now. Computing it lazily is
// exact (no timer has to run at each interval) and keeps FIFO order within
// each base class: all attempts of one base class age at the same rate.
func (s *Scheduler) effective(w *waiter, now time.Time) Priority {
	if w.base <= Interactive {
		return w.base
	}
	steps := now.Sub(w.enq) / s.aging
	if steps <= 0 {
		return w.base
	}
	if steps >= time.Duration(w.base-Interactive) {
		return Interactive
	}
	return w.base - Priority(steps)
}

// laneFor finds or creates the lane of a gate set.
func (s *Scheduler) laneFor(gs []*gate) *lane {
	var k laneKey
	k.n = copy(k.g[:], gs)
	// Insertion sort by serial: at most seven entries.
	for i := 1; i < k.n; i++ {
		for j := i; j > 0 && k.g[j].serial < k.g[j-1].serial; j-- {
			k.g[j], k.g[j-1] = k.g[j-1], k.g[j]
		}
	}
	if ln := s.lanes[k]; ln != nil {
		return ln
	}
	ln := &lane{key: k}
	for c := range ln.heapIdx {
		ln.heapIdx[c] = -1
	}
	for i, g := range k.g[:k.n] {
		ln.gateIdx[i] = len(g.lanes)
		g.lanes = append(g.lanes, ln)
		if g.blocking {
			ln.blocked++
		}
	}
	s.lanes[k] = ln
	return ln
}

// dropLane forgets an empty lane.
func (s *Scheduler) dropLane(ln *lane) {
	for i, g := range ln.key.g[:ln.key.n] {
		at := ln.gateIdx[i]
		last := len(g.lanes) - 1
		if at != last {
			moved := g.lanes[last]
			g.lanes[at] = moved
			for j, mg := range moved.key.g[:moved.key.n] {
				if mg == g {
					moved.gateIdx[j] = at
					break
				}
			}
		}
		g.lanes[last] = nil
		g.lanes = g.lanes[:last]
	}
	delete(s.lanes, ln.key)
}

// push puts w in its lane in sequence order: at the back for a new attempt
// (the loop stops at once), or back at its old place for an attempt the
// shared store sent back.
func (s *Scheduler) push(ln *lane, w *waiter) {
	w.lane = ln
	ln.size++
	q := &ln.queues[w.base]
	if q.tail == nil {
		q.head, q.tail = w, w
		if ln.blocked == 0 {
			heap.Push(&s.runnable[w.base], ln)
		}
		return
	}
	at := q.tail
	for at != nil && at.seq > w.seq {
		at = at.prev
	}
	if at == nil {
		w.next = q.head
		q.head.prev = w
		q.head = w
		if i := ln.heapIdx[w.base]; i >= 0 {
			heap.Fix(&s.runnable[w.base], i)
		}
		return
	}
	w.prev, w.next = at, at.next
	if at.next != nil {
		at.next.prev = w
	} else {
		q.tail = w
	}
	at.next = w
}

// unlink removes w from its lane wherever it is (cancellation and expiry
// take attempts from the middle).
func (s *Scheduler) unlink(w *waiter) {
	ln := w.lane
	q := &ln.queues[w.base]
	wasHead := q.head == w
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		q.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		q.tail = w.prev
	}
	w.prev, w.next, w.lane = nil, nil, nil
	ln.size--
	if i := ln.heapIdx[w.base]; i >= 0 && wasHead {
		if q.head == nil {
			heap.Remove(&s.runnable[w.base], i)
		} else {
			heap.Fix(&s.runnable[w.base], i)
		}
	}
	if ln.size == 0 {
		s.dropLane(ln)
	}
}

// blockLanes runs when g just became full.
func (s *Scheduler) blockLanes(g *gate) {
	for _, ln := range g.lanes {
		ln.blocked++
		if ln.blocked == 1 {
			for c := range ln.heapIdx {
				if i := ln.heapIdx[c]; i >= 0 {
					heap.Remove(&s.runnable[c], i)
				}
			}
		}
	}
}

// unblockLanes runs when g just got room again.
func (s *Scheduler) unblockLanes(g *gate) {
	for _, ln := range g.lanes {
		ln.blocked--
		if ln.blocked == 0 {
			for c := range ln.queues {
				if ln.queues[c].head != nil {
					heap.Push(&s.runnable[c], ln)
				}
			}
		}
	}
}

// best is the attempt to serve next among the runnable ones: the lowest
// (effective class, sequence) over the tops of the per-class heaps.
func (s *Scheduler) best(now time.Time) *waiter {
	var (
		win    *waiter
		winEff Priority
	)
	for c := range s.runnable {
		h := &s.runnable[c]
		if len(h.items) == 0 {
			continue
		}
		w := h.items[0].queues[c].head
		e := s.effective(w, now)
		if win == nil || e < winEff || (e == winEff && w.seq < win.seq) {
			win, winEff = w, e
		}
	}
	return win
}

// dispatch grants queued attempts while the global gate has room. Invariant
// kept on return: if the global gate has room, no queued attempt could run.
func (s *Scheduler) dispatch(now time.Time) {
	for s.pending > 0 && !s.global.full() {
		w := s.best(now)
		if w == nil {
			return
		}
		s.grantQueued(w, now)
	}
}

// laneHeap is a container/heap of runnable lanes that have attempts of one
// base class, keyed by the sequence number of the lane's oldest such attempt.
// Swap keeps each lane's position (lane.heapIdx), so a lane can be fixed or
// removed in place when its head changes.
type laneHeap struct {
	class Priority
	items []*lane
}

func (h *laneHeap) key(i int) uint64 { return h.items[i].queues[h.class].head.seq }

func (h *laneHeap) Len() int           { return len(h.items) }
func (h *laneHeap) Less(i, j int) bool { return h.key(i) < h.key(j) }

func (h *laneHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].heapIdx[h.class] = i
	h.items[j].heapIdx[h.class] = j
}

func (h *laneHeap) Push(x any) {
	ln := x.(*lane)
	ln.heapIdx[h.class] = len(h.items)
	h.items = append(h.items, ln)
}

func (h *laneHeap) Pop() any {
	last := len(h.items) - 1
	ln := h.items[last]
	h.items[last] = nil
	h.items = h.items[:last]
	ln.heapIdx[h.class] = -1
	return ln
}
