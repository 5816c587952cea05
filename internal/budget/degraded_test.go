package budget

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestDegradedClosedPort: a replica whose Redis never answers (a closed
// port) is neither unlimited nor refusing everything: it enforces its
// share of what the ledger says is left, and decides fast.
func TestDegradedClosedPort(t *testing.T) {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	defer rdb.Close()
	led := newLedger()
	led.add(searchWeb, 400_000)
	b := New(Options{Redis: rdb, Namespace: "closed", Ledger: led, Replicas: replicas(2)})
	defer b.Close()
	_ = b.SetLimits(ctx, []Limit{{searchWeb, 1, Day}}) // the seed fails: degraded from the start
	start := time.Now()
	r, err := b.Reserve(ctx, []Owner{searchWeb}, 300_000) // share: (1 - 0.4) / 2
	if err != nil {
		t.Fatalf("reserve within the share: %v", err)
	}
	if _, err := b.Reserve(ctx, []Owner{searchWeb}, 1); !errors.As(err, new(*ExceededError)) {
		t.Errorf("reserve past the share: %v, want refused", err)
	}
	r.Settle(ctx, 100_000)
	r2, err := b.Reserve(ctx, []Owner{searchWeb}, 200_000)
	if err != nil {
		t.Errorf("the share's rest after a cheaper settle: %v", err)
	} else {
		r2.Settle(ctx, 200_000)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("degraded decisions took %s", d)
	}
	if st := b.Snapshot(ctx); len(st) != 1 || !st[0].Degraded {
		t.Errorf("snapshot %+v, want one degraded budget", st)
	}
}

// TestDegradedAndRecovery: Redis stops answering mid-flight; the replica
// enforces (limit - spent - reserved as last seen) / replicas; when Redis
// answers again every cost settled meanwhile reaches it exactly once, the
// reservation made before the outage included, and none is left held.
func TestDegradedAndRecovery(t *testing.T) {
	r := newTestRedis(t)
	ctx := context.Background()
	b := New(Options{Redis: r.Client, Namespace: r.ns, Replicas: replicas(2), Ledger: newLedger()})
	defer b.Close()
	if err := b.SetLimits(ctx, []Limit{{searchWeb, 1, Day}}); err != nil {
		t.Fatal(err)
	}
	first, _ := b.Reserve(ctx, []Owner{searchWeb}, 200_000)
	first.Settle(ctx, 200_000)
	before, err := b.Reserve(ctx, []Owner{searchWeb}, 100_000) // held across the outage
	if err != nil {
		t.Fatal(err)
	}

	r.down.Store(true)
	during, err := b.Reserve(ctx, []Owner{searchWeb}, 350_000) // share (1 - 0.2 - 0.1) / 2
	if err != nil {
		t.Fatalf("reserve of the whole share: %v", err)
	}
	var ex *ExceededError
	if _, err := b.Reserve(ctx, []Owner{searchWeb}, 1); !errors.As(err, &ex) || ex.Remaining != 0 {
		t.Fatalf("past the share: %v, want refused with nothing left", err)
	}
	during.Settle(ctx, 300_000)
	before.Settle(ctx, 100_000)
	// The share's 0.35 holds the settled 0.3 and the earlier reservation's
	// 0.1 (it was inside the figures the share came from): nothing left.
	if _, err := b.Reserve(ctx, []Owner{searchWeb}, 1); err == nil {
		t.Error("past the share after settles: admitted")
	}

	r.down.Store(false)
	time.Sleep(probeEvery + 50*time.Millisecond)
	after, err := b.Reserve(ctx, []Owner{searchWeb}, 300_000)
	if err != nil {
		t.Fatalf("after recovery, the shared rest (0.4): %v", err)
	}
	if b.degraded.Load() {
		t.Fatal("still degraded after Redis answered")
	}
	after.Settle(ctx, 0)
	st := status(t, b, searchWeb, Day)
	if st.SpentUSD != 0.6 || st.ReservedUSD != 0 || st.Degraded {
		t.Errorf("after recovery: %+v, want spent 0.6 (each outage settle once), nothing reserved", st)
	}
}

// TestDegradedProbeAsksRedis: a replica on its share with nothing to
// replay stays on that share while Redis is still away: its probe asks
// Redis rather than assume it is back (a new share at the next failure,
// from the same old figures, would let it spend its share again at every
// probe). When Redis answers, the reservation it still holds is put in
// Redis, so another replica counts it.
func TestDegradedProbeAsksRedis(t *testing.T) {
	r := newTestRedis(t)
	ctx := context.Background()
	b := New(Options{Redis: r.Client, Namespace: r.ns, Replicas: replicas(2), Ledger: newLedger(), LedgerLag: -1})
	defer b.Close()
	if err := b.SetLimits(ctx, []Limit{{searchWeb, 1, Day}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Reserve(ctx, []Owner{searchWeb}, 0); err != nil { // the figures seen: nothing spent
		t.Fatal(err)
	}
	r.down.Store(true)
	held, err := b.Reserve(ctx, []Owner{searchWeb}, 500_000) // the whole share, 1 / 2
	if err != nil {
		t.Fatalf("reserve of the share: %v", err)
	}
	for range 3 {
		time.Sleep(probeEvery + 20*time.Millisecond)
		if _, err := b.Reserve(ctx, []Owner{searchWeb}, 400_000); err == nil {
			t.Fatal("a probe with Redis still away gave the replica a new share")
		}
	}

	r.down.Store(false)
	time.Sleep(probeEvery + 20*time.Millisecond)
	other := New(Options{Redis: r.Client, Namespace: r.ns, Ledger: newLedger(), LedgerLag: -1})
	defer other.Close()
	if err := other.SetLimits(ctx, []Limit{{searchWeb, 1, Day}}); err != nil {
		t.Fatal(err)
	}
	_ = b.Snapshot(ctx) // the held replica's probe: back, and its reservation registered
	if b.degraded.Load() {
		t.Fatal("still degraded with Redis back")
	}
	if _, err := other.Reserve(ctx, []Owner{searchWeb}, 600_000); err == nil {
		t.Error("another replica admitted 0.6 while 0.5 of the 1 is held by a reservation made during the outage")
	}
	held.Settle(ctx, 500_000)
	if st := status(t, other, searchWeb, Day); st.SpentUSD != 0.5 || st.ReservedUSD != 0 {
		t.Errorf("after the settle: %+v, want spent 0.5 and nothing reserved", st)
	}
}
