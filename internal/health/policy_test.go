package health

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// harness is provider p with keys a and b, and provider q with key c.
type harness struct {
	t     *testing.T
	clock *fakeClock
	rec   *recorder
	tr    *Tracker
	tg    map[string]*Entry
	start time.Time
}

func newHarness(t *testing.T, s Settings) *harness {
	h := &harness{t: t, clock: newFakeClock(), rec: &recorder{}, tg: map[string]*Entry{}}
	h.start = h.clock.Now()
	h.tr = NewTracker(h.clock, h.rec.notify)
	for _, k := range []struct{ provider, key string }{{"p", "a"}, {"p", "b"}, {"q", "c"}} {
		h.tg[k.key] = h.tr.Add(k.provider, "t-"+k.key, k.key, "", s)
	}
	return h
}

func (h *harness) status(key string) TargetStatus {
	h.t.Helper()
	for _, st := range h.tr.Snapshot() {
		if st.KeyID == key {
			return st
		}
	}
	h.t.Fatalf("no target %s in snapshot", key)
	return TargetStatus{}
}

// step is one action of a policy case; steps that expect something fail the
// test when it does not happen.
type step func(h *harness)

func adv(d time.Duration) step { return func(h *harness) { h.clock.Advance(d) } }

// do reports a verdict of an ordinary (non-probe) attempt.
func do(key string, vs ...Verdict) step {
	return func(h *harness) {
		for _, v := range vs {
			h.tg[key].Done(v, false)
		}
	}
}

// probeDone reports the verdict of the attempt that holds key's probe.
func probeDone(key string, v Verdict) step {
	return func(h *harness) { h.tg[key].Done(v, true) }
}

// check calls Check and compares ok and probe; for a skip it also wants
// until at start+wantUntil.
func check(key string, wantOK, wantProbe bool, wantUntil time.Duration) step {
	return func(h *harness) {
		h.t.Helper()
		ok, probe, until := h.tg[key].Check()
		var want time.Time
		if !wantOK {
			want = h.start.Add(wantUntil)
		}
		if ok != wantOK || probe != wantProbe || !until.Equal(want) {
			h.t.Fatalf("Check(%s) at +%v = %v, %v, +%v; want %v, %v, +%v", key, h.clock.Now().Sub(h.start),
				ok, probe, until.Sub(h.start), wantOK, wantProbe, wantUntil)
		}
	}
}

func force(key string, wantProbe bool) step {
	return func(h *harness) {
		h.t.Helper()
		if got := h.tg[key].Force(); got != wantProbe {
			h.t.Fatalf("Force(%s) = %v, want %v", key, got, wantProbe)
		}
	}
}

// want describes one target at the end of a case; until is relative to the
// harness start, zero for none.
type want struct {
	state    State
	failures int
	until    time.Duration
	lastErr  string
}

var fast = Settings{Failures: 3, Cooldown: 10 * time.Second, MaxCooldown: 5 * time.Minute, AuthCooldown: 5 * time.Minute, ProbeLease: time.Minute}

