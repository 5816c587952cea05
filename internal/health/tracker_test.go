package health

import (
	"encoding/json"
	"maps"
	"sync"
	"testing"
	"time"
)

// TestEWMA protects the latency that least_latency ordering reads: no
// sample is distinguishable from a fast one, the first sample sets the
// average, later ones move it by alpha.
func TestEWMA(t *testing.T) {
	cases := []struct {
		name    string
		samples []time.Duration
		want    time.Duration
		ok      bool
	}{
		{name: "no samples", ok: false},
		{name: "first sample sets it", samples: []time.Duration{200 * time.Millisecond}, want: 200 * time.Millisecond, ok: true},
		{name: "a zero sample is a sample", samples: []time.Duration{0}, want: 0, ok: true},
		{name: "negative clamps to zero", samples: []time.Duration{-time.Second}, want: 0, ok: true},
		{name: "a slower sample moves it up by alpha", samples: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}, want: 130 * time.Millisecond, ok: true},
		{name: "a faster sample moves it down by alpha", samples: []time.Duration{100 * time.Millisecond, 0}, want: 70 * time.Millisecond, ok: true},
		{name: "steady samples stay", samples: []time.Duration{time.Second, time.Second, time.Second}, want: time.Second, ok: true},
		{
			name:    "old samples fade",
			samples: []time.Duration{10 * time.Second, time.Second, time.Second, time.Second, time.Second, time.Second, time.Second, time.Second, time.Second, time.Second, time.Second},
			// 1s + 9s * 0.7^10
			want: time.Second + 254227724*time.Nanosecond, ok: true,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tg := NewTracker(newFakeClock(), nil).Add("p", "t", "k", "", Settings{})
			for _, d := range c.samples {
				tg.FirstByte(d)
			}
			got, ok := tg.EWMA()
			if ok != c.ok || (got-c.want).Abs() > time.Microsecond {
				t.Fatalf("EWMA = %v, %v; want %v, %v", got, ok, c.want, c.ok)
			}
		})
	}
}

