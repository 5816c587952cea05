package candidates

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/health"
	"github.com/llmgw/gateway/internal/report"
	"github.com/llmgw/gateway/internal/routes"
	"github.com/llmgw/gateway/internal/upstream"
	"github.com/llmgw/gateway/internal/watchdog"
)

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

// AfterFunc runs on real time: the tests that use fakeClock move it for
// cooldowns and latency staleness, and let hedge delays and commit holds run.
func (c *fakeClock) AfterFunc(d time.Duration, f func()) watchdog.Timer { return time.AfterFunc(d, f) }
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// scripted fails attempts on the providers it names with the given error and
// lets the others succeed; it counts attempts per provider.
type scripted struct {
	fail  map[string]error
	tries map[string]int
}

// sender is the Sender of one provider of a scripted upstream.
type sender struct {
	s    *scripted
	name string
}

func (p sender) Send(ctx context.Context, call *upstream.Call) (*http.Response, error) {
	p.s.tries[p.name]++
	if err := p.s.fail[p.name]; err != nil {
		return nil, err
	}
	return succeed{}.Send(ctx, call)
}

func (s *scripted) senders(names ...string) map[string]Sender {
	m := map[string]Sender{}
	for _, n := range names {
		m[n] = sender{s, n}
	}
	return m
}

// healthRoutes counts every failure once: no retry of the same candidate
// (retry_test.go covers those).
const healthRoutes = `
providers:
  - { name: a, base_url: "http://a.example/v1", api_keys: [ka], max_concurrency: 4, health: { failures: 2, cooldown: 10s }, retry: { attempts: 0 } }
  - { name: b, base_url: "http://b.example/v1", api_keys: [kb], max_concurrency: 4, health: { failures: 2, cooldown: 20s }, retry: { attempts: 0 } }
models:
  - name: m
    candidates: [ { provider: a, priority: 0 }, { provider: b, priority: 1 } ]
`

// healthRig is a planner and runner sharing one health tracker on a fake clock.
type healthRig struct {
	clock   *fakeClock
	tracker *health.Tracker
	plan    *Planner
	run     *Runner
	sched   *admission.Scheduler
}

func newHealthRig(t *testing.T, src string) *healthRig {
	t.Helper()
	r, err := routes.Parse([]byte(src), env(map[string]string{}))
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	seed := uint64(1)
	tracker := health.NewTracker(clock, nil)
	p, err := NewPlanner(r, PlannerOptions{Seed: &seed, Health: tracker})
	if err != nil {
		t.Fatal(err)
	}
	sched := admission.New(admission.Config{GlobalLimit: 8})
	t.Cleanup(func() { _ = sched.Close(context.Background()) })
	return &healthRig{clock: clock, tracker: tracker, plan: p, sched: sched,
		run: &Runner{Admit: sched, Record: &ledger{cands: map[int]report.Candidate{}}, Clock: clock}}
}

// entry returns the health of provider's first key for route m's model.
func (h *healthRig) entry(t *testing.T, provider string) *health.Entry {
	t.Helper()
	plan, err := h.plan.Plan("m")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range plan {
		if c.Provider().Name == provider {
			return c.Health
		}
	}
	t.Fatalf("no candidate of %s", provider)
	return nil
}

// do runs one request and returns its candidate rows as status(/skip reason).
func (h *healthRig) do(t *testing.T, ex *scripted) []string {
	t.Helper()
	plan, err := h.plan.Plan("m")
	if err != nil {
		t.Fatal(err)
	}
	l := &ledger{cands: map[int]report.Candidate{}}
	h.run.Record = l
	h.run.Upstreams = ex.senders("a", "b")
	runAll(h.run, &Request{ID: uuid.New(), Model: "m", Priority: admission.Interactive,
		Received: h.clock.Now(), Candidates: plan, Exchange: chatOf("m")})
	var rows []string
	for i := range plan {
		c := l.cands[i]
		s := c.Provider + ":" + c.Status
		if c.SkipReason != "" {
			s += "/" + c.SkipReason
		}
		rows = append(rows, s)
	}
	return rows
}

func wantRowsEq(t *testing.T, step string, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("%s: rows %v, want %v", step, got, want)
	}
}

