package budget

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"
)

// applied is one budget a reservation counts against.
type applied struct {
	limit Limit
	slot  slot
}

// Reservation is a request's hold on its budgets until it settles.
type Reservation struct {
	b        *Budgets
	id       string
	est      int64
	at       []applied
	madeAt   time.Time // Options.Now when it was made
	degraded bool      // made against the local share, not in Redis (yet): under mu once returned

	mu      sync.Mutex
	settled bool
	figs    []figures
}

func (b *Budgets) applicable(owners []Owner, now time.Time) []applied {
	b.mu.Lock()
	defer b.mu.Unlock()
	var at []applied
	for _, o := range owners {
		for _, p := range []Per{Day, Week, Month, Total} {
			if l, ok := b.limits[budgetID{o, p}]; ok {
				at = append(at, applied{l, b.slotOf(l, now)})
			}
		}
	}
	return at
}

func slots(at []applied) []slot {
	ss := make([]slot, len(at))
	for i, a := range at {
		ss[i] = a.slot
	}
	return ss
}

// Reserve holds estimateMicros against every budget of owners (owners
// without one are passed over), all or none. A refusal is an
// *ExceededError naming the first budget over; a *RebuildError means a
// window's spend could not be read from the ledger and nothing was
// reserved. A Reservation is returned whenever err is nil, budgets or not:
// settle it when the request ends.
func (b *Budgets) Reserve(ctx context.Context, owners []Owner, estimateMicros int64) (*Reservation, error) {
	now := b.opts.Now()
	at := b.applicable(owners, now)
	r := &Reservation{b: b, est: max(estimateMicros, 0), at: at, madeAt: now}
	if len(at) == 0 {
		return r, nil
	}
	r.id = b.nonce + strconv.FormatUint(b.seq.Add(1), 16)
	if b.redis && b.degraded.Load() && !b.recover(ctx, false) {
		return r, b.reserveShare(ctx, r, now)
	}
	ss := slots(at)
	for try := 0; ; try++ {
		octx, cancel := b.opContext(ctx)
		res, err := b.st.reserve(octx, ss, r.id, r.est, b.nowMs(), b.opts.ReservationTTL.Milliseconds())
		cancel()
		if err != nil {
			if err = b.storeErr(ctx, err); errors.Is(err, errDegraded) {
				return r, b.reserveShare(ctx, r, now)
			}
			return nil, err
		}
		switch res.status {
		case reservedOK:
			b.remember(ss, res.figs)
			r.figs = res.figs
			return r, nil
		case reserved0:
			a := at[res.over]
			b.remember([]slot{a.slot}, res.figs)
			return nil, b.exceeded(a, res.figs[0], now)
		}
		if try > 0 {
			return nil, fmt.Errorf("budget: counters still missing after a rebuild")
		}
		readAt := time.Now().Add(b.opts.LedgerLag)
		for _, i := range res.missing {
			if err := b.rebuild(ctx, at[i].slot, at[i].limit, now, readAt); err != nil {
				if errors.Is(err, errDegraded) {
					return r, b.reserveShare(ctx, r, now)
				}
				return nil, err
			}
		}
	}
}

func (b *Budgets) exceeded(a applied, f figures, now time.Time) *ExceededError {
	return &ExceededError{
		Limit:      a.limit,
		RetryAfter: a.limit.Per.retryAfter(now),
		Remaining:  usd(max(a.slot.limit-f.spent-f.reserved, 0)),
	}
}

func (b *Budgets) remember(ss []slot, figs []figures) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, s := range ss {
		if i < len(figs) && figs[i].spent >= 0 {
			b.known[s.base] = figs[i]
		}
	}
}

// Settle replaces the reservation by the request's real cost in
// micro-dollars. A request whose cost is unknown (an unpriced model)
// settles at the cost the caller passes: 0 adds no spend, passing the
// estimate keeps it counted; that choice is the caller's. Settle is
// idempotent (the first call counts) and safe after the reservation
// expired: the cost is still added.
func (r *Reservation) Settle(ctx context.Context, costMicros int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.settled || len(r.at) == 0 {
		r.settled = true
		return
	}
	r.settled = true
	if r.degraded {
		b := r.b
		b.mu.Lock()
		delete(b.live, r)
		b.mu.Unlock()
	}
	// A settle counts even when the request's context is gone (the client
	// hung up): the provider billed it.
	ctx = context.WithoutCancel(ctx)
	cost := max(costMicros, 0)
	b := r.b
	ss := slots(r.at)
	now := b.opts.Now()
	b.mu.Lock()
	for _, s := range ss {
		b.recent[s.base] = append(b.forgetLocked(s.base, now), recentSettle{now, cost})
	}
	b.sweepRecentLocked(now)
	b.mu.Unlock()
	at := now.UnixMilli()
	if !b.redis {
		figs, _ := b.st.settle(ctx, ss, r.id, cost, at)
		r.figs = figs
		return
	}
	for range 2 {
		if b.degraded.Load() {
			if figs, ok := b.settleShare(r, cost, at); ok {
				r.figs = figs
				return
			}
		}
		octx, cancel := b.opContext(ctx)
		figs, err := b.st.settle(octx, ss, r.id, cost, at)
		cancel()
		if err == nil {
			b.remember(ss, figs)
			r.figs = figs
			return
		}
		if err = b.storeErr(ctx, err); !errors.Is(err, errDegraded) {
			b.opts.Logger.Warn("budget settle refused by redis", "error", err)
			return
		}
		// Degraded now: the next turn keeps the settle for Redis. A call
		// that timed out after Redis ran it is counted twice on replay
		// (erring towards refusing), never lost.
	}
}