// TestSnapshotJSON protects the GET /admin/health contract: the field names,
// state names, RFC 3339 cooldown end, and nulls for "none".
func TestSnapshotJSON(t *testing.T) {
	clk := newFakeClock()
	tr := NewTracker(clk, nil)
	a := tr.Add("primary", "d1", "0:ab12", "gpt-4o", Settings{})
	tr.Add("backup", "d2", "0:cd34", "claude-x", Settings{})
	a.FirstByte(1500 * time.Microsecond)
	a.Done(http429After(30*time.Second), false)
	got, err := json.Marshal(tr.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"provider":"backup","target":"d2","key_id":"0:cd34","model":"claude-x","state":"healthy","consecutive_failures":0,"cooldown_until":null,"probe_in_flight":false,"last_error_type":"","ewma_first_byte_ms":null},` +
		`{"provider":"primary","target":"d1","key_id":"0:ab12","model":"gpt-4o","state":"cooling","consecutive_failures":1,"cooldown_until":"2025-01-01T00:00:30Z","probe_in_flight":false,"last_error_type":"upstream_http_error","ewma_first_byte_ms":1.5}]`
	if string(got) != want {
		t.Fatalf("snapshot JSON\n got %s\nwant %s", got, want)
	}
}

// TestSnapshotProbeInFlight: a target whose cooldown ended while no
// request came is probing with no probe out (the console says it waits for
// its next request rather than showing a probe); the request that takes
// the probe sets probe_in_flight, and its verdict clears it.
func TestSnapshotProbeInFlight(t *testing.T) {
	clk := newFakeClock()
	tr := NewTracker(clk, nil)
	a := tr.Add("p", "d1", "0:ab", "", Settings{})
	a.Done(http429After(5*time.Second), false)
	clk.Advance(78 * time.Second)
	st := tr.Snapshot()[0]
	if st.State != Probing || st.ProbeInFlight || st.CooldownUntil == nil || !st.CooldownUntil.Before(clk.Now()) {
		t.Fatalf("idle after its cooldown: %+v", st)
	}
	ok, probe, _ := a.Check()
	if !ok || !probe {
		t.Fatalf("Check = %v %v, want the probe", ok, probe)
	}
	if st := tr.Snapshot()[0]; st.State != Probing || !st.ProbeInFlight {
		t.Fatalf("with the probe out: %+v", st)
	}
	a.Done(Verdict{Success: true}, true)
	if st := tr.Snapshot()[0]; st.State != Healthy || st.ProbeInFlight {
		t.Fatalf("after the probe succeeded: %+v", st)
	}
}

// TestCounts protects gateway_target_health: every state of every provider
// is present, zeros included, and a cooldown that ended counts as probing
// even if no request has looked at the target since.
func TestCounts(t *testing.T) {
	clk := newFakeClock()
	rec := &recorder{}
	tr := NewTracker(clk, rec.notify)
	a := tr.Add("p", "ta", "a", "m", Settings{})
	tr.Add("p", "tb", "b", "m", Settings{})
	tr.Add("p", "tb", "b", "m2", Settings{})
	c := tr.Add("q", "tc", "c", "m", Settings{})
	a.Done(http401, false)
	c.Done(http429After(time.Second), false)
	clk.Advance(time.Second)
	got := tr.Counts()
	want := map[ProviderModel]map[State]int{
		{"p", "m"}:  {Healthy: 1, Cooling: 1, Probing: 0},
		{"p", "m2"}: {Healthy: 1, Cooling: 0, Probing: 0},
		{"q", "m"}:  {Healthy: 0, Cooling: 0, Probing: 1},
	}
	if !maps.EqualFunc(got, want, maps.Equal) {
		t.Fatalf("Counts = %v, want %v", got, want)
	}
	if trs := rec.take(); len(trs) != 3 || trs[2].short() != "c cooling->probing cooldown_ended" {
		t.Fatalf("transitions %v, want the lazy cooling->probing of c notified once", trs)
	}
	tr.Counts()
	if trs := rec.take(); len(trs) != 0 {
		t.Fatalf("a second look notified again: %v", trs)
	}
}

// TestAddAgainKeepsHealth protects reload (DESIGN 10.5): a target that stays
// keeps its health and takes the new settings; a removed one leaves the
// views and no longer shares its provider's failures.
func TestAddAgainKeepsHealth(t *testing.T) {
	clk := newFakeClock()
	tr := NewTracker(clk, nil)
	a := tr.Add("p", "ta", "a", "", Settings{})
	b := tr.Add("p", "tb", "b", "", Settings{})
	a.Done(http429, false)
	a.Done(http429, false)
	a2 := tr.Add("p", "ta", "a-renamed", "", Settings{Failures: 2})
	if a2 != a {
		t.Fatal("Add of a kept target returned a new Target")
	}
	a.Done(http429, false) // judged by the new threshold of 2
	if a.State() != Cooling {
		t.Fatalf("state %s, want cooling under the new threshold of 2", a.State())
	}
	if st := tr.Snapshot(); len(st) != 2 || st[0].KeyID != "a-renamed" {
		t.Fatalf("snapshot %+v, want the new key label", st)
	}

	tr.Remove(EntryKey("tb", ""))
	if st := tr.Snapshot(); len(st) != 1 || st[0].Target != "ta" {
		t.Fatalf("snapshot after Remove %+v, want only ta", st)
	}
	b.Done(http502, false) // an attempt still in flight on the removed target
	if st := tr.Snapshot(); st[0].ConsecutiveFailures != 3 {
		t.Fatalf("a removed target's provider-scoped failure reached ta: %+v", st[0])
	}
	if _, ok := tr.Counts()[ProviderModel{"q", ""}]; ok {
		t.Fatal("Counts has a provider without targets")
	}
	tr.Remove(EntryKey("ta", ""))
	if got := tr.Counts(); len(got) != 0 {
		t.Fatalf("Counts after removing every target = %v", got)
	}
}

// TestSettingsDefaults protects the documented defaults: a zero field takes
// its default, and a MaxCooldown below Cooldown cannot shorten a cooldown.
func TestSettingsDefaults(t *testing.T) {
	cases := []struct {
		name string
		in   Settings
		want Settings
	}{
		{"zero is the defaults", Settings{}, DefaultSettings()},
		{"negative is the default", Settings{Failures: -1, Cooldown: -time.Second}, DefaultSettings()},
		{"set fields stay", Settings{Failures: 5, Cooldown: time.Second, MaxCooldown: time.Minute, AuthCooldown: time.Hour, ProbeLease: 5 * time.Second},
			Settings{Failures: 5, Cooldown: time.Second, MaxCooldown: time.Minute, AuthCooldown: time.Hour, ProbeLease: 5 * time.Second}},
		{"max below cooldown is raised", Settings{Cooldown: time.Hour, MaxCooldown: time.Minute},
			Settings{Failures: 3, Cooldown: time.Hour, MaxCooldown: time.Hour, AuthCooldown: 5 * time.Minute, ProbeLease: time.Minute}},
	}
	for _, c := range cases {
		if got := c.in.normalized(); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestConcurrentUse runs the request path and the admin views at once under
// the race detector, then checks that the notified transitions of each
// target form one unbroken chain ending in its state: none lost, none twice.
func TestConcurrentUse(t *testing.T) {
	clk := newFakeClock()
	rec := &recorder{}
	tr := NewTracker(clk, rec.notify)
	s := Settings{Failures: 2, Cooldown: time.Second, MaxCooldown: 8 * time.Second, AuthCooldown: 3 * time.Second, ProbeLease: 5 * time.Second}
	var targets []*Entry
	for i, p := range []string{"p", "p", "p", "q"} {
		targets = append(targets, tr.Add(p, string(rune('a'+i)), string(rune('a'+i)), "", s))
	}
	verdicts := []Verdict{success, success, http429, http502, http401, http400, cancelled, http503After(2 * time.Second)}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 3000 {
				tg := targets[(w+i)%len(targets)]
				if w == 0 && i%50 == 0 {
					clk.Advance(700 * time.Millisecond)
				}
				ok, probe, _ := tg.Check()
				if !ok && i%7 == 0 {
					probe, ok = tg.Force(), true
				}
				if ok {
					tg.FirstByte(time.Duration(i) * time.Microsecond)
					tg.Done(verdicts[(i*7+w)%len(verdicts)], probe)
				}
				if i%100 == 0 {
					tr.Snapshot()
					tr.Counts()
				}
			}
		})
	}
	wg.Wait()

	final := map[string]State{}
	for _, tg := range targets {
		final[tg.id] = tg.State() // may notify a cooldown that just ended
	}
	trs := rec.take()
	// Transitions of one target may be notified out of order across
	// goroutines, but as a multiset they must still chain from healthy to
	// the final state: every state is entered as often as it is left, except
	// healthy (left once more, unless final) and the final state.
	balance := map[string]map[State]int{}
	for _, x := range trs {
		if x.From == x.To {
			t.Fatalf("no-op transition notified: %+v", x)
		}
		b := balance[x.TargetID]
		if b == nil {
			b = map[State]int{}
			balance[x.TargetID] = b
		}
		b[x.From]--
		b[x.To]++
	}
	for id, fin := range final {
		for _, st := range States {
			want := 0
			switch {
			case st == fin && st != Healthy:
				want = 1
			case st != fin && st == Healthy:
				want = -1
			}
			if got := balance[id][st]; got != want {
				t.Errorf("%s (final %s): %s entered minus left = %d, want %d", id, fin, st, got, want)
			}
		}
	}
	if len(trs) == 0 {
		t.Fatal("no transitions at all: the test exercised nothing")
	}
}

// TestScopeReach: a failure reaches as far as its scope says. A model's
// failures (5xx, a plain 429) cool that model alone, never another model of
// the same key; a key's (401, a key-wide 429) cool every model of the key
// and no other key; a transport failure cools every entry of the provider
// and no other provider.
func TestScopeReach(t *testing.T) {
	type ent struct{ provider, target, model string }
	entries := []ent{{"p", "k1", "gpt-4o"}, {"p", "k1", "gpt-4o-mini"}, {"p", "k2", "gpt-4o"}, {"q", "k3", "gpt-4o"}}
	cases := []struct {
		name    string
		v       Verdict
		times   int
		cooling []bool // per entry, after the failures on entries[0]
	}{
		{"model 503", Verdict{Counts: true, Scope: ScopeModel, ErrorType: "upstream_http_error", Status: 503}, 3,
			[]bool{true, false, false, false}},
		{"model 429 with Retry-After", Verdict{Counts: true, Scope: ScopeModel, RetryAfter: 2 * time.Second, Status: 429}, 1,
			[]bool{true, false, false, false}},
		{"key 401", Verdict{Counts: true, Scope: ScopeKey, Auth: true, Status: 401}, 1,
			[]bool{true, true, false, false}},
		{"key-wide 429", Verdict{Counts: true, Scope: ScopeKey, Status: 429}, 3,
			[]bool{true, true, false, false}},
		{"transport", Verdict{Counts: true, Scope: ScopeProvider, ErrorType: "upstream_connect_error", Status: 502}, 3,
			[]bool{true, true, true, false}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewTracker(newFakeClock(), nil)
			var es []*Entry
			for _, e := range entries {
				es = append(es, tr.Add(e.provider, e.target, e.target, e.model, Settings{}))
			}
			for range tc.times {
				es[0].Done(tc.v, false)
			}
			for i, e := range es {
				if got := e.State() != Healthy; got != tc.cooling[i] {
					t.Errorf("%v: cooling %v, want %v", entries[i], got, tc.cooling[i])
				}
			}
			// The snapshot names each entry's model.
			for _, st := range tr.Snapshot() {
				if st.Model == "" {
					t.Errorf("snapshot entry %+v has no model", st)
				}
			}
		})
	}
}

// TestRemoveOneModel: a reload that drops one model of a key forgets that
// entry only; the key's other model keeps its health and still shares the
// key's failures.
func TestRemoveOneModel(t *testing.T) {
	tr := NewTracker(newFakeClock(), nil)
	a := tr.Add("p", "k1", "k1", "a", Settings{})
	b := tr.Add("p", "k1", "k1", "b", Settings{})
	tr.Remove(EntryKey("k1", "a"))
	if keys := tr.Keys(); len(keys) != 1 || keys[0] != b.Key() {
		t.Fatalf("keys after Remove %v, want [%s]", keys, b.Key())
	}
	a.Done(Verdict{Counts: true, Scope: ScopeKey, Auth: true, Status: 401}, false)
	if b.State() != Healthy {
		t.Fatal("a removed entry's key failure reached its former key")
	}
	a2 := tr.Add("p", "k1", "k1", "a", Settings{})
	a2.Done(Verdict{Counts: true, Scope: ScopeKey, Auth: true, Status: 401}, false)
	if b.State() != Cooling {
		t.Fatalf("b is %v after a key failure of its key's other model, want cooling", b.State())
	}
}

// TestDefaultsRecoverWithin30s: with the default settings, a model that is
// down for any length of time (here 10 minutes, one request every 100ms)
// gets its traffic back within 30s of recovering (the cooldown's doubling
// stops at 30s), and while it cools it gets one probe per cooldown.
func TestDefaultsRecoverWithin30s(t *testing.T) {
	for _, outage := range []time.Duration{10 * time.Second, 45 * time.Second, 10 * time.Minute} {
		clk := newFakeClock()
		tr := NewTracker(clk, nil)
		e := tr.Add("p", "k", "k", "gpt-4o", Settings{})
		start := clk.Now()
		upAt := start.Add(outage)
		var probes []time.Time
		recovered := time.Time{}
		for step := 0; recovered.IsZero() && step < 100000; step++ {
			ok, probe, _ := e.Check()
			if ok {
				if probe {
					probes = append(probes, clk.Now())
				}
				if clk.Now().Before(upAt) {
					e.Done(Verdict{Counts: true, Status: 503, ErrorType: "upstream_http_error"}, probe)
				} else {
					e.Done(Verdict{Success: true}, probe)
					recovered = clk.Now()
				}
			}
			clk.Advance(100 * time.Millisecond)
		}
		if late := recovered.Sub(upAt); late > 30*time.Second {
			t.Errorf("outage %v: traffic back %v after recovery, want within 30s", outage, late)
		}
		for i := 1; i < len(probes); i++ {
			if gap := probes[i].Sub(probes[i-1]); gap < 5*time.Second {
				t.Errorf("outage %v: probes %v apart, want one per cooldown (at least 5s)", outage, gap)
			}
		}
	}
}
