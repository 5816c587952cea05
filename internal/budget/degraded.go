package budget

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"time"
)

// enterDegraded starts enforcing local shares. Each window's share is
// fixed at its first use while degraded, from the figures last seen.
func (b *Budgets) enterDegraded(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.degraded.Swap(true) {
		return
	}
	clear(b.share)
	clear(b.used)
	b.lastProbe = time.Now()
	b.opts.Logger.Warn("redis is not answering: enforcing this replica's share of every budget",
		"replicas_last_seen", b.alive(), "error", firstLine(err))
}

func (b *Budgets) alive() int {
	if b.opts.Replicas == nil {
		return 1
	}
	return max(b.opts.Replicas.Alive(), 1)
}

// shareLocked is this replica's share of a window while degraded: what
// was left when last seen (limit - spent - reserved) divided by the
// replicas last seen alive. A window never seen from Redis is rebuilt from
// the ledger first (so a replica started during an outage is not
// unlimited); when the ledger does not answer either, the whole limit is
// divided, still a bound.
func (b *Budgets) shareLocked(ctx context.Context, a applied, now time.Time) int64 {
	if s, ok := b.share[a.slot.base]; ok {
		return s
	}
	f, ok := b.known[a.slot.base]
	if !ok {
		b.mu.Unlock()
		spent, err := b.ledgerSpent(ctx, a.limit, now)
		b.mu.Lock()
		if err == nil {
			f = figures{spent: spent + b.recentLocked(a.slot.base, now)}
			b.known[a.slot.base] = f
		}
		if s, ok := b.share[a.slot.base]; ok { // another request fixed it meanwhile
			return s
		}
	}
	s := max(a.slot.limit-f.spent-f.reserved, 0) / int64(b.alive())
	b.share[a.slot.base] = s
	return s
}

// reserveShare decides against the local shares, all or nothing.
func (b *Budgets) reserveShare(ctx context.Context, r *Reservation, now time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	shares := make([]int64, len(r.at))
	for i, a := range r.at {
		shares[i] = b.shareLocked(ctx, a, now)
	}
	for i, a := range r.at {
		if used := b.used[a.slot.base]; used+r.est > shares[i] {
			// Remaining names what this replica may still spend.
			return &ExceededError{Limit: a.limit, RetryAfter: a.limit.Per.retryAfter(now),
				Remaining: usd(max(shares[i]-used, 0))}
		}
	}
	r.degraded = true
	b.live[r] = struct{}{}
	r.figs = make([]figures, len(r.at))
	for i, a := range r.at {
		b.used[a.slot.base] += r.est
		// Reported as the share: spent is what is outside it.
		r.figs[i] = figures{spent: a.slot.limit - shares[i] + b.used[a.slot.base]}
	}
	return nil
}

// settleShare counts a settle against the local shares and keeps it for
// Redis. A reservation made in Redis before the outage was inside the
// figures the share came from, so its whole cost counts (erring low).
// ok is false when the replica came back meanwhile: settle in Redis.
func (b *Budgets) settleShare(r *Reservation, cost, atMs int64) (_ []figures, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.degraded.Load() {
		return nil, false
	}
	figs := make([]figures, len(r.at))
	for i, a := range r.at {
		k := a.slot.base
		if r.degraded {
			b.used[k] += cost - r.est
		} else {
			b.used[k] += cost
		}
		if s, ok := b.share[k]; ok {
			figs[i] = figures{spent: a.slot.limit - s + b.used[k]}
		} else {
			figs[i] = figures{spent: -1}
		}
	}
	if len(b.pending) < maxPending {
		b.pending = append(b.pending, pendingSettle{ss: slots(r.at), id: r.id, cost: cost, atMs: atMs})
	} else {
		b.opts.Logger.Warn("budget settle dropped: too many pending while redis is away", "cost_micros", cost)
	}
	return figs, true
}

