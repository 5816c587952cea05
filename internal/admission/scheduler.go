package admission

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// MaxDimensions is how many extra dimensions one Request may carry; with the
// implied global gate that makes eight gates. A fixed bound lets leases and
// lane keys be arrays, which keeps the fast path free of allocations.
const MaxDimensions = 7

const (
	defaultGlobalLimit   = 256
	defaultMaxPending    = 4096
	defaultAgingInterval = 30 * time.Second
	// idleGatesKept bounds the idle dimension gates that keep their
	// counters: identities that come and go must not grow memory forever,
	// while the recently idle ones keep their history for snapshots.
	idleGatesKept = 64
)

// Config tunes a Scheduler. The zero value is usable: every field has a
// default.
type Config struct {
	// GlobalLimit is the number of slots of the global upstream execution
	// gate (GATEWAY_UPSTREAM_EXECUTION_GATE_LIMIT). Default 256 if <= 0.
	GlobalLimit int
	// MaxPending bounds the queued attempts overall; an attempt that would
	// queue beyond it fails at once with ErrQueueFull
	// (GATEWAY_ADMISSION_MAX_PENDING). Default 4096 if <= 0.
	MaxPending int
	// AgingInterval: queued work is promoted one class per interval since it
	// was enqueued, never above Interactive (GATEWAY_ADMISSION_AGING_INTERVAL).
	// Default 30s if <= 0.
	AgingInterval time.Duration
	// Clock defaults to the process clock when nil.
	Clock Clock
	// Shared, when set, makes every dimension gate hold across replicas:
	// each local grant also takes its slots in the store.
	Shared SharedStore
	// SharedRetry is how long a gate the store refused stays closed when
	// no wake comes first (GATEWAY_REDIS_WAKE). Default 50ms if <= 0.
	SharedRetry time.Duration
}

// Dimension is one extra quota dimension of a request (the global gate is
// always implied).
type Dimension struct {
	Gate  string // e.g. TargetGate; later "gateway_client"
	ID    string // identity of the gate instance, e.g. the target digest (never a secret)
	Label string // provider name, shown in snapshots
	// Limit is the number of slots. A limit that differs from the gate's
	// resizes it in place, unless Version is older than the gate's.
	Limit int
	// Version orders limits that change over time (a routes reload): a
	// dimension older than the newest one the gate has seen never changes
	// its limit. Zero for callers that do not reload.
	Version uint64
}

// Request describes one attempt.
type Request struct {
	Priority Priority
	// Budget is the longest wait for all dimensions together; <= 0 means do
	// not wait at all: admitted only if there is room now.
	Budget time.Duration
	// Dimensions are up to MaxDimensions extra gates; a duplicate (same
	// Gate and ID) is an error wrapping ErrInvalidRequest.
	Dimensions []Dimension
}

// Scheduler owns the gates and the queue in front of them. It is safe for
// concurrent use; one mutex guards all of its state, because an admission
// decision must see every dimension of a request at once.
type Scheduler struct {
	clock      Clock
	aging      time.Duration
	maxPending int

	mu        sync.Mutex
	global    gate
	gates     map[gateKey]*gate
	lanes     map[laneKey]*lane
	runnable  [numPriorities]laneHeap
	pending   int // queued attempts overall
	leases    int // leases still holding at least one slot
	seq       uint64
	serial    uint64
	lastEnq   time.Time
	idleHead  *gate
	idleTail  *gate
	idleCount int
	closed    bool
	resized   bool // a dimension resized a gate during this try

	shared      SharedStore
	sharedRetry time.Duration
	share       int           // replicas sharing the limits while the store is away; 0 when it answers
	drained     chan struct{} // closed once closed and leases == 0
}

