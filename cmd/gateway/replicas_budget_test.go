package main

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// The budget tests of several replicas (docs/cost.md, "Budgets", "Shared
// by replicas", "The ledger is the truth", "Redis away"): real gateway
// binaries, a private redis-server each, one Postgres database as the
// ledger, and a mock provider whose usage, and so every request's cost,
// is known (replicas_budget_helpers_test.go).

const (
	exactToken = "budget-exact-SENTINEL-token"
	underToken = "budget-under-SENTINEL-token"
)

// TestBudgetRaceAcrossReplicas: 50 requests at once over 3 replicas, for
// each of two clients whose daily budget fits about 5 of them. Every
// budgetAnswer is a 200 or the documented refusal, refused requests reach no
// provider and leave no record, and the spend the ledger holds stays
// within the limit plus what the admitted requests cost above their
// estimate:
//   - "exact" asks for more output than the mock gives (its estimate is
//     above its cost): the ledger never passes the limit, however the
//     requests race;
//   - "under" asks for less (each request costs 3000 micro-dollars above
//     its estimate): the overshoot is at most those requests' excess,
//     nothing from racing for the last cent.
//
// Neither is refused early: a refusal means the admitted requests'
// reservations (or costs) left no room for one more.
func TestBudgetRaceAcrossReplicas(t *testing.T) {
	t.Parallel()
	const (
		limit = 40_000 // micro-dollars: 0.04 USD, five requests' cost
		n     = 50
	)
	// The mock holds every budgetAnswer long enough for all 50 to reserve
	// before the first settles: the race is real.
	f := startBudgetFleet(t, 3, mockupstream.Behavior{Identity: "p", Latency: 300 * time.Millisecond},
		[]replicaClient{budgetClient("exact", exactToken, 0.04), budgetClient("under", underToken, 0.04)})

	type client struct {
		name, token string
		maxTokens   int
	}
	clients := []client{{"exact", exactToken, budgetChunks + 2}, {"under", underToken, budgetChunks - 3}}
	answers := make([][]budgetAnswer, len(clients))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for c, cl := range clients {
		answers[c] = make([]budgetAnswer, n)
		body := budgetBody(cl.maxTokens)
		for i := range n {
			wg.Go(func() {
				<-start
				answers[c][i] = f.post(i, cl.token, body)
			})
		}
	}
	close(start)
	wg.Wait()

	served := 0
	for c, cl := range clients {
		ok, refused := okCount(t, answers[c], cl.name)
		served += ok
		est := estimateMicros(budgetBody(cl.maxTokens), cl.maxTokens)
		costs, spent := f.ledgerOf(cl.name, ok)
		var excess, largest, dearest int64 // the admitted requests' cost above their estimate; the largest one; the dearest cost
		for _, c := range costs {
			excess += max(c-est, 0)
			largest = max(largest, c-est)
			dearest = max(dearest, c)
		}
		t.Logf("%s: %d of %d admitted (estimate %s USD, cost %s each), %d refused; ledger %s USD of %s: overshoot %s USD "+
			"(bound: admitted requests' cost above estimate %s; largest single underestimate %s)",
			cl.name, ok, n, usd(est), usd(dearest), refused, usd(spent), usd(limit), usd(max(spent-limit, 0)), usd(excess), usd(largest))
		if spent > limit+excess {
			t.Errorf("%s: the ledger holds %s USD, past the limit %s plus the admitted requests' cost above their estimate %s",
				cl.name, usd(spent), usd(limit), usd(excess))
		}
		if ok == 0 || refused == 0 {
			t.Fatalf("%s: %d admitted, %d refused: the budget should admit some and refuse the rest", cl.name, ok, refused)
		}
		// A refusal found spent + reserved + estimate > limit, and each
		// admitted request counted at most max(estimate, cost) then.
		if int64(ok)*max(est, dearest)+est <= limit {
			t.Errorf("%s: refused after only %d admitted (estimate %s, cost %s, limit %s): refused early",
				cl.name, ok, usd(est), usd(dearest), usd(limit))
		}
		for _, a := range answers[c] {
			if a.code == http.StatusOK && (a.remaining == "" || trimUSD(t, a.remaining) < 0) {
				t.Errorf("%s: an budgetAnswer with x-gateway-budget-remaining-usd %q", cl.name, a.remaining)
			}
		}
		// Every replica reads the same figures from Redis: the ledger's
		// spend, nothing left reserved.
		for _, r := range f.rs {
			b := budgetOf(t, r, cl.name)
			if micros(b.SpentUSD) != spent || b.ReservedUSD != 0 || micros(b.RemainingUSD) != max(limit-spent, 0) || b.Degraded {
				t.Errorf("%s on %s: /admin/budgets %+v, want spent %s (the ledger), nothing reserved, remaining %s",
					cl.name, r.id, b, usd(spent), usd(max(limit-spent, 0)))
			}
		}
	}
	if got := f.mock.served.Load(); got != int64(served) {
		t.Errorf("the provider served %d requests, %d were admitted: refused requests reached it", got, served)
	}
}