// TestPolicy protects the health rules of DESIGN 10.1: what cools a target,
// for how long, which targets a failure reaches, how a probe heals or
// re-cools it, and that each state change is notified exactly once.
func TestPolicy(t *testing.T) {
	healthy := want{state: Healthy}
	capped := fast
	capped.MaxCooldown = 30 * time.Second
	longAuth := fast
	longAuth.AuthCooldown = 7 * time.Minute

	cases := []struct {
		name     string
		settings Settings
		steps    []step
		want     map[string]want // keys not named must be healthy without failures
		trs      []string        // every notified transition, in order
	}{
		{
			name:  "three key-scoped failures cool that key only",
			steps: []step{do("a", http429, http429), check("a", true, false, 0), do("a", http429), check("a", false, false, 10*time.Second)},
			want:  map[string]want{"a": {Cooling, 3, 10 * time.Second, "upstream_http_error"}},
			trs:   []string{"a healthy->cooling failures"},
		},
		{
			name:  "a success resets the consecutive failures",
			steps: []step{do("a", http429, http429, success, http429, http429)},
			want:  map[string]want{"a": {Healthy, 2, 0, "upstream_http_error"}},
		},
		{
			name:  "provider-scoped failures count for every key of the provider and no other",
			steps: []step{do("a", provider(http502)), do("b", connErr), adv(time.Second), do("a", provider(timeout))},
			want: map[string]want{
				"a": {Cooling, 3, 11 * time.Second, "stream_first_byte_timeout"},
				"b": {Cooling, 3, 11 * time.Second, "stream_first_byte_timeout"},
			},
			trs: []string{"a healthy->cooling failures", "b healthy->cooling failures"},
		},
		{
			name:  "a success of one key does not reset the other's provider-scoped count",
			steps: []step{do("a", provider(http502), provider(http502)), do("b", success), do("a", success)},
			want:  map[string]want{"b": {Healthy, 0, 0, "upstream_http_error"}, "a": {Healthy, 0, 0, "upstream_http_error"}},
		},
		{
			name:  "Retry-After on a 429 cools the key at once for that long",
			steps: []step{do("a", http429After(30*time.Second)), check("a", false, false, 30*time.Second), check("b", true, false, 0)},
			want:  map[string]want{"a": {Cooling, 1, 30 * time.Second, "upstream_http_error"}},
			trs:   []string{"a healthy->cooling retry_after"},
		},
		{
			name:  "Retry-After is capped at MaxCooldown",
			steps: []step{do("a", http429After(time.Hour))},
			want:  map[string]want{"a": {Cooling, 1, 5 * time.Minute, "upstream_http_error"}},
			trs:   []string{"a healthy->cooling retry_after"},
		},
		{
			name:  "Retry-After on a provider-scoped 503 cools the whole provider at once",
			steps: []step{do("b", provider(http503After(20*time.Second)))},
			want: map[string]want{
				"a": {Cooling, 1, 20 * time.Second, "upstream_http_error"},
				"b": {Cooling, 1, 20 * time.Second, "upstream_http_error"},
			},
			trs: []string{"b healthy->cooling retry_after", "a healthy->cooling retry_after"},
		},
		{
			name:  "a later Retry-After extends a cooling key, an earlier one does not shorten it",
			steps: []step{do("a", http429After(30*time.Second)), do("a", http429After(time.Minute)), do("a", http429After(time.Second))},
			want:  map[string]want{"a": {Cooling, 3, time.Minute, "upstream_http_error"}},
			trs:   []string{"a healthy->cooling retry_after"},
		},
		{
			name:  "401 cools the key for AuthCooldown",
			steps: []step{do("a", http401)},
			want:  map[string]want{"a": {Cooling, 1, 5 * time.Minute, "upstream_http_error"}},
			trs:   []string{"a healthy->cooling auth"},
		},
		{
			name:     "403 cools the key for AuthCooldown, which MaxCooldown does not cap",
			settings: longAuth,
			steps:    []step{do("b", http403)},
			want:     map[string]want{"b": {Cooling, 1, 7 * time.Minute, "upstream_http_error"}},
			trs:      []string{"b healthy->cooling auth"},
		},
		{
			name: "client faults, cancels and admission failures never count",
			steps: []step{
				do("a", http400, http400, http400, cancelled, admission),
				do("a", http429, http429), do("a", http400, cancelled, admission, http400),
			},
			want: map[string]want{"a": {Healthy, 2, 0, "upstream_http_error"}},
		},
		{
			name: "after the cooldown exactly one request probes; its success heals",
			steps: []step{
				do("a", http429, http429, http429), adv(9 * time.Second), check("a", false, false, 10*time.Second),
				adv(time.Second), check("a", true, true, 0), check("a", false, false, 10*time.Second),
				probeDone("a", success), check("a", true, false, 0),
			},
			want: map[string]want{"a": {Healthy, 0, 0, "upstream_http_error"}},
			trs:  []string{"a healthy->cooling failures", "a cooling->probing cooldown_ended", "a probing->healthy probe_succeeded"},
		},
		{
			name:     "each failed probe doubles the cooldown up to MaxCooldown; health resets it",
			settings: capped,
			steps: []step{
				do("a", http429, http429, http429), adv(10 * time.Second), // cooled at 0 for 10s
				check("a", true, true, 0), probeDone("a", http429), // 10s: 20s -> 30s
				adv(20 * time.Second), check("a", true, true, 0), probeDone("a", http429), // 30s: 30s (cap) -> 60s
				adv(30 * time.Second), check("a", true, true, 0), probeDone("a", http429), // 60s: 30s -> 90s
				check("a", false, false, 90*time.Second),
				adv(30 * time.Second), check("a", true, true, 0), probeDone("a", success), // 90s: healthy
				do("a", http429, http429, http429), // 90s: cooled for the base 10s again
			},
			want: map[string]want{"a": {Cooling, 3, 100 * time.Second, "upstream_http_error"}},
			trs: []string{
				"a healthy->cooling failures",
				"a cooling->probing cooldown_ended", "a probing->cooling probe_failed",
				"a cooling->probing cooldown_ended", "a probing->cooling probe_failed",
				"a cooling->probing cooldown_ended", "a probing->cooling probe_failed",
				"a cooling->probing cooldown_ended", "a probing->healthy probe_succeeded",
				"a healthy->cooling failures",
			},
		},
		{
			name: "a probe given back without a verdict lets the next request probe",
			steps: []step{
				do("a", http429, http429, http429), adv(10 * time.Second),
				check("a", true, true, 0), probeDone("a", cancelled), check("a", true, true, 0),
				probeDone("a", http400), check("a", true, true, 0), probeDone("a", admission),
				check("a", true, true, 0), func(h *harness) { h.tg["a"].Release() }, check("a", true, true, 0),
			},
			want: map[string]want{"a": {Probing, 3, 10 * time.Second, "upstream_http_error"}},
			trs:  []string{"a healthy->cooling failures", "a cooling->probing cooldown_ended"},
		},
		{
			name: "a probe never resolved is presumed lost after its lease",
			steps: []step{
				do("a", http429, http429, http429), adv(10 * time.Second), check("a", true, true, 0),
				adv(time.Minute - time.Nanosecond), check("a", false, false, 10*time.Second),
				adv(time.Nanosecond), check("a", true, true, 0),
			},
			want: map[string]want{"a": {Probing, 3, 10 * time.Second, "upstream_http_error"}},
			trs:  []string{"a healthy->cooling failures", "a cooling->probing cooldown_ended"},
		},
		{
			name: "Force takes the probe before the cooldown ends; its success heals",
			steps: []step{
				do("a", http429, http429, http429), force("a", true), force("a", false),
				check("a", false, false, 10*time.Second), probeDone("a", success), force("a", false),
			},
			want: map[string]want{"a": {Healthy, 0, 0, "upstream_http_error"}},
			trs:  []string{"a healthy->cooling failures", "a cooling->healthy probe_succeeded"},
		},
		{
			name: "a forced probe's failure doubles the cooldown",
			steps: []step{
				do("a", http429, http429, http429), adv(time.Second), force("a", true), probeDone("a", http429),
				check("a", false, false, 21*time.Second),
			},
			want: map[string]want{"a": {Cooling, 4, 21 * time.Second, "upstream_http_error"}},
			trs:  []string{"a healthy->cooling failures"},
		},
		{
			name: "late verdicts of ordinary attempts count but neither heal nor re-cool",
			steps: []step{
				do("a", http429, http429, http429), do("a", success), do("a", http429),
				adv(10 * time.Second), check("a", true, true, 0), do("a", http429, http429, http429),
				check("a", false, false, 10*time.Second), do("a", success),
			},
			want: map[string]want{"a": {Probing, 0, 10 * time.Second, "upstream_http_error"}},
			trs:  []string{"a healthy->cooling failures", "a cooling->probing cooldown_ended"},
		},
		{
			name: "a Retry-After voids the probe out, so its success cannot lift it",
			steps: []step{
				do("a", http429, http429, http429), adv(10 * time.Second), check("a", true, true, 0),
				do("a", http429After(time.Minute)), probeDone("a", success), check("a", false, false, 70*time.Second),
			},
			want: map[string]want{"a": {Cooling, 0, 70 * time.Second, "upstream_http_error"}},
			trs:  []string{"a healthy->cooling failures", "a cooling->probing cooldown_ended", "a probing->cooling retry_after"},
		},
		{
			name: "a probe's provider-scoped failure re-cools it and counts for its siblings",
			steps: []step{
				do("a", http429, http429, http429), adv(10 * time.Second), check("a", true, true, 0),
				probeDone("a", provider(http502)),
			},
			want: map[string]want{
				"a": {Cooling, 4, 30 * time.Second, "upstream_http_error"},
				"b": {Healthy, 1, 0, "upstream_http_error"},
			},
			trs: []string{"a healthy->cooling failures", "a cooling->probing cooldown_ended", "a probing->cooling probe_failed"},
		},
		{
			name: "a 503 Retry-After on a probe cools for the longer of it and the doubled cooldown",
			steps: []step{
				do("a", http429, http429, http429), adv(10 * time.Second), check("a", true, true, 0),
				probeDone("a", provider(http503After(time.Minute))),
			},
			want: map[string]want{
				"a": {Cooling, 4, 70 * time.Second, "upstream_http_error"},
				"b": {Cooling, 1, 70 * time.Second, "upstream_http_error"},
			},
			trs: []string{
				"a healthy->cooling failures", "a cooling->probing cooldown_ended",
				"a probing->cooling probe_failed", "b healthy->cooling retry_after",
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := c.settings
			if s == (Settings{}) {
				s = fast
			}
			h := newHarness(t, s)
			for _, st := range c.steps {
				st(h)
			}
			for _, key := range []string{"a", "b", "c"} {
				w, ok := c.want[key]
				if !ok {
					w = healthy
				}
				got := h.status(key)
				var until time.Duration
				if got.CooldownUntil != nil {
					until = got.CooldownUntil.Sub(h.start)
				}
				if got.State != w.state || got.ConsecutiveFailures != w.failures || until != w.until || got.LastErrorType != w.lastErr {
					t.Errorf("%s: state %s, failures %d, until +%v, last error %q; want %s, %d, +%v, %q", key,
						got.State, got.ConsecutiveFailures, until, got.LastErrorType, w.state, w.failures, w.until, w.lastErr)
				}
				if h.tg[key].State() != w.state {
					t.Errorf("%s: State() = %s, want %s", key, h.tg[key].State(), w.state)
				}
			}
			var trs []string
			for _, tr := range h.rec.take() {
				trs = append(trs, tr.short())
			}
			if !slices.Equal(trs, c.trs) {
				t.Errorf("transitions:\n got %q\nwant %q", trs, c.trs)
			}
		})
	}
}