// New returns a Scheduler with cfg's defaults filled in.
func New(cfg Config) *Scheduler {
	if cfg.GlobalLimit <= 0 {
		cfg.GlobalLimit = defaultGlobalLimit
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = defaultMaxPending
	}
	if cfg.AgingInterval <= 0 {
		cfg.AgingInterval = defaultAgingInterval
	}
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	if cfg.SharedRetry <= 0 {
		cfg.SharedRetry = defaultSharedRetry
	}
	s := &Scheduler{
		clock:       cfg.Clock,
		aging:       cfg.AgingInterval,
		maxPending:  cfg.MaxPending,
		global:      gate{key: gateKey{gate: GlobalGate}, limit: cfg.GlobalLimit},
		gates:       make(map[gateKey]*gate),
		lanes:       make(map[laneKey]*lane),
		drained:     make(chan struct{}),
		shared:      cfg.Shared,
		sharedRetry: cfg.SharedRetry,
	}
	for c := range s.runnable {
		s.runnable[c].class = Priority(c)
	}
	return s
}

func validate(req Request) error {
	if !req.Priority.valid() {
		return fmt.Errorf("%w: unknown priority %d", ErrInvalidRequest, uint8(req.Priority))
	}
	if len(req.Dimensions) > MaxDimensions {
		return fmt.Errorf("%w: %d dimensions, at most %d", ErrInvalidRequest, len(req.Dimensions), MaxDimensions)
	}
	for i, d := range req.Dimensions {
		switch {
		case d.Gate == "":
			return fmt.Errorf("%w: dimension %d has no gate name", ErrInvalidRequest, i)
		case d.Gate == GlobalGate:
			return fmt.Errorf("%w: gate %s is implied, not a dimension", ErrInvalidRequest, GlobalGate)
		case d.Limit <= 0:
			// Reject rather than guess "unlimited" or "closed": either guess
			// would hide a configuration bug.
			return fmt.Errorf("%w: gate %s %q has limit %d", ErrInvalidRequest, d.Gate, d.Label, d.Limit)
		}
		for _, e := range req.Dimensions[:i] {
			if e.Gate == d.Gate && e.ID == d.ID {
				return fmt.Errorf("%w: duplicate dimension %s %q", ErrInvalidRequest, d.Gate, d.Label)
			}
		}
	}
	return nil
}

// Acquire admits one attempt: it returns a Lease holding the global slot and
// one slot of every dimension, or an error: ErrInvalidRequest (wrapped),
// ErrClosed, ErrQueueFull, *TimeoutError, or an error wrapping ctx.Err()
// when ctx ends first. It never holds any slot while it waits.
func (s *Scheduler) Acquire(ctx context.Context, req Request) (*Lease, error) {
	if s.shared != nil {
		return s.acquireShared(ctx, req)
	}
	l, w, err := s.try(ctx, req)
	if w != nil {
		return s.wait(ctx, w)
	}
	return l, err
}

// acquireShared is Acquire with a shared store: the local scheduler picks
// the attempt, then the store confirms its slots. A refusal sends the
// attempt back to its place in the queue with what is left of its budget;
// it holds nothing meanwhile.
func (s *Scheduler) acquireShared(ctx context.Context, req Request) (*Lease, error) {
	start := s.clock.Now()
	l, w, err := s.try(ctx, req)
	for {
		var place waitPlace
		if w != nil {
			place = waitPlace{seq: w.seq, enq: w.enq}
			l, err = s.wait(ctx, w)
		} else if l != nil {
			place = l.place // a fast-path grant's place, taken when it was granted
		}
		if err != nil {
			return nil, err
		}
		if l.n == 0 {
			return l, nil
		}
		if l, w, err = s.confirm(ctx, req, l, start, place); w == nil {
			if err == nil && ctx.Err() != nil {
				// Confirmed as the caller gave up: give it back, as wait does.
				s.reclaim(l)
				return nil, fmt.Errorf("gateway admission shared slots: %w", ctx.Err())
			}
			return l, err
		}
	}
}