// TestLoopSkipsCoolingTargets: after `failures` provider failures the target
// is skipped (cooling_down) without an attempt; when every candidate cools,
// the one whose cooldown ends first is still tried; after the cooldown one
// probe heals it.
func TestLoopSkipsCoolingTargets(t *testing.T) {
	h := newHealthRig(t, healthRoutes)
	down := &upstream.ConnectError{Provider: "a", Err: errors.New("refused")}
	ex := &scripted{fail: map[string]error{"a": down}, tries: map[string]int{}}
	for range 2 {
		wantRowsEq(t, "a failing", h.do(t, ex), "a:failed", "b:success")
	}
	wantRowsEq(t, "a cooling", h.do(t, ex), "a:skipped/cooling_down", "b:success")
	if ex.tries["a"] != 2 {
		t.Fatalf("a tried %d times, want 2", ex.tries["a"])
	}

	// b fails too and cools (20s); a cools until 10s: a is tried anyway.
	ex.fail["b"] = down
	wantRowsEq(t, "b failing", h.do(t, ex), "a:skipped/cooling_down", "b:failed")
	wantRowsEq(t, "b failing", h.do(t, ex), "a:skipped/cooling_down", "b:failed")
	wantRowsEq(t, "all cooling", h.do(t, ex), "a:failed", "b:skipped/cooling_down")
	if ex.tries["a"] != 3 {
		t.Fatalf("a tried %d times, want 3 (the forced attempt)", ex.tries["a"])
	}

	// a recovers; after its (doubled, 20s) cooldown one probe heals it.
	delete(ex.fail, "a")
	h.clock.advance(21 * time.Second)
	wantRowsEq(t, "probe", h.do(t, ex), "a:success", "b:unused")
	wantRowsEq(t, "healed", h.do(t, ex), "a:success", "b:unused")
}

// TestProbeGivenBackWithoutVerdict: a probe whose attempt ends with a relayed
// client fault does not count, and the next request may probe.
func TestProbeGivenBackWithoutVerdict(t *testing.T) {
	h := newHealthRig(t, healthRoutes)
	ex := &scripted{fail: map[string]error{"a": &upstream.StatusError{Code: 500}}, tries: map[string]int{}}
	h.do(t, ex)
	h.do(t, ex)
	h.clock.advance(11 * time.Second)
	ex.fail["a"] = &upstream.StatusError{Code: 400}
	wantRowsEq(t, "probe relays a 400", h.do(t, ex), "a:failed", "b:unused")
	delete(ex.fail, "a")
	wantRowsEq(t, "next request probes", h.do(t, ex), "a:success", "b:unused")
}

// TestLeastLatencyOrder: inside a tier, unmeasured targets first, then the
// lowest first-byte EWMA.
func TestLeastLatencyOrder(t *testing.T) {
	h := newHealthRig(t, `
providers:
  - { name: slow, base_url: "http://s.example/v1", api_keys: [ks], max_concurrency: 4 }
  - { name: fast, base_url: "http://f.example/v1", api_keys: [kf], max_concurrency: 4 }
  - { name: new, base_url: "http://n.example/v1", api_keys: [kn], max_concurrency: 4 }
  - { name: backup, base_url: "http://b.example/v1", api_keys: [kb], max_concurrency: 4 }
models:
  - name: m
    strategy: least_latency
    candidates: [ { provider: slow }, { provider: fast }, { provider: new }, { provider: backup, priority: 1 } ]
`)
	h.entry(t, "slow").FirstByte(50 * time.Millisecond)
	h.entry(t, "fast").FirstByte(5 * time.Millisecond)
	for range 20 {
		plan, _ := h.plan.Plan("m")
		var got []string
		for i, c := range plan {
			if c.Index != i {
				t.Fatalf("index %d at position %d", c.Index, i)
			}
			got = append(got, c.Provider().Name)
		}
		if strings.Join(got, " ") != "new fast slow backup" {
			t.Fatalf("order %v, want new fast slow backup", got)
		}
	}

	// A target passed over gets no samples; once its EWMA is stale it is
	// tried again as if unmeasured, so one slow answer cannot bench it.
	h.clock.advance(health.LatencyStaleAfter + time.Second)
	h.entry(t, "fast").FirstByte(5 * time.Millisecond)
	h.entry(t, "new").FirstByte(7 * time.Millisecond)
	plan, _ := h.plan.Plan("m")
	if got := plan[0].Provider().Name; got != "slow" {
		t.Fatalf("first after slow's EWMA went stale: %s, want slow", got)
	}
}
