package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestSnapshotJSON protects the keys of GET /admin/admission.
func TestSnapshotJSON(t *testing.T) {
	s := New(Config{GlobalLimit: 3, Clock: newFakeClock()})
	l := mustAcquire(t, s, req(Interactive, 0, target("d1", 2)))
	defer l.Release()
	b, err := json.Marshal(s.Stats())
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"global", "targets", "pending", "closed"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("snapshot JSON lacks %q: %s", k, b)
		}
	}
	targets := doc["targets"].([]any)
	if len(targets) != 1 {
		t.Fatalf("targets = %v", targets)
	}
	tg := targets[0].(map[string]any)
	for _, k := range []string{"gate", "id", "label", "limit", "active", "pending", "admitted", "released",
		"timed_out", "cancelled", "rejected", "aging_promotions", "peak_active",
		"wait_total_seconds", "wait_avg_seconds", "wait_max_seconds", "wait_p50_seconds", "wait_p99_seconds"} {
		if _, ok := tg[k]; !ok {
			t.Errorf("target JSON lacks %q: %v", k, tg)
		}
	}
	if tg["gate"] != TargetGate || tg["id"] != "d1" || tg["label"] != "provider-d1" || tg["limit"] != 2.0 || tg["active"] != 1.0 {
		t.Errorf("target JSON values: %v", tg)
	}
	global := doc["global"].(map[string]any)
	if _, ok := global["id"]; ok {
		t.Errorf("global gate JSON has an id: %v", global)
	}
	if global["gate"] != GlobalGate || global["limit"] != 3.0 {
		t.Errorf("global JSON values: %v", global)
	}
}

// TestSnapshotTargetsSorted protects a stable display order.
func TestSnapshotTargetsSorted(t *testing.T) {
	s := New(Config{Clock: newFakeClock()})
	for _, d := range []Dimension{
		{Gate: TargetGate, ID: "z", Label: "b", Limit: 1},
		{Gate: TargetGate, ID: "y", Label: "a", Limit: 1},
		{Gate: "gateway_client", ID: "c", Label: "app", Limit: 1},
		{Gate: TargetGate, ID: "x", Label: "b", Limit: 1},
	} {
		mustAcquire(t, s, Request{Dimensions: []Dimension{d}}).Release()
	}
	var got []string
	for _, g := range s.Stats().Targets {
		got = append(got, g.Gate+"/"+g.Label+"/"+g.ID)
	}
	want := []string{"gateway_client/app/c", TargetGate + "/a/y", TargetGate + "/b/x", TargetGate + "/b/z"}
	if !equal(got, want) {
		t.Fatalf("targets order %v, want %v", got, want)
	}
}

// TestIdleTargetsDiscarded protects memory from ephemeral identities: only
// the 64 most recently idle gates keep their counters.
func TestIdleTargetsDiscarded(t *testing.T) {
	s := New(Config{Clock: newFakeClock()})
	for i := range 1000 {
		mustAcquire(t, s, req(Interactive, 0, target(fmt.Sprint(i), 1))).Release()
	}
	snap := s.Stats()
	if n := len(snap.Targets); n != 64 || snap.Targets[0].ID != "936" || snap.Targets[n-1].ID != "999" {
		t.Fatalf("kept %d targets from %s to %s, want 64 from 936 to 999",
			n, snap.Targets[0].ID, snap.Targets[n-1].ID)
	}
	if len(s.gates) != 64 {
		t.Fatalf("gates map holds %d, want 64", len(s.gates))
	}
	// A busy gate is never discarded, whatever the churn around it.
	busy := mustAcquire(t, s, req(Interactive, 0, target("busy", 1)))
	for i := range 100 {
		mustAcquire(t, s, req(Interactive, 0, target(fmt.Sprint("e", i), 1))).Release()
	}
	if got := gateOf(t, s.Stats(), TargetGate, "busy"); got.Active != 1 {
		t.Fatalf("busy gate %+v", got)
	}
	busy.Release()
	// Reviving a kept idle gate keeps its counters.
	mustAcquire(t, s, req(Interactive, 0, target("busy", 1))).Release()
	if got := gateOf(t, s.Stats(), TargetGate, "busy"); got.Admitted != 2 || got.Released != 2 {
		t.Fatalf("revived gate counters %+v, want admitted 2", got)
	}
	if g := s.Stats().Global; g.Admitted != 1102 || g.Released != 1102 {
		t.Fatalf("global counters %+v", g)
	}
}

// TestDefaults protects the documented defaults.
func TestDefaults(t *testing.T) {
	s := New(Config{})
	if limit := s.Stats().Global.Limit; limit != 256 {
		t.Errorf("default global limit %d, want 256", limit)
	}
	if s.maxPending != 4096 || s.aging.String() != "30s" {
		t.Errorf("defaults: pending %d aging %s", s.maxPending, s.aging)
	}
	if _, ok := s.clock.(realClock); !ok {
		t.Errorf("default clock %T", s.clock)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	// The real clock's budget timers work end to end.
	s = New(Config{GlobalLimit: 1})
	l := mustAcquire(t, s, req(Interactive, 0))
	defer l.Release()
	var te *TimeoutError
	if _, err := s.Acquire(context.Background(), req(Interactive, 5*time.Millisecond)); !errors.As(err, &te) || te.Gate != GlobalGate {
		t.Fatalf("real clock budget: err = %v, want TimeoutError", err)
	}
}

// TestUsageMatchesStats protects the gauges scraped often: Usage shows the
// same occupancy as a snapshot, gate by gate, and costs a scrape no
// allocation once its buffer has grown.
func TestUsageMatchesStats(t *testing.T) {
	s := New(Config{GlobalLimit: 3, Clock: newFakeClock()})
	a := mustAcquire(t, s, req(Interactive, 0, target("a", 1)))
	defer a.Release()
	b := mustAcquire(t, s, req(Interactive, 0, target("b", 2)))
	defer b.Release()
	mustAcquire(t, s, req(Interactive, 0, target("idle", 4))).Release()
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan result, 2)
	enqueue(t, ctx, s, "a1", req(Background, long, target("a", 1)), out)
	enqueue(t, ctx, s, "a2", req(Interactive, long, target("a", 1)), out)
	defer func() {
		cancel()
		recv(t, out)
		recv(t, out)
	}()

	usage := func(g GateStats) GateUsage {
		return GateUsage{Gate: g.Gate, Label: g.Label, Limit: g.Limit, Active: g.Active, Pending: g.Pending}
	}
	snap := s.Stats()
	u := s.Usage(nil)
	if want := usage(snap.Global); u.Global != want {
		t.Errorf("global usage %+v, want %+v", u.Global, want)
	}
	if u.Pending != snap.Pending || u.Pending != 2 {
		t.Errorf("pending %d, want %d (snapshot) and 2", u.Pending, snap.Pending)
	}
	var want []GateUsage
	for _, g := range snap.Targets {
		want = append(want, usage(g))
	}
	got := slices.Clone(u.Targets)
	slices.SortFunc(got, func(x, y GateUsage) int { return strings.Compare(x.Label, y.Label) })
	if !slices.Equal(got, want) {
		t.Errorf("target usage %+v, want %+v", got, want)
	}
	buf := u.Targets
	if again := s.Usage(buf); len(again.Targets) != len(want) {
		t.Errorf("Usage over a reused buffer has %d targets, want %d", len(again.Targets), len(want))
	}
	if n := testing.AllocsPerRun(100, func() { buf = s.Usage(buf).Targets }); n != 0 {
		t.Errorf("Usage with a grown buffer allocates %v times", n)
	}
}
