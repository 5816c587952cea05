package budget

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// modelHeld is one admitted request the model still owes a settle for.
type modelHeld struct {
	res     *Reservation
	est     int64
	eng     int
	team    bool // reserved against the team (always) and the client (when client)
	client  bool
	madeAt  time.Time
	inRedis bool // false once a flush dropped it
	// degraded: made on a share while Redis was away, registered in
	// Redis when it answers again
	degraded bool
}

// TestBudgetModel: N replicas share one Redis and take a random walk of steps:
// concurrent reserves, settles at a real cost of estimate ± half, replica
// death (its reservations dropped unsettled), Redis losing every key with
// the ledger holding the settled truth (settles then find no counter until
// a reserve rebuilds it), Redis away for a few steps (each replica on its
// share, its settles kept and replayed when Redis answers), and time past
// the reservation TTL. After each step: the settled truth of each budget
// stays within limit + the admitted requests' cost above their estimate;
// wherever Redis has a counter it is exactly the truth (no settle lost by
// a flush, none counted twice by a rebuild or a replay); and Redis's live
// reserved figure is exactly the live reservations the model holds (no
// leak, no early loss).
//
// Expiry uses the fake clock passed into the scripts (Options.Now), not
// Redis TIME: TTLs of a minute age in one step without sleeping, and the
// model knows exactly which reservations are live. The ledger double
// holds a settle at once (LedgerLag -1), and the clock moves a
// millisecond a step, so "settled before the rebuild read the ledger" is
// never a tie.
func TestBudgetModel(t *testing.T) {
	for seed := range uint64(4) {
		t.Run("", func(t *testing.T) { runModel(t, seed) })
	}
}