// try decides at once: a lease when there is room now, a queued waiter when
// the attempt must wait, or an error. It never blocks, which also lets tests
// drive the scheduler from one goroutine.
func (s *Scheduler) try(ctx context.Context, req Request) (*Lease, *waiter, error) {
	if err := validate(req); err != nil {
		return nil, nil, err
	}
	n := len(req.Dimensions)

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		s.global.rejected++
		return nil, nil, ErrClosed
	}
	var gs [MaxDimensions]*gate
	for i, d := range req.Dimensions {
		gs[i] = s.resolve(d)
	}
	if s.resized {
		// A larger limit may let queued attempts run; they go first.
		s.resized = false
		s.dispatch(s.clock.Now())
	}
	if err := ctx.Err(); err != nil {
		s.count(gs[:n], func(g *gate) { g.cancelled++ })
		s.settleAll(gs[:n])
		return nil, nil, fmt.Errorf("gateway admission: %w", err)
	}
	now := s.clock.Now()

	// Fast path. It is fair even with attempts queued: while the global gate
	// has room, every queued attempt is blocked by one of its dimensions
	// (dispatch's invariant), so this attempt passes no one who could run.
	if s.room(gs[:n]) {
		l := s.activate(gs[:n], now, 0)
		if s.shared != nil && n > 0 {
			// The store may refuse this grant: it then goes back to the
			// queue at the place it had when it arrived, ahead of anything
			// that queued during the round trip.
			l.place = s.nextPlace(now)
		}
		return l, nil, nil
	}
	if req.Budget <= 0 {
		blamed := s.blockingGate(gs[:n])
		s.count(gs[:n], func(g *gate) { g.timedOut++ })
		s.settleAll(gs[:n])
		return nil, nil, &TimeoutError{Gate: blamed, Budget: req.Budget}
	}
	if s.pending >= s.maxPending {
		s.count(gs[:n], func(g *gate) { g.rejected++ })
		s.settleAll(gs[:n])
		return nil, nil, ErrQueueFull
	}
	return nil, s.enqueue(req, &gs, now), nil
}

// count applies f to the global gate and to gs.
func (s *Scheduler) count(gs []*gate, f func(*gate)) {
	f(&s.global)
	for _, g := range gs {
		f(g)
	}
}

func (s *Scheduler) room(gs []*gate) bool {
	if s.global.full() {
		return false
	}
	for _, g := range gs {
		if g.full() {
			return false
		}
	}
	return true
}

// blockingGate names the gate to blame in a TimeoutError: the first full
// dimension in request order, else the global gate.
func (s *Scheduler) blockingGate(gs []*gate) string {
	for _, g := range gs {
		if g.full() {
			return g.key.gate
		}
	}
	return GlobalGate
}

// activate takes the slots of a grant and returns its lease.
func (s *Scheduler) activate(gs []*gate, now time.Time, waited time.Duration) *Lease {
	l := &Lease{s: s, grantedAt: now, holdsGlobal: true, holdsRest: len(gs) > 0}
	l.n = uint8(copy(l.gates[:], gs))
	s.admit(&s.global, waited)
	for _, g := range gs {
		s.admit(g, waited)
	}
	s.leases++
	return l
}

func (s *Scheduler) enqueue(req Request, gs *[MaxDimensions]*gate, now time.Time) *waiter {
	return s.requeue(req, gs, waitPlace{}, req.Budget, now)
}

// nextPlace takes the next place at the back of the queue. Enqueue times
// must not go backwards in sequence order, or the head of a FIFO would no
// longer be its oldest attempt and aging order would break; a clock without
// a monotonic reading could otherwise do that.
func (s *Scheduler) nextPlace(now time.Time) waitPlace {
	if now.Before(s.lastEnq) {
		now = s.lastEnq
	}
	s.lastEnq = now
	s.seq++
	return waitPlace{seq: s.seq, enq: now}
}

// waitPlace is an attempt's place in the queue: its sequence number and
// enqueue time. The zero value asks for a new place at the back.
type waitPlace struct {
	seq uint64
	enq time.Time
}