const steadyToken = "budget-steady-SENTINEL-token"

// TestBudgetSurvivesRestarts: a client spends its daily budget until it is
// refused; every replica restarts (a deploy, Redis kept), then every
// replica and Redis restart (Redis comes back empty). Each time the spend
// is still counted: the client is still refused before reaching the
// provider, and /admin/budgets shows the same spent and remaining on every
// replica, the ledger's.
func TestBudgetSurvivesRestarts(t *testing.T) {
	t.Parallel()
	const limit = 50_000
	f := startBudgetFleet(t, 2, mockupstream.Behavior{Identity: "p"},
		[]replicaClient{budgetClient("steady", steadyToken, 0.05)})
	body := budgetBody(budgetChunks)
	ok := 0
	for i := 0; ; i++ {
		a := f.post(i, steadyToken, body)
		if a.code != http.StatusOK {
			refusedForBudget(t, "the request past the budget", a, "steady")
			break
		}
		ok++
		if ok > 10 {
			t.Fatalf("%d requests of about 8000 micro-dollars admitted on a budget of %s", ok, usd(limit))
		}
	}
	_, spent := f.ledgerOf("steady", ok)
	if spent > limit {
		t.Fatalf("the ledger holds %s USD of a %s budget", usd(spent), usd(limit))
	}
	check := func(when string) {
		t.Helper()
		for _, r := range f.rs {
			b := budgetOf(t, r, "steady")
			if micros(b.SpentUSD) != spent || micros(b.RemainingUSD) != limit-spent || b.ReservedUSD != 0 {
				t.Errorf("%s, %s: /admin/budgets %+v, want spent %s and remaining %s (the ledger's)",
					when, r.id, b, usd(spent), usd(limit-spent))
			}
		}
		before := f.mock.served.Load()
		for i := range f.rs {
			refusedForBudget(t, when+", request on r"+string(rune('0'+i)), f.post(i, steadyToken, body), "steady")
		}
		if got := f.mock.served.Load(); got != before {
			t.Errorf("%s: %d refused requests reached the provider", when, got-before)
		}
	}
	check("before the restarts")

	f.stopAll()
	f.startAll()
	check("every replica restarted")

	// The whole fleet down, Redis too, and up again: the spend is the
	// ledger's, rebuilt at start.
	f.stopAll()
	f.red.stop()
	f.red.start(t)
	f.startAll()
	check("every replica and Redis restarted")
}

const flushToken = "budget-flush-SENTINEL-token"