func runModel(t *testing.T, seed uint64) {
	const (
		n           = 3
		ttl         = time.Minute
		clientLimit = 3_000_000
		teamLimit   = 5_000_000
	)
	rng := rand.New(rand.NewPCG(seed, 42))
	r := newTestRedis(t)
	ctx := context.Background()
	clk := newClock(dayStart())
	led := newLedger()
	limits := []Limit{{searchWeb, 3, Day}, {search, 5, Month}}
	mk := func() *Budgets {
		b := New(Options{Redis: r.Client, Namespace: r.ns, ReservationTTL: ttl, Ledger: led, LedgerLag: -1,
			Now: clk.now, Replicas: replicas(n)})
		if err := b.SetLimits(ctx, limits); err != nil {
			t.Fatal(err)
		}
		return b
	}
	engines := make([]*Budgets, n)
	for i := range engines {
		engines[i] = mk()
	}
	var (
		held                     []*modelHeld
		zombies                  []*modelHeld // dead replicas' reservations, live in Redis until their TTL
		truthClient, truthTeam   int64
		allowClient, allowTeam   int64
		admitted, refused, steps int
		down                     bool // Redis away: the engines are on their shares
		outages                  int
	)
	check := func(what string) {
		t.Helper()
		if truthClient > clientLimit+allowClient || truthTeam > teamLimit+allowTeam {
			t.Fatalf("seed %d after %s: settled client %d team %d past limits + overshoot allowance (%d, %d)",
				seed, what, truthClient, truthTeam, clientLimit+allowClient, teamLimit+allowTeam)
		}
		if down {
			return // Redis cannot be read; the bound above is what the shares keep
		}
		now := clk.now()
		var wantC, wantT int64
		for _, h := range append(append([]*modelHeld{}, held...), zombies...) {
			if h.inRedis && now.Before(h.madeAt.Add(ttl)) {
				wantT += h.est
				if h.client {
					wantC += h.est
				}
			}
		}
		for _, st := range engines[0].Snapshot(ctx) {
			spent, reserved := int64(st.SpentUSD*1e6+0.5), int64(st.ReservedUSD*1e6+0.5)
			truth, want, limit, allow := truthTeam, wantT, int64(teamLimit), allowTeam
			if st.Owner == searchWeb {
				truth, want, limit, allow = truthClient, wantC, clientLimit, allowClient
			}
			exists, _ := r.Exists(ctx, r.ns+":{b}:spent:"+baseKey(st.Owner, st.Per, now)).Result()
			if exists == 1 && spent != truth {
				t.Fatalf("seed %d after %s: %s spent %d in Redis, settled truth %d", seed, what, st.Owner, spent, truth)
			}
			if exists == 1 && reserved != want {
				t.Fatalf("seed %d after %s: %s reserved %d in Redis, model holds %d live", seed, what, st.Owner, reserved, want)
			}
			if exists == 1 && spent+reserved > limit+allow && reserved > 0 {
				t.Fatalf("seed %d after %s: %s spent %d + reserved %d past limit %d + allowance %d", seed, what, st.Owner, spent, reserved, limit, allow)
			}
		}
	}
	settle := func(h *modelHeld) {
		real := max(h.est+rng.Int64N(h.est+1)-h.est/2, 0)
		h.res.Settle(ctx, real)
		over := max(real-h.est, 0)
		truthTeam += real
		allowTeam += over
		led.add(search, real)
		if h.client {
			truthClient += real
			allowClient += over
			led.add(searchWeb, real)
		}
	}
	// dropped widens the allowance by the reservations a flush drops from
	// Redis while their requests run: others may be admitted in their
	// place, so their whole cost may come on top (their cost above the
	// estimate is counted when they settle).
	dropped := func(hs []*modelHeld) {
		for _, h := range hs {
			if h.inRedis && !h.degraded {
				allowTeam += h.est
				if h.client {
					allowClient += h.est
				}
			}
		}
	}
	// recover brings Redis back, empty when restarted (no persistence):
	// then the first engine back rebuilds the counters from the ledger
	// before the others replay the settles they kept, which the ledger
	// already holds.
	recover := func(restarted bool) {
		r.down.Store(false)
		down = false
		if restarted {
			r.flush(t)
			dropped(held)
			for _, h := range append(held, zombies...) {
				h.inRedis = h.degraded // those are registered again; the others are gone
			}
		}
		for _, h := range held {
			h.degraded = false
		}
		time.Sleep(probeEvery) // the engines ask again at most this often
		for i, e := range engines {
			_ = e.Snapshot(ctx)
			if i == 0 && restarted {
				res, err := e.Reserve(ctx, []Owner{searchWeb, search}, 0)
				if err != nil && !errors.As(err, new(*ExceededError)) {
					t.Fatalf("seed %d: reserve with Redis back empty: %v", seed, err)
				}
				if res != nil {
					res.Settle(ctx, 0)
				}
			}
		}
	}
	for steps = 0; steps < 80; steps++ {
		clk.advance(time.Millisecond)
		k := rng.IntN(11)
		if down && (k == 7 || k == 8) {
			k = 10 // neither a death nor a flush while Redis is away: the model cannot see Redis then
		}
		switch {
		case k < 4: // a burst of concurrent reserves
			burst := 1 + rng.IntN(6)
			type try struct {
				eng    int
				est    int64
				client bool
			}
			tries := make([]try, burst)
			for i := range tries {
				tries[i] = try{rng.IntN(n), 10_000 + rng.Int64N(400_000), rng.IntN(3) > 0}
			}
			out := make([]*modelHeld, burst)
			var wg sync.WaitGroup
			for i, tr := range tries {
				wg.Go(func() {
					owners := []Owner{{Client, "search-batch"}, search}
					if tr.client {
						owners[0] = searchWeb
					}
					res, err := engines[tr.eng].Reserve(ctx, owners, tr.est)
					if err != nil {
						if !errors.As(err, new(*ExceededError)) {
							t.Errorf("reserve: %v", err)
						}
						return
					}
					out[i] = &modelHeld{res: res, est: tr.est, eng: tr.eng, team: true, client: tr.client, madeAt: clk.now(),
						inRedis: true, degraded: down}
				})
			}
			wg.Wait()
			for _, h := range out {
				if h != nil {
					held = append(held, h)
					admitted++
				} else {
					refused++
				}
			}
			check("reserve")
		case k < 7: // settle some
			rest := held[:0]
			for _, h := range held {
				if rng.IntN(2) == 0 {
					settle(h)
				} else {
					rest = append(rest, h)
				}
			}
			held = rest
			check("settle")
		case k == 7: // a replica dies holding its reservations
			e := rng.IntN(n)
			rest := held[:0]
			for _, h := range held {
				if h.eng == e {
					zombies = append(zombies, h)
				} else {
					rest = append(rest, h)
				}
			}
			held = rest
			engines[e] = mk()
			check("death")
		case k == 8: // Redis loses every key; the ledger has the truth
			r.flush(t)
			dropped(held)
			for _, h := range append(held, zombies...) {
				h.inRedis = false
			}
			clk.advance(6 * time.Second) // past the recent-settle memory: the rebuild is the ledger's
			check("flush")
		case k == 9 && !down: // Redis stops answering
			// Every engine saw the figures just before, as under load:
			// the shares then sum to what remained.
			for _, e := range engines {
				_ = e.Snapshot(ctx)
			}
			r.down.Store(true)
			down = true
			outages++
			check("outage")
		case k == 9 || (k == 10 && down): // Redis answers again: each engine replays at its next call
			recover(rng.IntN(2) == 0)
			check("recovery")
		default:
			clk.advance(ttl + time.Second)
			check("expiry")
		}
	}
	if down {
		recover(false)
		check("recovery")
	}
	for _, h := range held {
		settle(h)
	}
	held = nil
	check("final settles")
	clk.advance(ttl + time.Second)
	check("final expiry")
	for _, st := range engines[0].Snapshot(ctx) {
		if st.ReservedUSD != 0 {
			t.Errorf("seed %d: %s %s still reserved %v after every settle and the TTL", seed, st.Owner, st.Per, st.ReservedUSD)
		}
	}
	t.Logf("seed %d: %d admitted, %d refused, %d outages; client settled %d of %d (allowed above: %d, the cost above estimates and the reservations flushes dropped), team %d of %d (%d)",
		seed, admitted, refused, outages, truthClient, clientLimit, allowClient, truthTeam, teamLimit, allowTeam)
}

