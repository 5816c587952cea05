package admission

import (
	"fmt"
	"testing"
	"time"
)

// check verifies the scheduler's internal invariants; tests call it between
// and during operations to catch index corruption where it happens rather
// than as a wrong grant much later.
func (s *Scheduler) check() error {
	s.mu.Lock()
	defer s.mu.Unlock()

	if s.global.active > s.global.limit {
		return fmt.Errorf("global active %d over limit %d", s.global.active, s.global.limit)
	}
	for c := range s.runnable {
		h := &s.runnable[c]
		for i, ln := range h.items {
			if ln.heapIdx[c] != i {
				return fmt.Errorf("class %d: heap position %d, lane thinks %d", c, i, ln.heapIdx[c])
			}
			if ln.blocked != 0 || ln.queues[c].head == nil {
				return fmt.Errorf("class %d: lane in heap with blocked %d / empty queue", c, ln.blocked)
			}
			if i > 0 && h.key((i-1)/2) > h.key(i) {
				return fmt.Errorf("class %d: heap order broken at %d", c, i)
			}
		}
		// Dispatch invariant: global room means nothing queued can run.
		if !s.global.full() && len(h.items) > 0 {
			return fmt.Errorf("global has room (%d/%d) but class %d has runnable lanes", s.global.active, s.global.limit, c)
		}
	}

	total := 0
	pendingOf := map[*gate]int{}
	for k, ln := range s.lanes {
		if ln.key != k {
			return fmt.Errorf("lane filed under another key")
		}
		blocked := 0
		for i, g := range ln.key.g[:ln.key.n] {
			if g.full() {
				blocked++
			}
			if ln.gateIdx[i] >= len(g.lanes) || g.lanes[ln.gateIdx[i]] != ln {
				return fmt.Errorf("gate %v does not list lane at %d", g.key, ln.gateIdx[i])
			}
			if s.gates[g.key] != g {
				return fmt.Errorf("lane uses gate %v missing from the gate map", g.key)
			}
		}
		if blocked != ln.blocked {
			return fmt.Errorf("lane blocked %d, full gates %d", ln.blocked, blocked)
		}
		size := 0
		for c := range ln.queues {
			inHeap := ln.heapIdx[c] >= 0
			if want := ln.blocked == 0 && ln.queues[c].head != nil; inHeap != want {
				return fmt.Errorf("lane class %d in heap %v, want %v", c, inHeap, want)
			}
			var prev *waiter
			for w := ln.queues[c].head; w != nil; w = w.next {
				if w.lane != ln || w.state != stateQueued || int(w.base) != c || w.prev != prev {
					return fmt.Errorf("waiter %d misfiled", w.seq)
				}
				if prev != nil && (w.seq <= prev.seq || w.enq.Before(prev.enq)) {
					return fmt.Errorf("FIFO order broken at waiter %d", w.seq)
				}
				prev = w
				size++
			}
			if ln.queues[c].tail != prev {
				return fmt.Errorf("lane class %d tail wrong", c)
			}
		}
		if size == 0 || size != ln.size {
			return fmt.Errorf("lane size %d, counted %d", ln.size, size)
		}
		total += size
		for _, g := range ln.key.g[:ln.key.n] {
			pendingOf[g] += size
		}
	}
	if total != s.pending || s.global.pending != s.pending {
		return fmt.Errorf("pending %d (global %d), counted %d", s.pending, s.global.pending, total)
	}

	idle := 0
	for k, g := range s.gates {
		if g.key != k {
			return fmt.Errorf("gate filed under another key")
		}
		if g.active > g.limit || g.active < 0 {
			return fmt.Errorf("gate %v active %d limit %d", k, g.active, g.limit)
		}
		if g.pending != pendingOf[g] {
			return fmt.Errorf("gate %v pending %d, counted %d", k, g.pending, pendingOf[g])
		}
		rest := g.active == 0 && g.pending == 0
		if rest != g.idle {
			return fmt.Errorf("gate %v idle %v with active %d pending %d", k, g.idle, g.active, g.pending)
		}
		if g.idle {
			idle++
		}
	}
	n := 0
	for g := s.idleHead; g != nil; g = g.idleNext {
		n++
	}
	if n != idle || n != s.idleCount || n > idleGatesKept {
		return fmt.Errorf("idle list %d, idle gates %d, count %d, keep %d", n, idle, s.idleCount, idleGatesKept)
	}
	return nil
}

// checker runs s.check every interval until stop is closed.
func checker(t *testing.T, s *Scheduler, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			if err := s.check(); err != nil {
				t.Errorf("invariant: %v", err)
				return
			}
		}
	}
}
