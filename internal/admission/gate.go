package admission

import "time"

const (
	// GlobalGate is the gate every attempt passes: the process-wide limit on
	// concurrent upstream attempts.
	GlobalGate = "gateway_upstream_execution"
	// TargetGate is the gate of one target (provider endpoint + key).
	TargetGate = "gateway_upstream_target"
	// ClientGate is the gate of one client (its max_concurrency).
	ClientGate = "gateway_client"
)

// recentWaits is how many grants' waits a gate keeps for percentiles.
const recentWaits = 128

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

	// want is the limit the dimensions ask for (max_concurrency); limit is
	// the one enforced here: want, or this replica's share of it while the
	// shared store is unreachable.
	want    int
	version uint64 // of the newest dimension seen (Dimension.Version)
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
	refused    uint64 // grants the shared store refused (another replica holds the slots)
	promotions uint64
	waitTotal  time.Duration
	waitMax    time.Duration
	// recent holds the waits of the last len(recent) grants, for the
	// percentiles of snapshots (the console's wait p50/p99).
	recent  [recentWaits]time.Duration
	recentN uint64

	// lanes are the queued lanes that include this gate; they are blocked
	// while the gate is full. blocking says whether they are counted as
	// blocked by it now; sync keeps it equal to full().
	lanes    []*lane
	blocking bool

	// sharedFull is set when the shared store refused a slot of this gate:
	// every slot is held somewhere, so nothing local may start until a slot
	// is freed (a wake) or the retry timer fires.
	sharedFull bool
	retry      Timer
	// sharedCap, when not 0, admits only up to that many active slots: a
	// woken gate lets its best waiter alone try the store, so waiters keep
	// their order and a wake does not send every waiter to Redis at once.
	// The first confirmed grant lifts it.
	sharedCap int

	// Intrusive idle list links: an idle gate keeps only its counters, and
	// the list bounds how many of those are kept.
	idle               bool
	idlePrev, idleNext *gate
}

func (g *gate) full() bool {
	return g.active >= g.limit || g.sharedFull || (g.sharedCap > 0 && g.active >= g.sharedCap)
}

// sync blocks or unblocks g's lanes when whether g is full changed. Every
// change of active, limit or sharedFull goes through it, so lanes' blocked
// counts never drift, however the change came about.
func (s *Scheduler) sync(g *gate) {
	if f := g.full(); f != g.blocking {
		g.blocking = f
		if f {
			s.blockLanes(g)
		} else {
			s.unblockLanes(g)
		}
	}
}

// admit takes one slot and records the wait of the grant.
func (s *Scheduler) admit(g *gate, waited time.Duration) {
	g.active++
	g.admitted++
	g.waitTotal += waited
	g.waitMax = max(g.waitMax, waited)
	g.recent[g.recentN%recentWaits] = waited
	g.recentN++
	g.peak = max(g.peak, g.active)
	s.sync(g)
}

// giveBack returns one slot; the lanes waiting on g may become runnable.
func (s *Scheduler) giveBack(g *gate) {
	g.active--
	g.released++
	s.sync(g)
}

// resize changes what g enforces in place. A smaller limit takes nothing
// back: it admits nothing new until active is under it. The caller
// dispatches when the gate may have got room.
func (s *Scheduler) resize(g *gate, want int) {
	g.want = want
	g.limit = s.localLimit(want)
	s.sync(g)
}

// resolve finds or creates the gate of a dimension. A gate that was idle
// leaves the idle list and adopts the dimension's label. A dimension whose
// limit differs from the gate's resizes it in place: a reloaded
// max_concurrency applies to the gate with its active slots and queue, and
// the last request to ask wins.
func (s *Scheduler) resolve(d Dimension) *gate {
	k := gateKey{gate: d.Gate, id: d.ID}
	g := s.gates[k]
	if g == nil {
		s.serial++
		g = &gate{key: k, label: d.Label, want: d.Limit, version: d.Version, limit: s.localLimit(d.Limit), serial: s.serial}
		s.gates[k] = g
		return g
	}
	if g.idle {
		s.unlinkIdle(g)
		g.label = d.Label
	}
	if d.Version < g.version {
		return g // planned from routes older than the gate's limit
	}
	g.version = d.Version
	if g.want != d.Limit {
		s.resize(g, d.Limit)
		s.resized = true
	}
	return g
}

// settle puts g on the idle list when nothing holds or waits on it, and
// discards the oldest idle gates beyond idleGatesKept, so identities that
// come and go cannot grow memory without bound.
func (s *Scheduler) settle(g *gate) {
	if g.idle || g.active != 0 || g.pending != 0 || g.sharedFull {
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