// TestBudgetFlushUnderLoad: Redis loses every key (FLUSHALL) while a
// client spends its budget through 3 replicas. The spend is rebuilt from
// the ledger before the next decision: no request is admitted when the
// requests the ledger already held left no room for it, the ledger's total
// stays within the limit plus what the flush dropped (the reservations in
// flight then), and once the load is over /admin/budgets on every replica
// shows the ledger's spend.
func TestBudgetFlushUnderLoad(t *testing.T) {
	t.Parallel()
	const (
		limit   = 300_000
		workers = 6
	)
	f := startBudgetFleet(t, 3, mockupstream.Behavior{Identity: "p", Latency: 40 * time.Millisecond},
		[]replicaClient{budgetClient("flushy", flushToken, 0.3)})
	rdb := redisAt(t, f.red.url())
	body := budgetBody(budgetChunks + 1)
	est := estimateMicros(body, budgetChunks+1)

	var mu sync.Mutex
	var answers []budgetAnswer
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := 0; ; i++ {
				a := f.post(w+i, flushToken, body)
				mu.Lock()
				answers = append(answers, a)
				mu.Unlock()
				if a.code != http.StatusOK {
					return
				}
				admitted.Add(1)
			}
		})
	}
	// A third of the budget spent, then Redis forgets it all.
	if !waitUntil(10*time.Second, func() bool { return admitted.Load() >= limit/3/est }) {
		t.Fatalf("only %d requests admitted", admitted.Load())
	}
	if err := rdb.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	atFlush := admitted.Load()
	wg.Wait()
	ok, refused := okCount(t, answers, "flushy")
	_, spent := f.ledgerOf("flushy", ok)
	rows := f.ledger("flushy")
	t.Logf("%d admitted (%d before the flush), %d refused; ledger %s USD of %s (overshoot %s)",
		ok, atFlush, refused, usd(spent), usd(limit), usd(max(spent-limit, 0)))
	// The flush dropped the reservations of the requests in flight then
	// (at most one per worker); without it the ledger would stay within
	// the limit, every estimate being above its cost.
	if bound := limit + workers*est; spent > bound {
		t.Errorf("the ledger holds %s USD: past the limit %s plus the reservations the flush dropped (%d × %s)",
			usd(spent), usd(limit), workers, usd(est))
	}
	// No admission the ledger could refuse: what had finished half a
	// second before a request came (in the ledger by then: it lags by
	// about two flush intervals of 100 ms) left room for its estimate.
	for _, r := range rows {
		var before int64
		for _, o := range rows {
			if o.finished.Before(r.created.Add(-500 * time.Millisecond)) {
				before += micros(o.cost)
			}
		}
		if before+est > limit {
			t.Errorf("a request admitted at %s when the ledger held %s USD finished before it: no room for its estimate %s in %s",
				r.created.Format(time.StampMicro), usd(before), usd(est), usd(limit))
		}
	}
	for _, r := range f.rs {
		if b := budgetOf(t, r, "flushy"); micros(b.SpentUSD) != spent || b.ReservedUSD != 0 {
			t.Errorf("%s: /admin/budgets spent %v reserved %v after the load, want the ledger's %s and none",
				r.id, b.SpentUSD, b.ReservedUSD, usd(spent))
		}
	}
}

const awayToken = "budget-away-SENTINEL-token"