// TestOneProbeAtATime protects "exactly one live request may try the
// target": many requests check a target whose cooldown just ended, at once.
func TestOneProbeAtATime(t *testing.T) {
	for round := range 20 {
		h := newHarness(t, fast)
		h.tg["a"].Done(http401, false)
		h.clock.Advance(fast.AuthCooldown)
		var wg sync.WaitGroup
		var mu sync.Mutex
		oks, probes := 0, 0
		start := make(chan struct{})
		for range 32 {
			wg.Go(func() {
				<-start
				ok, probe, _ := h.tg["a"].Check()
				mu.Lock()
				defer mu.Unlock()
				if ok {
					oks++
				}
				if probe {
					probes++
				}
			})
		}
		close(start)
		wg.Wait()
		if oks != 1 || probes != 1 {
			t.Fatalf("round %d: %d requests may try, %d probes; want 1 and 1", round, oks, probes)
		}
		var n int
		for _, tr := range h.rec.take() {
			if tr.To == Probing {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("round %d: %d cooling->probing notifications, want 1", round, n)
		}
	}
}

// TestTransitionCarriesCause protects what logs and metrics read from a
// transition: the target, the cooldown's end and the verdict behind it.
func TestTransitionCarriesCause(t *testing.T) {
	h := newHarness(t, fast)
	h.tg["b"].Done(provider(http503After(20*time.Second)), false)
	trs := h.rec.take()
	if len(trs) != 2 {
		t.Fatalf("%d transitions, want 2", len(trs))
	}
	want := Transition{Provider: "p", TargetID: "t-b", KeyID: "b", From: Healthy, To: Cooling, Reason: ReasonRetryAfter,
		Until: h.start.Add(20 * time.Second), ErrorType: "upstream_http_error", Status: 503}
	if trs[0] != want {
		t.Errorf("got %+v\nwant %+v", trs[0], want)
	}
	if trs[1].TargetID != "t-a" || trs[1].Status != 503 || !trs[1].Until.Equal(want.Until) {
		t.Errorf("sibling transition %+v, want t-a until %v status 503", trs[1], want.Until)
	}
}

// provider is v reaching every entry of its provider, as a transport
// failure's does: the spreading these cases test is the scope's, whatever
// the status.
func provider(v Verdict) Verdict {
	v.Scope = ScopeProvider
	return v
}

// TestModelFailureStaysOnItsEntry: a model's failures, a plain 429's
// Retry-After and a model's 503 Retry-After cool their entry alone; a key's
// 401 reaches the key's other model and no other key.
func TestModelFailureStaysOnItsEntry(t *testing.T) {
	clk := newFakeClock()
	tr := NewTracker(clk, nil)
	a4o := tr.Add("p", "ta", "a", "gpt-4o", fast)
	aMini := tr.Add("p", "ta", "a", "gpt-4o-mini", fast)
	b4o := tr.Add("p", "tb", "b", "gpt-4o", fast)
	for _, v := range []Verdict{http502, timeout, http429After(time.Minute), http503After(time.Minute)} {
		a4o.Done(v, false)
	}
	if a4o.State() != Cooling || aMini.State() != Healthy || b4o.State() != Healthy {
		t.Fatalf("after a model's failures: %v %v %v, want cooling healthy healthy", a4o.State(), aMini.State(), b4o.State())
	}
	a4o.Done(http401, false)
	if aMini.State() != Cooling || b4o.State() != Healthy {
		t.Fatalf("after a key's 401: mini %v, other key %v, want cooling and healthy", aMini.State(), b4o.State())
	}
}
