package budget

import (
	"context"
	"errors"
	"testing"
	"time"
)

// modes runs a test in memory and against the shared Redis: the rules
// are the same, only where the figures live differs.
func modes(t *testing.T, f func(t *testing.T, mk func(Options) *Budgets)) {
	t.Run("local", func(t *testing.T) {
		f(t, func(o Options) *Budgets { return New(o) })
	})
	t.Run("redis", func(t *testing.T) {
		r := newTestRedis(t)
		f(t, func(o Options) *Budgets {
			o.Redis, o.Namespace = r.Client, r.ns
			return New(o)
		})
	})
}

func status(t *testing.T, b *Budgets, o Owner, p Per) Status {
	t.Helper()
	for _, s := range b.Snapshot(context.Background()) {
		if s.Owner == o && s.Per == p {
			return s
		}
	}
	t.Fatalf("no status for %s %s", o, p)
	return Status{}
}

// TestReserveSettleRefuse: a reservation fits while spent + reserved +
// estimate <= limit; settling replaces the estimate by the cost; the
// first reservation that would cross is refused with the budget named,
// Retry-After to UTC midnight, and what is left.
func TestReserveSettleRefuse(t *testing.T) {
	modes(t, func(t *testing.T, mk func(Options) *Budgets) {
		ctx := context.Background()
		clk := newClock(ts("2026-12-02T23:00:00Z"))
		if time.Now().After(ts("2026-12-03T00:00:00Z")) {
			// Counters expire a day after their window (real time): keep the
			// fake day current so Redis does not drop them at once.
			clk = newClock(dayStart().Add(22 * time.Hour))
		}
		b := mk(Options{Now: clk.now, Ledger: newLedger()})
		defer b.Close()
		if err := b.SetLimits(ctx, []Limit{{searchWeb, 1, Day}}); err != nil {
			t.Fatal(err)
		}
		r1, err := b.Reserve(ctx, []Owner{searchWeb}, 600_000)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := r1.Remaining(); !ok || got != 0.4 {
			t.Errorf("remaining after reserve = %v %v, want 0.4", got, ok)
		}
		_, err = b.Reserve(ctx, []Owner{searchWeb}, 400_001)
		var ex *ExceededError
		if !errors.As(err, &ex) {
			t.Fatalf("reserve over the limit: %v, want *ExceededError", err)
		}
		if ex.Error() != "budget exceeded: client search-web, day" || ex.RetryAfter != time.Hour || ex.Remaining != 0.4 {
			t.Errorf("refusal %q retry %s remaining %v, want client search-web, day / 1h / 0.4", ex, ex.RetryAfter, ex.Remaining)
		}
		r1.Settle(ctx, 100_000)
		r1.Settle(ctx, 900_000) // idempotent: the first settle counts
		if got, _ := r1.Remaining(); got != 0.9 {
			t.Errorf("remaining after settle = %v, want 0.9", got)
		}
		if got, _ := b.Remaining([]Owner{searchWeb, {Client, "other"}}); got != 0.9 {
			t.Errorf("Budgets.Remaining = %v, want 0.9", got)
		}
		r2, err := b.Reserve(ctx, []Owner{searchWeb}, 900_000)
		if err != nil {
			t.Fatalf("reserve exactly the rest: %v", err)
		}
		st := status(t, b, searchWeb, Day)
		if st.SpentUSD != 0.1 || st.ReservedUSD != 0.9 || st.RemainingUSD != 0 || st.ResetsAt == nil || !st.ResetsAt.Equal(ts("2026-12-03T00:00:00Z")) && clk.now().Day() == 2 {
			t.Errorf("snapshot %+v", st)
		}
		r2.Settle(ctx, 950_000) // over its estimate: the only way past a limit
		st = status(t, b, searchWeb, Day)
		if st.SpentUSD != 1.05 || st.ReservedUSD != 0 || st.RemainingUSD != 0 {
			t.Errorf("after overshoot: %+v", st)
		}
		// No budget: a reservation that settles to nothing and reports none.
		r3, err := b.Reserve(ctx, []Owner{{Client, "unbudgeted"}}, 1e9)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := r3.Remaining(); ok {
			t.Error("unbudgeted owner reports a remaining figure")
		}
		r3.Settle(ctx, 5)
	})
}