// TestBudgetRedisOutage: Redis dies (SIGKILL) after a client spent part of
// its budget through 3 replicas that see each other. While it is away each
// replica enforces its share of what remained (a third): it admits while
// its share lasts and refuses past it (never unlimited, never refusing
// everything), so the fleet's spend stays within the limit. Redis comes
// back empty: the spend is rebuilt from the ledger and the settles made
// meanwhile, the replicas share the budget again and /admin/budgets shows
// the ledger's spend on each.
func TestBudgetRedisOutage(t *testing.T) {
	t.Parallel()
	// Six requests before the outage, then a share each of ten requests'
	// cost (8019) and 5400 more: too little for another estimate (9018)
	// on any one replica, enough for one when Redis pools them again.
	const limit = 6*8019 + 3*(10*8019+5400)
	f := startBudgetFleet(t, 3, mockupstream.Behavior{Identity: "p", Latency: 20 * time.Millisecond},
		[]replicaClient{budgetClient("away", awayToken, float64(limit)/1e6)})
	body := budgetBody(budgetChunks + 1)
	est := estimateMicros(body, budgetChunks+1)
	for i := range 6 {
		if a := f.post(i, awayToken, body); a.code != http.StatusOK {
			t.Fatalf("request %d before the outage: %d %s", i, a.code, a.body)
		}
	}
	_, before := f.ledgerOf("away", 6)
	// Each replica has seen the figures since the last request (as under
	// load): each share is then a third of what remains.
	for _, r := range f.rs {
		if b := budgetOf(t, r, "away"); micros(b.SpentUSD) != before {
			t.Fatalf("%s: /admin/budgets spent %v before the outage, want the ledger's %s", r.id, b.SpentUSD, usd(before))
		}
	}

	f.red.stop()
	for _, r := range f.rs {
		if !waitUntil(3*time.Second, func() bool { return r.quotaState(t) == "degraded" }) {
			t.Fatalf("replica %s: /readyz quota %q with Redis killed, want degraded", r.id, r.quotaState(t))
		}
	}
	// Two workers per replica, each until its replica refuses.
	var mu sync.Mutex
	perReplica := make([][]budgetAnswer, len(f.rs))
	var wg sync.WaitGroup
	for w := range 2 * len(f.rs) {
		wg.Go(func() {
			for {
				a := f.post(w, awayToken, body)
				mu.Lock()
				perReplica[w%len(f.rs)] = append(perReplica[w%len(f.rs)], a)
				mu.Unlock()
				if a.code != http.StatusOK {
					return
				}
			}
		})
	}
	wg.Wait()
	admitted := 6
	share := (limit - before) / int64(len(f.rs))
	for i, answers := range perReplica {
		ok, refused := okCount(t, answers, "away")
		admitted += ok
		t.Logf("replica r%d during the outage: %d admitted, %d refused (its share %s USD, estimate %s)", i, ok, refused, usd(share), usd(est))
		// Its share admits share/est requests at least (each is settled
		// below its estimate), and refuses once it is used up.
		if int64(ok) < share/est || refused == 0 {
			t.Errorf("replica r%d: %d admitted and %d refused on a share of %s at %s each", i, ok, refused, usd(share), usd(est))
		}
	}
	_, spent := f.ledgerOf("away", admitted)
	t.Logf("ledger %s USD of %s after the outage (%s before it)", usd(spent), usd(limit), usd(before))
	if spent > limit {
		t.Errorf("the ledger holds %s USD, past the limit %s: the shares overlapped", usd(spent), usd(limit))
	}

	// Redis back, empty: the first request of each replica finds it,
	// replays what it settled meanwhile and rebuilds the spend.
	f.red.start(t)
	for _, r := range f.rs {
		if !waitUntil(3*time.Second, func() bool { return r.quotaState(t) == "shared" }) {
			t.Fatalf("replica %s: /readyz quota %q with Redis back, want shared", r.id, r.quotaState(t))
		}
	}
	// Every replica shows the ledger's spend, rebuilt, and is not
	// degraded: it asks Redis again at most every 250 ms, reading
	// /admin/budgets included.
	sharedAgain := func(when string) {
		t.Helper()
		for _, r := range f.rs {
			var b budgetView
			if !waitUntil(3*time.Second, func() bool {
				b = budgetOf(t, r, "away")
				return micros(b.SpentUSD) == spent && b.ReservedUSD == 0 && !b.Degraded
			}) {
				t.Errorf("%s, %s: /admin/budgets %+v, want spent %s (the ledger's), nothing reserved, not degraded",
					when, r.id, b, usd(spent))
			}
		}
	}
	sharedAgain("Redis back")
	// The budget is one again: the remainders of the three shares, each
	// too small for a request, together admit one.
	remaining := limit - spent
	more := 0
	for i := 0; ; i++ {
		a := f.post(i, awayToken, body)
		if a.code != http.StatusOK {
			refusedForBudget(t, "a request with Redis back", a, "away")
			break
		}
		more++
		if more > 20 {
			t.Fatal("unlimited with Redis back")
		}
	}
	_, spent = f.ledgerOf("away", admitted+more)
	t.Logf("with Redis back: %d more admitted on the %s USD left", more, usd(remaining))
	if remaining < est || more == 0 || limit-spent >= est || spent > limit {
		t.Errorf("with Redis back, %d admitted on %s USD left at %s each, then refused with %s left; ledger %s of %s",
			more, usd(remaining), usd(est), usd(limit-spent), usd(spent), usd(limit))
	}
	sharedAgain("after the requests with Redis back")
}
