package admission

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// GateStats describes one gate. Counters are cumulative since the gate was
// created; an idle gate keeps them until it is discarded (only the 64 most
// recently idle dimension gates are kept).
type GateStats struct {
	Gate       string `json:"gate"`
	ID         string `json:"id,omitempty"`
	Label      string `json:"label,omitempty"`
	Limit      int    `json:"limit"`
	Active     int    `json:"active"`
	Pending    int    `json:"pending"`
	Admitted   uint64 `json:"admitted"`
	Released   uint64 `json:"released"`
	TimedOut   uint64 `json:"timed_out"`
	Cancelled  uint64 `json:"cancelled"`
	Rejected   uint64 `json:"rejected"`
	Promotions uint64 `json:"aging_promotions"`
	Peak       int    `json:"peak_active"`
	// Reclaimed counts grants that raced with the caller's context ending:
	// the slot was given back at once. They are included in Admitted,
	// Released and Cancelled (see the package doc for the invariant).
	Reclaimed uint64 `json:"reclaimed"`
	// SharedRefused counts grants the shared store refused because other
	// replicas held every slot; the attempt went back to its place in the
	// queue. They are included in Admitted and Released.
	SharedRefused    uint64  `json:"shared_refused"`
	WaitTotalSeconds float64 `json:"wait_total_seconds"`
	WaitAvgSeconds   float64 `json:"wait_avg_seconds"`
	WaitMaxSeconds   float64 `json:"wait_max_seconds"`
	// WaitP50Seconds and WaitP99Seconds are over the gate's last 128
	// grants (nearest rank); 0 before any grant.
	WaitP50Seconds float64 `json:"wait_p50_seconds"`
	WaitP99Seconds float64 `json:"wait_p99_seconds"`
}

// Snapshot is a consistent view of every gate at one moment.
type Snapshot struct {
	Global  GateStats   `json:"global"`
	Targets []GateStats `json:"targets"` // every dimension gate, sorted by Gate, Label, ID
	Pending int         `json:"pending"` // queued attempts overall
	Closed  bool        `json:"closed"`
}

// Stats returns a snapshot. Promotions include those of attempts still
// queued (computed at this moment), which costs a walk over the queue under
// the scheduler's lock, stalling every Acquire and Release meanwhile; it is
// meant for the admin endpoint. Gauges scraped often read Usage.
func (s *Scheduler) Stats() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()

	// Aging is lazy, so promotions of still-queued attempts exist only as a
	// function of the clock; add them here so the numbers move while the
	// attempts wait, not only when they leave.
	live := make(map[*gate]uint64)
	var liveGlobal uint64
	for _, ln := range s.lanes {
		var sum uint64
		for c := range ln.queues {
			for w := ln.queues[c].head; w != nil; w = w.next {
				sum += uint64(w.base - s.effective(w, now))
			}
		}
		if sum == 0 {
			continue
		}
		liveGlobal += sum
		for _, g := range ln.key.g[:ln.key.n] {
			live[g] += sum
		}
	}

	snap := Snapshot{
		Global:  gateStats(&s.global, liveGlobal),
		Targets: make([]GateStats, 0, len(s.gates)),
		Pending: s.pending,
		Closed:  s.closed,
	}
	for _, g := range s.gates {
		snap.Targets = append(snap.Targets, gateStats(g, live[g]))
	}
	slices.SortFunc(snap.Targets, func(a, b GateStats) int {
		return cmp.Or(cmp.Compare(a.Gate, b.Gate), cmp.Compare(a.Label, b.Label), cmp.Compare(a.ID, b.ID))
	})
	return snap
}

func gateStats(g *gate, livePromotions uint64) GateStats {
	st := GateStats{
		Gate:             g.key.gate,
		ID:               g.key.id,
		Label:            g.label,
		Limit:            g.limit,
		Active:           g.active,
		Pending:          g.pending,
		Admitted:         g.admitted,
		Released:         g.released,
		TimedOut:         g.timedOut,
		Cancelled:        g.cancelled,
		Rejected:         g.rejected,
		Promotions:       g.promotions + livePromotions,
		Peak:             g.peak,
		Reclaimed:        g.reclaimed,
		SharedRefused:    g.refused,
		WaitTotalSeconds: g.waitTotal.Seconds(),
		WaitMaxSeconds:   g.waitMax.Seconds(),
	}
	if g.admitted > 0 {
		st.WaitAvgSeconds = g.waitTotal.Seconds() / float64(g.admitted)
	}
	if n := min(g.recentN, recentWaits); n > 0 {
		w := slices.Clone(g.recent[:n])
		slices.Sort(w)
		st.WaitP50Seconds = nearestRank(w, 0.50).Seconds()
		st.WaitP99Seconds = nearestRank(w, 0.99).Seconds()
	}
	return st
}

// Idle reports that nothing is held or queued anywhere.
func (s *Scheduler) Idle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending == 0 && s.leases == 0
}

// GateUsage is the occupancy of one gate: what gauges scraped often show.
type GateUsage struct {
	Gate, Label            string
	Limit, Active, Pending int
}

// Usage is the occupancy of every gate at one moment.
type Usage struct {
	Global  GateUsage
	Targets []GateUsage // every dimension gate, in no particular order
	Pending int         // queued attempts overall
}

// Usage reads the occupancy of every gate. Unlike Stats it copies a few
// fields per gate and looks at nothing queued, so the lock it takes is held
// for O(gates) whatever the queue holds. Targets is appended to buf[:0]: a
// caller that passes back the previous Usage's Targets allocates nothing
// under the lock once the slice has grown.
func (s *Scheduler) Usage(buf []GateUsage) Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := Usage{Global: gateUsage(&s.global), Targets: buf[:0], Pending: s.pending}
	for _, g := range s.gates {
		u.Targets = append(u.Targets, gateUsage(g))
	}
	return u
}

func gateUsage(g *gate) GateUsage {
	return GateUsage{Gate: g.key.gate, Label: g.label, Limit: g.limit, Active: g.active, Pending: g.pending}
}

// nearestRank is the q-quantile of sorted w by nearest rank.
func nearestRank(w []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(w)))) - 1
	return w[max(0, min(i, len(w)-1))]
}
