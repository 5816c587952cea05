package admission

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// model is the admission rule written the obvious way: a list of queued
// attempts, and on each release a scan for the best runnable one. The
// scheduler's indexed queue must make exactly the same decisions.
type model struct {
	aging      time.Duration
	maxPending int
	limit      map[gateKey]int
	active     map[gateKey]int
	queued     []*modelWaiter // in sequence order
	promotions uint64
}

type modelWaiter struct {
	w     *waiter
	base  Priority
	enq   time.Time
	dead  time.Time
	gates []gateKey // request order, without the global gate
}

var globalKey = gateKey{gate: GlobalGate}

func (m *model) effective(mw *modelWaiter, now time.Time) Priority {
	if mw.base <= Interactive {
		return mw.base
	}
	steps := int(now.Sub(mw.enq) / m.aging)
	return max(Interactive, mw.base-Priority(min(steps, int(mw.base))))
}

func (m *model) full(k gateKey) bool { return m.active[k] >= m.limit[k] }

func (m *model) runnable(gates []gateKey) bool {
	if m.full(globalKey) {
		return false
	}
	for _, k := range gates {
		if m.full(k) {
			return false
		}
	}
	return true
}

func (m *model) blame(gates []gateKey) string {
	for _, k := range gates {
		if m.full(k) {
			return k.gate
		}
	}
	return GlobalGate
}

func (m *model) take(gates []gateKey, d int) {
	m.active[globalKey] += d
	for _, k := range gates {
		m.active[k] += d
	}
}

func (m *model) remove(mw *modelWaiter, now time.Time) {
	m.promotions += uint64(mw.base - m.effective(mw, now))
	m.queued = slices.DeleteFunc(m.queued, func(x *modelWaiter) bool { return x == mw })
}

// dispatch returns the waiters the rule grants now, in grant order.
func (m *model) dispatch(now time.Time) []*modelWaiter {
	var granted []*modelWaiter
	for {
		var best *modelWaiter
		for _, mw := range m.queued {
			if !m.runnable(mw.gates) {
				continue
			}
			if best == nil || m.effective(mw, now) < m.effective(best, now) {
				best = mw // queued is in sequence order: ties keep the older
			}
		}
		if best == nil {
			return granted
		}
		m.remove(best, now)
		m.take(best.gates, 1)
		granted = append(granted, best)
	}
}

type modelLease struct {
	l      *Lease
	gates  []gateKey
	global bool
}

// TestSchedulerMatchesModel drives the scheduler and the model with the same
// random operations on a fake clock and compares every decision: grant or
// queue or fail, who is granted on each release, who expires and the gate
// its error names, and the promotion count.
func TestSchedulerMatchesModel(t *testing.T) {
	for seed := range uint64(12) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { runModel(t, seed, 1500) })
	}
}