// Remaining is the smallest remaining USD across the reserved budgets,
// from the figures of the settle (or of the reservation before it); ok is
// false when no budget applied.
func (r *Reservation) Remaining() (usd float64, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.at) == 0 {
		return 0, false
	}
	return r.b.smallest(r.at, r.figs), true
}

func (b *Budgets) smallest(at []applied, figs []figures) float64 {
	least := int64(math.MaxInt64)
	for i, a := range at {
		var f figures
		if i < len(figs) && figs[i].spent >= 0 {
			f = figs[i]
		} else {
			b.mu.Lock()
			f = b.known[a.slot.base]
			b.mu.Unlock()
		}
		least = min(least, a.slot.limit-f.spent-f.reserved)
	}
	return usd(max(least, 0))
}

// Remaining is the smallest remaining USD of owners' budgets from what
// this replica last saw; ok is false when none has a budget.
func (b *Budgets) Remaining(owners []Owner) (usd float64, ok bool) {
	now := b.opts.Now()
	at := b.applicable(owners, now)
	if len(at) == 0 {
		return 0, false
	}
	if !b.redis {
		figs, _ := b.st.read(context.Background(), slots(at), now.UnixMilli())
		return b.smallest(at, figs), true
	}
	return b.smallest(at, nil), true
}

// Status is one budget's standing.
type Status struct {
	Owner        Owner      `json:"owner"`
	Per          Per        `json:"window"`
	LimitUSD     float64    `json:"limit_usd"`
	SpentUSD     float64    `json:"spent_usd"`
	ReservedUSD  float64    `json:"reserved_usd"`
	RemainingUSD float64    `json:"remaining_usd"`
	ResetsAt     *time.Time `json:"resets_at"` // nil for Total
	// Degraded: Redis is away and the figures are the last ones seen.
	Degraded bool `json:"degraded"`
}

// Snapshot reads every budget's current window (one call in Redis). A
// window whose counter Redis lost (flushed, restarted) is rebuilt from the
// ledger first, as a reservation would, so an operator reading it after a
// Redis restart sees the ledger's spend rather than figures from before;
// one whose rebuild fails shows the figures last seen.
func (b *Budgets) rebuildMissing(ctx context.Context, at []applied, figs []figures, now time.Time) bool {
	readAt := time.Now().Add(b.opts.LedgerLag)
	rebuilt := false
	for i, a := range at {
		if i < len(figs) && figs[i].spent < 0 {
			if err := b.rebuild(ctx, a.slot, a.limit, now, readAt); err != nil {
				b.opts.Logger.Warn("budget: spend not rebuilt", "budget", a.limit.Owner.Label(), "error", firstLine(err))
				continue
			}
			rebuilt = true
		}
	}
	return rebuilt
}

// Snapshot reads every budget's current window: see rebuildMissing.
func (b *Budgets) Snapshot(ctx context.Context) []Status {
	now := b.opts.Now()
	b.mu.Lock()
	var at []applied
	for _, l := range b.limits {
		at = append(at, applied{l, b.slotOf(l, now)})
	}
	b.mu.Unlock()
	if len(at) == 0 {
		return nil
	}
	ss := slots(at)
	// A replica whose requests stopped while Redis was away must not show
	// degraded figures once it answers: the read is a probe too.
	degraded := b.redis && b.degraded.Load() && !b.recover(ctx, false)
	var figs []figures
	if !degraded {
		octx, cancel := b.opContext(ctx)
		f, err := b.st.read(octx, ss, b.nowMs())
		cancel()
		if err != nil {
			degraded = errors.Is(b.storeErr(ctx, err), errDegraded)
		} else {
			figs = f
			b.remember(ss, f)
		}
	}
	if figs != nil && b.rebuildMissing(ctx, at, figs, now) {
		octx, cancel := b.opContext(ctx)
		if f, err := b.st.read(octx, ss, b.nowMs()); err == nil {
			figs = f
			b.remember(ss, f)
		}
		cancel()
	}
	out := make([]Status, len(at))
	for i, a := range at {
		var f figures
		if figs != nil && figs[i].spent >= 0 {
			f = figs[i]
		} else {
			b.mu.Lock()
			f = b.known[a.slot.base]
			b.mu.Unlock()
		}
		st := Status{Owner: a.limit.Owner, Per: a.limit.Per, LimitUSD: usd(a.slot.limit),
			SpentUSD: usd(f.spent), ReservedUSD: usd(f.reserved),
			RemainingUSD: usd(max(a.slot.limit-f.spent-f.reserved, 0)), Degraded: degraded}
		if end, ok := a.limit.Per.End(now); ok {
			st.ResetsAt = &end
		}
		out[i] = st
	}
	sortStatus(out)
	return out
}

// Close hands Redis the settles it missed while away, if it answers now.
// The engine has no goroutines of its own.
func (b *Budgets) Close() {
	if b.redis && b.degraded.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		b.recover(ctx, true)
		cancel()
	}
}