// recover, at most every probeEvery, hands Redis the settles it missed
// (one settle call each, so each cost is added once) and leaves degraded
// mode when none is left. It reports whether the replica is back.
// force skips the probe interval (Close).
func (b *Budgets) recover(ctx context.Context, force bool) bool {
	if !b.probing.TryLock() {
		return !b.degraded.Load()
	}
	defer b.probing.Unlock()
	b.mu.Lock()
	if !b.degraded.Load() {
		b.mu.Unlock()
		return true
	}
	if !force && time.Since(b.lastProbe) < probeEvery {
		b.mu.Unlock()
		return false
	}
	b.lastProbe = time.Now()
	answered := false // Redis answered this probe
	for {
		batch := slices.Clone(b.pending)
		if len(batch) == 0 && !answered {
			// Nothing to replay tells nothing about Redis: ask it. Leaving
			// degraded mode on no answer would, at the next failure, start
			// a new share from the same old figures, as many times as the
			// replica flaps: the budget spent again each time.
			b.mu.Unlock()
			octx, cancel := b.opContext(ctx)
			err := b.st.ping(octx)
			cancel()
			if err != nil {
				return false
			}
			answered = true
			b.mu.Lock()
			continue
		}
		if len(batch) == 0 {
			// Under mu: a settle deciding "degraded" now is either already
			// in pending or sees the replica back.
			b.degraded.Store(false)
			clear(b.share)
			clear(b.used)
			live := make([]*Reservation, 0, len(b.live))
			for r := range b.live {
				live = append(live, r)
			}
			clear(b.live)
			b.mu.Unlock()
			b.register(ctx, live)
			b.opts.Logger.Info("redis answers again: budgets are shared again")
			return true
		}
		b.mu.Unlock()
		done := 0
		for _, p := range batch {
			octx, cancel := b.opContext(ctx)
			// Its own time: a counter rebuilt from a ledger that holds it
			// does not add it twice.
			figs, err := b.st.settle(octx, p.ss, p.id, p.cost, p.atMs)
			cancel()
			var re interface{ RedisError() }
			if err != nil && !(errors.As(err, &re) && !errors.Is(err, errShortReply)) {
				break
			}
			if err == nil {
				b.remember(p.ss, figs)
			}
			answered = true
			done++ // a script error would fail again: not retried
		}
		b.mu.Lock()
		b.pending = b.pending[done:]
		if done < len(batch) {
			b.mu.Unlock()
			return false
		}
	}
}

// register puts the reservations made while Redis was away, and still
// held, into Redis: until they settle the other replicas must count them,
// or the budget would be spent twice over, once by the requests on their
// way and once more by requests the others admit in their place. Each keeps
// its estimate and what is left of its TTL. One that could not be
// registered (Redis away again) stays on this replica's share.
func (b *Budgets) register(ctx context.Context, live []*Reservation) {
	for i, r := range live {
		r.mu.Lock()
		if r.settled || !r.degraded {
			r.mu.Unlock()
			continue
		}
		left := b.opts.ReservationTTL - b.opts.Now().Sub(r.madeAt)
		if left <= 0 { // expired: it would have left Redis by now
			r.degraded = false
			r.mu.Unlock()
			continue
		}
		octx, cancel := b.opContext(ctx)
		err := b.st.register(octx, slots(r.at), r.id, r.est, b.nowMs(), left.Milliseconds())
		cancel()
		if err == nil {
			r.degraded = false
		}
		r.mu.Unlock()
		if err != nil {
			b.opts.Logger.Warn("budget: reservations made while redis was away not registered", "count", len(live)-i, "error", firstLine(err))
			b.mu.Lock()
			for _, r := range live[i:] {
				b.live[r] = struct{}{}
			}
			b.mu.Unlock()
			return
		}
	}
}

func firstLine(err error) string {
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return msg
}

// sortStatus orders a snapshot by owner (its label: kind, then name, the
// kinds "client" and "team" being no prefix of each other), then window.
// It builds no label: with 10,000 budgets (as many keys with one) the
// labels built per comparison were a third of a /metrics scrape's CPU.
func sortStatus(s []Status) {
	slices.SortFunc(s, func(a, b Status) int {
		return cmp.Or(strings.Compare(a.Owner.Kind, b.Owner.Kind), strings.Compare(a.Owner.Name, b.Owner.Name),
			strings.Compare(string(a.Per), string(b.Per)))
	})
}