func runModel(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 7))
	clk := newFakeClock()
	const aging = 10 * time.Second
	cfg := Config{GlobalLimit: 1 + rng.IntN(4), MaxPending: 30, AgingInterval: aging, Clock: clk}
	s := New(cfg)
	m := &model{aging: aging, maxPending: cfg.MaxPending, limit: map[gateKey]int{globalKey: cfg.GlobalLimit}, active: map[gateKey]int{}}
	var dims []Dimension
	for i, limit := range []int{1, 2, 1, 3, 2} {
		dims = append(dims, target(fmt.Sprint("t", i), limit))
	}
	var clients []Dimension
	for i, limit := range []int{2, 3} {
		clients = append(clients, Dimension{Gate: "gateway_client", ID: fmt.Sprint("c", i), Label: "app", Limit: limit})
	}
	for _, d := range append(slices.Clone(dims), clients...) {
		m.limit[gateKey{d.Gate, d.ID}] = d.Limit
	}
	var held []*modelLease

	settle := func(granted []*modelWaiter, what string) {
		t.Helper()
		for _, mw := range granted {
			if mw.w.state != stateGranted {
				t.Fatalf("%s: model grants seq %d, scheduler state %d", what, mw.w.seq, mw.w.state)
			}
			held = append(held, &modelLease{l: mw.w.lease, gates: mw.gates, global: true})
		}
		for _, mw := range m.queued {
			if mw.w.state != stateQueued {
				t.Fatalf("%s: scheduler moved seq %d to state %d, model keeps it queued", what, mw.w.seq, mw.w.state)
			}
		}
	}

	for step := range steps {
		now := clk.Now()
		switch op := rng.IntN(20); {
		case op < 9: // acquire
			r := Request{Priority: Priority(rng.IntN(numPriorities)), Budget: time.Duration(1+rng.IntN(30)) * time.Second}
			if rng.IntN(10) == 0 {
				r.Budget = 0
			}
			switch rng.IntN(10) {
			case 0, 1:
			case 2, 3, 4, 5, 6:
				r.Dimensions = []Dimension{dims[rng.IntN(len(dims))]}
			default:
				r.Dimensions = []Dimension{dims[rng.IntN(len(dims))], clients[rng.IntN(len(clients))]}
				if rng.IntN(2) == 0 {
					slices.Reverse(r.Dimensions)
				}
			}
			var gates []gateKey
			for _, d := range r.Dimensions {
				gates = append(gates, gateKey{d.Gate, d.ID})
			}
			l, w, err := s.try(context.Background(), r)
			switch {
			case m.runnable(gates):
				if l == nil {
					t.Fatalf("step %d: model grants at once, scheduler: waiter %v err %v", step, w != nil, err)
				}
				m.take(gates, 1)
				held = append(held, &modelLease{l: l, gates: gates, global: true})
			case r.Budget <= 0:
				var te *TimeoutError
				if !errors.As(err, &te) || te.Gate != m.blame(gates) {
					t.Fatalf("step %d: zero budget: err %v, want timeout on %s", step, err, m.blame(gates))
				}
			case len(m.queued) >= m.maxPending:
				if !errors.Is(err, ErrQueueFull) {
					t.Fatalf("step %d: err %v, want ErrQueueFull", step, err)
				}
			default:
				if w == nil {
					t.Fatalf("step %d: model queues, scheduler: lease %v err %v", step, l != nil, err)
				}
				m.queued = append(m.queued, &modelWaiter{w: w, base: r.Priority, enq: now, dead: now.Add(r.Budget), gates: gates})
			}
		case op < 14: // release
			if len(held) == 0 {
				continue
			}
			i := rng.IntN(len(held))
			h := held[i]
			if h.global && rng.IntN(3) == 0 {
				h.l.ReleaseGlobal()
				h.global = false
				m.active[globalKey]--
			} else {
				h.l.Release()
				if h.global {
					m.active[globalKey]--
				}
				m.take(h.gates, -1)
				m.active[globalKey]++ // take also touched the global gate
				held = slices.Delete(held, i, i+1)
			}
			settle(m.dispatch(now), fmt.Sprintf("step %d release", step))
		case op < 16: // cancel a queued attempt
			if len(m.queued) == 0 {
				continue
			}
			mw := m.queued[rng.IntN(len(m.queued))]
			s.mu.Lock()
			s.finish(mw.w, stateCancelled, s.clock.Now())
			s.mu.Unlock()
			m.remove(mw, now)
		default: // time passes: aging and expiry
			d := time.Duration(rng.IntN(int(2 * aging)))
			later := now.Add(d)
			var expired []*modelWaiter
			for _, mw := range m.queued {
				if !mw.dead.After(later) {
					expired = append(expired, mw)
				}
			}
			clk.Advance(d)
			for _, mw := range expired {
				want := m.blame(mw.gates)
				if mw.w.state != stateTimedOut || mw.w.timeout.Gate != want {
					t.Fatalf("step %d: seq %d state %d timeout %v, want expiry on %s", step, mw.w.seq, mw.w.state, mw.w.timeout, want)
				}
				m.remove(mw, later)
			}
			settle(nil, fmt.Sprintf("step %d advance", step))
		}

		if err := s.check(); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		snap := s.Stats()
		live := uint64(0)
		for _, mw := range m.queued {
			live += uint64(mw.base - m.effective(mw, clk.Now()))
		}
		if snap.Global.Active != m.active[globalKey] || snap.Pending != len(m.queued) || snap.Global.Promotions != m.promotions+live {
			t.Fatalf("step %d: active/pending/promotions %d/%d/%d, model %d/%d/%d", step,
				snap.Global.Active, snap.Pending, snap.Global.Promotions, m.active[globalKey], len(m.queued), m.promotions+live)
		}
	}

	// Drain: end every lease; whatever is still queued is granted in turn
	// (and released) or expires.
	for _, h := range held {
		h.l.Release()
	}
	for rounds := 0; len(m.queued) > 0; rounds++ {
		if rounds > 1000 {
			t.Fatalf("queue does not drain: %d left", len(m.queued))
		}
		var left []*modelWaiter
		for _, mw := range m.queued {
			switch mw.w.state {
			case stateQueued:
				left = append(left, mw)
			case stateGranted:
				mw.w.lease.Release()
			}
		}
		m.queued = left
		clk.Advance(time.Second)
	}
	if !s.Idle() {
		t.Fatalf("not idle after drain: %+v", s.Stats())
	}
	if err := s.check(); err != nil {
		t.Fatal(err)
	}
}