// TestAllOrNothing: a request of a client in a team reserves against
// both; when the team's budget refuses, the client's budget keeps nothing
// of the refused request.
func TestAllOrNothing(t *testing.T) {
	modes(t, func(t *testing.T, mk func(Options) *Budgets) {
		ctx := context.Background()
		clk := newClock(dayStart())
		b := mk(Options{Now: clk.now})
		defer b.Close()
		if err := b.SetLimits(ctx, []Limit{{searchWeb, 10, Day}, {search, 1, Month}}); err != nil {
			t.Fatal(err)
		}
		r, err := b.Reserve(ctx, []Owner{searchWeb, search}, 800_000)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := r.Remaining(); got != 0.2 {
			t.Errorf("remaining = %v, want the team's 0.2", got)
		}
		_, err = b.Reserve(ctx, []Owner{searchWeb, search}, 300_000)
		var ex *ExceededError
		if !errors.As(err, &ex) || ex.Limit.Owner != search || ex.Limit.Per != Month {
			t.Fatalf("refusal %v, want the team's month", err)
		}
		if st := status(t, b, searchWeb, Day); st.ReservedUSD != 0.8 {
			t.Errorf("client reserved %v after a refusal by the team, want 0.8", st.ReservedUSD)
		}
		r.Settle(ctx, 800_000)
		// A second client of the team, without a budget of its own, meets the team's.
		if _, err := b.Reserve(ctx, []Owner{{Client, "search-batch"}, search}, 300_000); !errors.As(err, &ex) {
			t.Errorf("other client of the team: %v, want refused by the team", err)
		}
	})
}

// TestExpiryReturnsDeadReplicaReservation: a replica that dies holding a
// reservation gives it back after the reservation TTL.
func TestExpiryReturnsDeadReplicaReservation(t *testing.T) {
	modes(t, func(t *testing.T, mk func(Options) *Budgets) {
		ctx := context.Background()
		clk := newClock(dayStart())
		opts := Options{Now: clk.now, ReservationTTL: time.Minute}
		dead, live := mk(opts), mk(opts)
		defer live.Close()
		limits := []Limit{{searchWeb, 1, Day}}
		_ = dead.SetLimits(ctx, limits)
		_ = live.SetLimits(ctx, limits)
		if _, err := dead.Reserve(ctx, []Owner{searchWeb}, 1_000_000); err != nil {
			t.Fatal(err)
		}
		if dead.redis {
			// Only shared figures let another replica see the dead one's hold.
			if _, err := live.Reserve(ctx, []Owner{searchWeb}, 1); err == nil {
				t.Fatal("budget fully reserved by another replica, yet admitted")
			}
		} else {
			live = dead // in memory the "replica" is the process itself
		}
		clk.advance(time.Minute + time.Second)
		r, err := live.Reserve(ctx, []Owner{searchWeb}, 1_000_000)
		if err != nil {
			t.Fatalf("after the TTL the dead reservation should be back: %v", err)
		}
		r.Settle(ctx, 0)
		if st := status(t, live, searchWeb, Day); st.ReservedUSD != 0 || st.SpentUSD != 0 {
			t.Errorf("after settle: %+v", st)
		}
	})
}

// TestSettleAfterExpiry: a request slower than the TTL still adds its cost.
func TestSettleAfterExpiry(t *testing.T) {
	modes(t, func(t *testing.T, mk func(Options) *Budgets) {
		ctx := context.Background()
		clk := newClock(dayStart())
		b := mk(Options{Now: clk.now, ReservationTTL: time.Minute})
		defer b.Close()
		_ = b.SetLimits(ctx, []Limit{{searchWeb, 1, Total}})
		r, err := b.Reserve(ctx, []Owner{searchWeb}, 500_000)
		if err != nil {
			t.Fatal(err)
		}
		clk.advance(2 * time.Minute)
		r.Settle(ctx, 300_000)
		if st := status(t, b, searchWeb, Total); st.SpentUSD != 0.3 || st.ReservedUSD != 0 || st.ResetsAt != nil {
			t.Errorf("settle after expiry: %+v", st)
		}
	})
}