// requeue queues an attempt at place (a new one when place is zero) for at
// most left.
func (s *Scheduler) requeue(req Request, gs *[MaxDimensions]*gate, place waitPlace, left time.Duration, now time.Time) *waiter {
	if place.seq == 0 {
		place = s.nextPlace(now)
	}
	n := len(req.Dimensions)
	w := &waiter{
		seq:    place.seq,
		enq:    place.enq,
		base:   req.Priority,
		budget: req.Budget,
		n:      n,
		gates:  *gs,
		ready:  make(chan struct{}),
	}
	s.push(s.laneFor(gs[:n]), w)
	s.count(gs[:n], func(g *gate) { g.pending++ })
	s.pending++
	w.timer = s.clock.AfterFunc(left, func() { s.expire(w) })
	return w
}

// wait blocks until w's outcome is decided or ctx ends.
func (s *Scheduler) wait(ctx context.Context, w *waiter) (*Lease, error) {
	select {
	case <-w.ready:
	case <-ctx.Done():
		s.mu.Lock()
		if w.state == stateQueued {
			s.finish(w, stateCancelled, s.clock.Now())
			s.mu.Unlock()
			return nil, fmt.Errorf("gateway admission wait: %w", ctx.Err())
		}
		s.mu.Unlock()
		// Another outcome got the lock first; it is final.
	}
	switch w.state {
	case stateGranted:
		if err := ctx.Err(); err != nil {
			// Granted at the moment the caller gave up: the caller will not
			// use the slot, so give it back now rather than leak it.
			s.reclaim(w.lease)
			return nil, fmt.Errorf("gateway admission wait: %w", err)
		}
		return w.lease, nil
	case stateTimedOut:
		return nil, w.timeout
	default:
		return nil, ErrClosed
	}
}

// grantQueued gives w its slots; the caller holds s.mu and has checked room.
func (s *Scheduler) grantQueued(w *waiter, now time.Time) {
	waited := max(now.Sub(w.enq), 0)
	s.leave(w, now)
	w.lease = s.activate(w.gates[:w.n], now, waited)
	w.state = stateGranted
	close(w.ready)
}

// finish ends w with a failure outcome; the caller holds s.mu.
func (s *Scheduler) finish(w *waiter, state waitState, now time.Time) {
	gs := w.gates[:w.n]
	switch state {
	case stateTimedOut:
		w.timeout = &TimeoutError{Gate: s.blockingGate(gs), Budget: w.budget}
		s.count(gs, func(g *gate) { g.timedOut++ })
	case stateCancelled:
		s.count(gs, func(g *gate) { g.cancelled++ })
	case stateClosed:
		s.count(gs, func(g *gate) { g.rejected++ })
	}
	s.leave(w, now)
	w.state = state
	close(w.ready)
	s.settleAll(gs)
}

// leave takes w out of the queue and books the promotions it got.
func (s *Scheduler) leave(w *waiter, now time.Time) {
	s.unlink(w)
	promoted := uint64(w.base - s.effective(w, now))
	s.count(w.gates[:w.n], func(g *gate) {
		g.pending--
		g.promotions += promoted
	})
	s.pending--
	w.timer.Stop()
}

// expire is the budget timer of w.
func (s *Scheduler) expire(w *waiter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.state == stateQueued {
		s.finish(w, stateTimedOut, s.clock.Now())
	}
}

// reclaim returns a lease granted to a caller that had already given up.
func (s *Scheduler) reclaim(l *Lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count(l.gates[:l.n], func(g *gate) {
		g.cancelled++
		g.reclaimed++
	})
	s.release(l, true, s.clock.Now())
}

// Close rejects everything still queued with ErrClosed, refuses new
// Acquires, then waits until every lease is fully released or ctx ends. The
// caller decides when: main calls it only after the shutdown grace period,
// so until then queued and active work keep their places. Calling it again
// only waits again.
func (s *Scheduler) Close(ctx context.Context) error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		var queued []*waiter
		for _, ln := range s.lanes {
			for c := range ln.queues {
				for w := ln.queues[c].head; w != nil; w = w.next {
					queued = append(queued, w)
				}
			}
		}
		now := s.clock.Now()
		for _, w := range queued {
			s.finish(w, stateClosed, now)
		}
		if s.leases == 0 {
			close(s.drained)
		}
	}
	s.mu.Unlock()
	select {
	case <-s.drained:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("gateway admission close: %w", ctx.Err())
	}
}
