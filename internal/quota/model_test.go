package quota

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/admission"
)

// TestLeaseModel drives the lease protocol against a real Redis with random
// takes, gives, renewals (the stores' own loop), replica deaths and new
// replicas, and checks it against a model after every step:
//
//   - never more live slots than the limit: a take succeeds only when the
//     slots held by live replicas leave room;
//   - no false refusal: a take is refused only when live slots plus slots of
//     dead replicas that may not have expired yet fill the gate;
//   - Redis holds at least the live replicas' slots (renewal works) and at
//     most those plus the dead ones' not yet expired;
//   - at the end, once everything is given back and the dead replicas'
//     TTL has passed, no lease is left.
func TestLeaseModel(t *testing.T) {
	url := redisURL(t)
	seeds := 6
	if testing.Short() {
		seeds = 2
	}
	for seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			runLeaseModel(t, url, uint64(seed), 250)
		})
	}
}

type modelLease struct {
	h     admission.SharedHandle
	gates []int
}

type modelReplica struct {
	st   *Store
	held []modelLease
}

type deadLease struct {
	gates []int
	until time.Time // it may live in Redis until then
}

func runLeaseModel(t *testing.T, url string, seed uint64, steps int) {
	const ttl = 900 * time.Millisecond
	// Slack for the time between our clock reading and Redis's.
	const slack = 150 * time.Millisecond
	rng := rand.New(rand.NewPCG(seed, 7))
	ns := namespace(t)
	limits := []int{1, 2, 3}
	ctx := context.Background()
	var (
		alive   []*modelReplica
		dead    []deadLease
		started int
	)
	spawn := func() {
		started++
		st := newStore(t, url, ns, fmt.Sprintf("r%d", started), ttl)
		st.Start(Hooks{})
		alive = append(alive, &modelReplica{st: st})
	}
	for range 3 {
		spawn()
	}
	count := func(gate int) (live, maybeDead int) {
		for _, r := range alive {
			for _, l := range r.held {
				for _, g := range l.gates {
					if g == gate {
						live++
					}
				}
			}
		}
		now := time.Now()
		for _, d := range dead {
			if now.Before(d.until.Add(slack)) {
				for _, g := range d.gates {
					if g == gate {
						maybeDead++
					}
				}
			}
		}
		return live, maybeDead
	}
	key := func(g int) string { return ns + ":{q}:slots:" + admission.TargetGate + ":" + fmt.Sprint("g", g) }

	for step := range steps {
		r := alive[rng.IntN(len(alive))]
		switch op := rng.IntN(100); {
		case op < 45: // take one or two gates at once
			gates := []int{rng.IntN(len(limits))}
			if rng.IntN(3) == 0 {
				if g := rng.IntN(len(limits)); g != gates[0] {
					gates = append(gates, g)
				}
			}
			sl := make([]admission.SharedSlot, len(gates))
			for i, g := range gates {
				sl[i] = admission.SharedSlot{Gate: admission.TargetGate, ID: fmt.Sprint("g", g), Limit: limits[g]}
			}
			h, full, err := r.st.Take(ctx, sl)
			if err != nil {
				t.Fatalf("step %d: take: %v", step, err)
			}
			if h != 0 {
				for _, g := range gates {
					if live, _ := count(g); live+1 > limits[g] {
						t.Fatalf("step %d: took g%d with %d live slots held, limit %d", step, g, live, limits[g])
					}
				}
				r.held = append(r.held, modelLease{h: h, gates: gates})
			} else {
				g := gates[full]
				if live, maybe := count(g); live+maybe < limits[g] {
					t.Fatalf("step %d: refused g%d with %d live and at most %d dead slots, limit %d", step, g, live, maybe, limits[g])
				}
			}
		case op < 80: // give one back
			if len(r.held) == 0 {
				continue
			}
			i := rng.IntN(len(r.held))
			r.st.Give(r.held[i].h)
			r.held = append(r.held[:i], r.held[i+1:]...)
			r.st.settled()
		case op < 84: // a replica dies holding what it holds
			if len(alive) < 2 {
				continue
			}
			r.st.kill()
			for _, l := range r.held {
				dead = append(dead, deadLease{gates: l.gates, until: time.Now().Add(ttl)})
			}
			for i, x := range alive {
				if x == r {
					alive = append(alive[:i], alive[i+1:]...)
					break
				}
			}
		case op < 88: // a new replica joins
			if len(alive) < 4 {
				spawn()
			}
		default: // time passes: renewals and expiries happen
			time.Sleep(time.Duration(rng.IntN(60)) * time.Millisecond)
		}
		if step%10 == 0 {
			got := slotCounts(t, url, ns)
			for g := range limits {
				live, maybe := count(g)
				if n := got[key(g)]; n < live || n > live+maybe {
					t.Fatalf("step %d: redis holds %d slots of g%d, model says %d live and up to %d dead", step, n, g, live, maybe)
				}
			}
		}
	}
	for _, r := range alive {
		for _, l := range r.held {
			r.st.Give(l.h)
		}
		r.st.Close()
	}
	waitEmpty(t, url, ns, ttl+time.Second)
}
