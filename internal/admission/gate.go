package admission

import "time"

const (
	// GlobalGate is the gate every attempt passes: the process-wide limit on
	// concurrent upstream attempts.
	GlobalGate = "gateway_upstream_execution"
	// TargetGate is the gate of one target (provider endpoint + key).
	TargetGate = "gateway_upstream_target"
)

// gateKey identifies one gate instance. A struct of strings is a map key
// that can be looked up without allocating, which the fast path relies on.
type gateKey struct {
	gate, id string
}

// gate is one counting semaphore plus its counters. All fields are guarded
// by Scheduler.mu.
type gate struct {
	key    gateKey
	label  string
	serial uint64 // creation order; gives lanes a canonical gate order

	limit   int
	active  int
	pending int
	peak    int

	admitted   uint64
	released   uint64
	timedOut   uint64
	cancelled  uint64
	rejected   uint64
	reclaimed  uint64
	promotions uint64
	waitTotal  time.Duration
	waitMax    time.Duration

	// lanes are the queued lanes that include this gate; they are blocked
	// while the gate is full.
	lanes []*lane

	// Intrusive idle list links: an idle gate keeps only its counters, and
	// the list bounds how many of those are kept.
	idle               bool
	idlePrev, idleNext *gate
}

func (g *gate) full() bool { return g.active >= g.limit }

// admit takes one slot and records the wait of the grant.
func (s *Scheduler) admit(g *gate, waited time.Duration) {
	g.active++
	g.admitted++
	g.waitTotal += waited
	g.waitMax = max(g.waitMax, waited)
	g.peak = max(g.peak, g.active)
	if g.active == g.limit {
		s.blockLanes(g)
	}
}

// giveBack returns one slot; the lanes waiting on g may become runnable.
func (s *Scheduler) giveBack(g *gate) {
	g.active--
	g.released++
	if g.active == g.limit-1 {
		s.unblockLanes(g)
	}
}

// resolve finds or creates the gate of a dimension. A gate that was idle
// leaves the idle list and adopts the dimension's current limit and label:
// nothing holds or waits on it, so the change cannot break an invariant, and
// a changed max_concurrency takes effect without a restart.
func (s *Scheduler) resolve(d Dimension) *gate {
	k := gateKey{gate: d.Gate, id: d.ID}
	g := s.gates[k]
	if g == nil {
		s.serial++
		g = &gate{key: k, label: d.Label, limit: d.Limit, serial: s.serial}
		s.gates[k] = g
		return g
	}
	if g.idle {
		s.unlinkIdle(g)
		g.limit = d.Limit
		g.label = d.Label
	}
	return g
}

// settle puts g on the idle list when nothing holds or waits on it, and
// discards the oldest idle gates beyond idleGatesKept, so identities that
// come and go cannot grow memory without bound.
func (s *Scheduler) settle(g *gate) {
	if g.idle || g.active != 0 || g.pending != 0 {
		return
	}
	g.idle = true
	g.idlePrev = s.idleTail
	g.idleNext = nil
	if s.idleTail != nil {
		s.idleTail.idleNext = g
	} else {
		s.idleHead = g
	}
	s.idleTail = g
	s.idleCount++
	for s.idleCount > idleGatesKept {
		old := s.idleHead
		s.unlinkIdle(old)
		delete(s.gates, old.key)
	}
}

func (s *Scheduler) settleAll(gs []*gate) {
	for _, g := range gs {
		s.settle(g)
	}
}

func (s *Scheduler) unlinkIdle(g *gate) {
	if g.idlePrev != nil {
		g.idlePrev.idleNext = g.idleNext
	} else {
		s.idleHead = g.idleNext
	}
	if g.idleNext != nil {
		g.idleNext.idlePrev = g.idlePrev
	} else {
		s.idleTail = g.idlePrev
	}
	g.idlePrev, g.idleNext = nil, nil
	g.idle = false
	s.idleCount--
}