// TestRebuildFromLedger: spend lives in the ledger; a budget new to the
// engine starts from it, and Redis losing its keys (FLUSHALL) is rebuilt
// from it before the next decision.
func TestRebuildFromLedger(t *testing.T) {
	r := newTestRedis(t)
	ctx := context.Background()
	clk := newClock(dayStart())
	led := newLedger()
	led.add(searchWeb, 700_000)
	b := New(Options{Redis: r.Client, Namespace: r.ns, Now: clk.now, Ledger: led})
	defer b.Close()
	if err := b.SetLimits(ctx, []Limit{{searchWeb, 1, Day}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Reserve(ctx, []Owner{searchWeb}, 300_001); err == nil {
		t.Fatal("reserve past ledger spend + limit admitted")
	}
	res, err := b.Reserve(ctx, []Owner{searchWeb}, 100_000)
	if err != nil {
		t.Fatal(err)
	}
	res.Settle(ctx, 100_000)
	led.add(searchWeb, 100_000) // the report writer's record of it

	r.flush(t)
	clk.advance(10 * time.Second) // past the recent-settle memory: the ledger alone has it
	before := led.calls.Load()
	if _, err := b.Reserve(ctx, []Owner{searchWeb}, 200_001); err == nil {
		t.Fatal("after FLUSHALL the spend was not rebuilt before deciding")
	}
	if led.calls.Load() == before {
		t.Error("no ledger read after FLUSHALL")
	}
	if st := status(t, b, searchWeb, Day); st.SpentUSD != 0.8 {
		t.Errorf("rebuilt spend %v, want 0.8", st.SpentUSD)
	}

	// Settled a moment before the flush, in the ledger a moment after
	// (within LedgerLag, as the report writer's flush is): the rebuild
	// waits for it rather than lose it.
	res, _ = b.Reserve(ctx, []Owner{searchWeb}, 50_000)
	res.Settle(ctx, 50_000)
	r.flush(t)
	time.AfterFunc(50*time.Millisecond, func() { led.add(searchWeb, 50_000) })
	if _, err := b.Reserve(ctx, []Owner{searchWeb}, 150_001); err == nil {
		t.Error("the settle not yet in the ledger was lost by the rebuild")
	}
	if st := status(t, b, searchWeb, Day); st.SpentUSD != 0.85 {
		t.Errorf("rebuilt spend %v, want 0.85 (the ledger once it caught up)", st.SpentUSD)
	}

	// A ledger that does not answer: no decision is made up.
	r.flush(t)
	led.fail.Store(true)
	var rb *RebuildError
	if _, err := b.Reserve(ctx, []Owner{searchWeb}, 1); !errors.As(err, &rb) {
		t.Errorf("reserve with ledger down and no counter: %v, want *RebuildError", err)
	}
}

// TestLimitChangeKeepsSpend: a routes reload changing a figure keeps the
// window's spend; a removed budget stops applying.
func TestLimitChangeKeepsSpend(t *testing.T) {
	modes(t, func(t *testing.T, mk func(Options) *Budgets) {
		ctx := context.Background()
		clk := newClock(dayStart())
		b := mk(Options{Now: clk.now})
		defer b.Close()
		_ = b.SetLimits(ctx, []Limit{{searchWeb, 1, Day}})
		r, _ := b.Reserve(ctx, []Owner{searchWeb}, 900_000)
		r.Settle(ctx, 900_000)
		_ = b.SetLimits(ctx, []Limit{{searchWeb, 2, Day}})
		if st := status(t, b, searchWeb, Day); st.SpentUSD != 0.9 || st.LimitUSD != 2 {
			t.Errorf("after raising the limit: %+v", st)
		}
		_ = b.SetLimits(ctx, nil)
		r, err := b.Reserve(ctx, []Owner{searchWeb}, 1e12)
		if err != nil {
			t.Fatalf("budget removed, still refused: %v", err)
		}
		if _, ok := r.Remaining(); ok {
			t.Error("budget removed, still reported")
		}
		if err := b.SetLimits(ctx, []Limit{{searchWeb, 1, "year"}}); err == nil {
			t.Error("unknown window accepted")
		}
	})
}

// TestNewWindow: at UTC midnight a day budget starts again from the
// ledger's spend since then (none yet), while the month budget of the
// same request keeps its spend.
func TestNewWindow(t *testing.T) {
	modes(t, func(t *testing.T, mk func(Options) *Budgets) {
		ctx := context.Background()
		// The fake day must neither start nor end a month, so that the
		// month assertion stays simple: on the month's first or last day
		// move it forward a day or two (a future day is fine for the
		// ledger and Redis expiries), never skip.
		start := dayStart()
		for start.Day() == 1 || start.Add(24*time.Hour).Day() == 1 {
			start = start.Add(24 * time.Hour)
		}
		clk := newClock(start.Add(22*time.Hour + 59*time.Minute))
		b := mk(Options{Now: clk.now})
		defer b.Close()
		_ = b.SetLimits(ctx, []Limit{{searchWeb, 1, Day}, {search, 3, Month}})
		r, err := b.Reserve(ctx, []Owner{searchWeb, search}, 1_000_000)
		if err != nil {
			t.Fatal(err)
		}
		r.Settle(ctx, 1_000_000)
		var ex *ExceededError
		if _, err := b.Reserve(ctx, []Owner{searchWeb, search}, 1); !errors.As(err, &ex) || ex.RetryAfter != time.Minute {
			t.Fatalf("spent day: %v (retry after %v), want refused until midnight, a minute away", err, ex)
		}
		clk.advance(2 * time.Minute)
		r, err = b.Reserve(ctx, []Owner{searchWeb, search}, 1_000_000)
		if err != nil {
			t.Fatalf("new day: %v", err)
		}
		r.Settle(ctx, 1_000_000)
		if st := status(t, b, search, Month); st.SpentUSD != 2 {
			t.Errorf("month spent %v across the day change, want 2", st.SpentUSD)
		}
	})
}

// TestZeroEstimate: an unpriced model reserves 0 and settles 0. Settling
// it, and its expiry, leave the budget working: no script fails on the
// zero (Lua's -0 is not an integer to Redis).
func TestZeroEstimate(t *testing.T) {
	modes(t, func(t *testing.T, mk func(Options) *Budgets) {
		ctx := context.Background()
		clk := newClock(dayStart())
		b := mk(Options{Now: clk.now, ReservationTTL: time.Minute})
		defer b.Close()
		if err := b.SetLimits(ctx, []Limit{{searchWeb, 1, Day}}); err != nil {
			t.Fatal(err)
		}
		settled, err := b.Reserve(ctx, []Owner{searchWeb}, 0)
		if err != nil {
			t.Fatal(err)
		}
		settled.Settle(ctx, 0)
		if _, err := b.Reserve(ctx, []Owner{searchWeb}, 0); err != nil { // never settled: expires
			t.Fatal(err)
		}
		clk.advance(2 * time.Minute)
		res, err := b.Reserve(ctx, []Owner{searchWeb}, 400_000)
		if err != nil {
			t.Fatalf("reserve after a zero reservation expired: %v", err)
		}
		res.Settle(ctx, 300_000)
		if st := status(t, b, searchWeb, Day); st.SpentUSD != 0.3 || st.ReservedUSD != 0 {
			t.Errorf("after zero reservations: %+v, want spent 0.3 and nothing reserved", st)
		}
	})
}

// TestRecentSettlesForgotten: a replica remembers its own settles for
// recentKeep only (a rebuild adds those the ledger may not have yet), so
// a budget settled steadily for a long time holds a few seconds' worth,
// not every settle it ever made; a window nobody settles into any more is
// forgotten too.
func TestRecentSettlesForgotten(t *testing.T) {
	modes(t, func(t *testing.T, mk func(Options) *Budgets) {
		ctx := context.Background()
		clk := newClock(dayStart().Add(time.Hour))
		b := mk(Options{Now: clk.now, Ledger: newLedger()})
		defer b.Close()
		if err := b.SetLimits(ctx, []Limit{{searchWeb, 1e6, Day}, {searchWeb, 1e6, Total}}); err != nil {
			t.Fatal(err)
		}
		const settles = 2000 // 100 s at 20 a second
		for range settles {
			r, err := b.Reserve(ctx, []Owner{searchWeb}, 10)
			if err != nil {
				t.Fatal(err)
			}
			r.Settle(ctx, 10)
			clk.advance(50 * time.Millisecond)
		}
		b.mu.Lock()
		held, lists := 0, len(b.recent)
		for _, rs := range b.recent {
			held += len(rs)
		}
		b.mu.Unlock()
		// recentKeep of 20 a second, for each of the two windows.
		if want := 2 * int(recentKeep/(50*time.Millisecond)); held > want+2 || lists != 2 {
			t.Errorf("%d settles remembered in %d lists after %d, want at most %d in 2", held, lists, settles, want+2)
		}
		// A day later only the new day's settle is remembered: the old
		// day's list is gone.
		clk.advance(24 * time.Hour)
		r, err := b.Reserve(ctx, []Owner{searchWeb}, 10)
		if err != nil {
			t.Fatal(err)
		}
		r.Settle(ctx, 10)
		b.mu.Lock()
		held = 0
		for _, rs := range b.recent {
			held += len(rs)
		}
		lists = len(b.recent)
		b.mu.Unlock()
		if held != 2 || lists != 2 {
			t.Errorf("a day later %d settles in %d lists, want the new settle in each of its 2 windows", held, lists)
		}
	})
}
