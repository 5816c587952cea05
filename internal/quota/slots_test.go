package quota

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/admission"
)

func slots(limit int, ids ...string) []admission.SharedSlot {
	out := make([]admission.SharedSlot, len(ids))
	for i, id := range ids {
		out[i] = admission.SharedSlot{Gate: admission.TargetGate, ID: id, Limit: limit}
	}
	return out
}

// TestTakeGiveAcrossReplicas: two replicas share one limit; a slot given
// back on one wakes the other through pub/sub.
func TestTakeGiveAcrossReplicas(t *testing.T) {
	url, ns := redisURL(t), namespace(t)
	a := newStore(t, url, ns, "a", 5*time.Second)
	b := newStore(t, url, ns, "b", 5*time.Second)
	woke := make(chan string, 8)
	a.Start(Hooks{})
	b.Start(Hooks{Wake: func(gate, id string) { woke <- gate + "/" + id }})
	defer b.Close()
	defer a.Close()
	ctx := context.Background()

	h1, full, err := a.Take(ctx, slots(2, "t1"))
	if err != nil || h1 == 0 || full != -1 {
		t.Fatalf("first take: h=%d full=%d err=%v", h1, full, err)
	}
	h2, _, err := b.Take(ctx, slots(2, "t1"))
	if err != nil || h2 == 0 {
		t.Fatalf("second take: h=%d err=%v", h2, err)
	}
	// Several gates at once: t2 has room, t1 does not, so nothing is taken.
	h3, full, err := b.Take(ctx, slots(2, "t2", "t1"))
	if err != nil || h3 != 0 || full != 1 {
		t.Fatalf("take over the limit: h=%d full=%d err=%v, want refused on index 1", h3, full, err)
	}
	if got := slotCounts(t, url, ns); got[ns+":{q}:slots:"+admission.TargetGate+":t1"] != 2 || len(got) != 1 {
		t.Fatalf("redis after refusal: %v, want only t1 with 2", got)
	}
	time.Sleep(100 * time.Millisecond) // let the subscription settle before the release
	a.Give(h1)
	select {
	case w := <-woke:
		if w != admission.TargetGate+"/t1" {
			t.Fatalf("woke %q", w)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no wake on b after a gave its slot back")
	}
	h4, _, err := b.Take(ctx, slots(2, "t1"))
	if err != nil || h4 == 0 {
		t.Fatalf("take after release: h=%d err=%v", h4, err)
	}
	b.Give(h2)
	b.Give(h4)
	waitEmpty(t, url, ns, 2*time.Second)
}

// TestDeadReplicaLeasesExpire: a replica that dies holding every slot
// loses them within the TTL.
func TestDeadReplicaLeasesExpire(t *testing.T) {
	url, ns := redisURL(t), namespace(t)
	const ttl = 600 * time.Millisecond
	a := newStore(t, url, ns, "a", ttl)
	b := newStore(t, url, ns, "b", ttl)
	a.Start(Hooks{})
	b.Start(Hooks{})
	defer b.Close()
	ctx := context.Background()
	for range 3 {
		if h, _, err := a.Take(ctx, slots(3, "t")); h == 0 || err != nil {
			t.Fatalf("take: %d %v", h, err)
		}
	}
	// Renewals keep a's slots past the TTL while a lives.
	time.Sleep(2 * ttl)
	if h, full, _ := b.Take(ctx, slots(3, "t")); h != 0 || full != 0 {
		t.Fatal("b took a slot while a held all of them (renewal failed?)")
	}
	a.kill()
	died := time.Now()
	for {
		h, _, err := b.Take(ctx, slots(3, "t"))
		if err != nil {
			t.Fatal(err)
		}
		if h != 0 {
			b.Give(h)
			break
		}
		if time.Since(died) > ttl+time.Second {
			t.Fatalf("no slot %s after the holder died (ttl %s)", time.Since(died), ttl)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if d := time.Since(died); d > ttl+time.Second {
		t.Fatalf("slot came back after %s", d)
	}
	waitEmpty(t, url, ns, 2*ttl)
}

// TestCallerGivesUp: a Take whose context ends is not an outage.
func TestCallerGivesUp(t *testing.T) {
	url, ns := redisURL(t), namespace(t)
	a := newStore(t, url, ns, "a", time.Second)
	a.Start(Hooks{})
	defer a.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	h, _, err := a.Take(ctx, slots(1, "t"))
	if h != 0 || !errors.Is(err, context.Canceled) || errors.Is(err, admission.ErrSharedUnavailable) {
		t.Fatalf("take with a dead context: h=%d err=%v", h, err)
	}
	if a.Degraded() {
		t.Fatal("a cancelled caller made the store degraded")
	}
	waitEmpty(t, url, ns, time.Second)
}

// TestSchedulersShareLimit: three schedulers on one store each (three
// replicas in one process) never run more than the limit at once, and
// everything ends released, locally and in Redis.
func TestSchedulersShareLimit(t *testing.T) {
	url, ns := redisURL(t), namespace(t)
	const limit, perReplica = 4, 12
	var (
		mu           sync.Mutex
		active, peak int
		wg           sync.WaitGroup
		scheds       []*admission.Scheduler
		stores       []*Store
	)
	for i := range 3 {
		st := newStore(t, url, ns, string(rune('a'+i)), 5*time.Second)
		sc := admission.New(admission.Config{GlobalLimit: 64, Shared: st, SharedRetry: 20 * time.Millisecond})
		st.Start(Hooks{Share: sc.SetShare, Wake: sc.WakeShared})
		scheds, stores = append(scheds, sc), append(stores, st)
	}
	dim := []admission.Dimension{{Gate: admission.TargetGate, ID: "p", Label: "p", Limit: limit}}
	errs := make(chan error, 3*perReplica)
	for _, sc := range scheds {
		for range perReplica {
			wg.Go(func() {
				l, err := sc.Acquire(context.Background(), admission.Request{Budget: 20 * time.Second, Dimensions: dim})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				active++
				peak = max(peak, active)
				mu.Unlock()
				time.Sleep(30 * time.Millisecond)
				mu.Lock()
				active--
				mu.Unlock()
				l.Release()
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("acquire: %v", err)
	}
	if peak > limit || peak < limit-1 {
		t.Errorf("peak %d across replicas, want %d (at least %d)", peak, limit, limit-1)
	}
	for i, sc := range scheds {
		if !sc.Idle() {
			t.Errorf("scheduler %d not idle", i)
		}
		_ = sc.Close(context.Background())
		stores[i].Close()
	}
	waitEmpty(t, url, ns, time.Second)
}

// waitEmpty waits until no unexpired lease is left in ns.
func waitEmpty(t *testing.T, url, ns string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := slotCounts(t, url, ns)
		if len(got) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("leases left in redis: %v", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