// TestRaceOvershoot: 50 requests at once over 3 replicas against a budget
// of 5 requests' estimates. Settled at their estimate the budget is never
// passed; settled 30% above it the overshoot is exactly what the admitted
// requests cost above their estimates, nothing from racing for the last
// cent.
func TestRaceOvershoot(t *testing.T) {
	for _, tt := range []struct {
		name string
		real int64
	}{{"at estimate", 100_000}, {"30% above", 130_000}} {
		t.Run(tt.name, func(t *testing.T) {
			r := newTestRedis(t)
			ctx := context.Background()
			engines := make([]*Budgets, 3)
			for i := range engines {
				engines[i] = New(Options{Redis: r.Client, Namespace: r.ns})
				if err := engines[i].SetLimits(ctx, []Limit{{searchWeb, 0.5, Day}}); err != nil {
					t.Fatal(err)
				}
			}
			var admitted atomic.Int64
			var wg sync.WaitGroup
			start := make(chan struct{})
			for g := range 50 {
				wg.Go(func() {
					<-start
					res, err := engines[g%3].Reserve(ctx, []Owner{searchWeb}, 100_000)
					if err != nil {
						if !errors.As(err, new(*ExceededError)) {
							t.Error(err)
						}
						return
					}
					admitted.Add(1)
					time.Sleep(time.Millisecond)
					res.Settle(ctx, tt.real)
				})
			}
			close(start)
			wg.Wait()
			st := status(t, engines[0], searchWeb, Day)
			overshoot := st.SpentUSD - st.LimitUSD
			allowance := float64(admitted.Load()) * float64(tt.real-100_000) / 1e6
			t.Logf("%s: %d of 50 admitted, spent %.6f of %.6f USD, overshoot %.6f USD (allowed: cost above estimate %.6f)",
				tt.name, admitted.Load(), st.SpentUSD, st.LimitUSD, max(overshoot, 0), allowance)
			if admitted.Load() > 5 || st.SpentUSD > st.LimitUSD+allowance+1e-9 || st.ReservedUSD != 0 {
				t.Errorf("admitted %d, %+v", admitted.Load(), st)
			}
		})
	}
}

// TestRoundTrips: on the steady path a request costs Redis one call to
// reserve and one to settle, whatever the number of its budgets.
func TestRoundTrips(t *testing.T) {
	r := newTestRedis(t)
	ctx := context.Background()
	b := New(Options{Redis: r.Client, Namespace: r.ns})
	defer b.Close()
	if err := b.SetLimits(ctx, []Limit{{searchWeb, 100, Day}, {search, 1000, Month}, {search, 5000, Total}}); err != nil {
		t.Fatal(err)
	}
	warm, _ := b.Reserve(ctx, []Owner{searchWeb, search}, 1000) // loads the scripts
	warm.Settle(ctx, 1000)
	r.count.Store(0)
	res, err := b.Reserve(ctx, []Owner{searchWeb, search}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.count.Swap(0); got != 1 {
		t.Errorf("reserve: %d commands, want 1", got)
	}
	res.Settle(ctx, 900)
	if got := r.count.Load(); got != 1 {
		t.Errorf("settle: %d commands, want 1", got)
	}
	_, _ = res.Remaining()
	_, _ = b.Remaining([]Owner{searchWeb})
	if got := r.count.Load(); got != 1 {
		t.Errorf("Remaining reads Redis (%d commands): it should use the figures already seen", got-1)
	}
}

// BenchmarkReserveSettle: one request's budget path against the local
// Redis (client + team budgets), with the commands it costs.
func BenchmarkReserveSettle(b *testing.B) {
	r := newTestRedis(b)
	ctx := context.Background()
	e := New(Options{Redis: r.Client, Namespace: r.ns})
	defer e.Close()
	if err := e.SetLimits(ctx, []Limit{{searchWeb, 1e6, Day}, {search, 1e7, Month}}); err != nil {
		b.Fatal(err)
	}
	owners := []Owner{searchWeb, search}
	warm, _ := e.Reserve(ctx, owners, 10)
	warm.Settle(ctx, 10)
	r.count.Store(0)
	b.ResetTimer()
	for b.Loop() {
		res, err := e.Reserve(ctx, owners, 1000)
		if err != nil {
			b.Fatal(err)
		}
		res.Settle(ctx, 900)
	}
	b.ReportMetric(float64(r.count.Load())/float64(b.N), "cmds/op")
}
