package health

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// mTarget is DESIGN 10.1 written the obvious way: the state is not stored
// but derived from "healthy?" and the cooldown's end, and a probe is held
// while its lease runs. The Tracker's explicit, lazily advanced state
// machine must agree with it after every operation.
type mTarget struct {
	tg       *Entry
	provider string
	target   string // the key's target: a key-scoped failure reaches its other models
	healthy  bool
	until    time.Time
	failures int
	backoff  time.Duration
	probeOut bool
	probeAt  time.Time
	lastErr  string
	ewma     float64 // ns; meaningful when sampled
	sampled  bool
	reason   string // why this step changed the state, if it did
}

type model struct {
	s       Settings
	targets []*mTarget
}

func (m *mTarget) state(now time.Time) State {
	switch {
	case m.healthy:
		return Healthy
	case now.Before(m.until):
		return Cooling
	}
	return Probing
}

func (mo *model) held(m *mTarget, now time.Time) bool {
	return m.probeOut && now.Sub(m.probeAt) < mo.s.ProbeLease
}

func (mo *model) check(m *mTarget, now time.Time) (ok, probe bool, until time.Time) {
	switch st := m.state(now); {
	case st == Healthy:
		return true, false, time.Time{}
	case st == Probing && !mo.held(m, now):
		m.probeOut, m.probeAt = true, now
		return true, true, time.Time{}
	}
	return false, false, m.until
}

func (mo *model) force(m *mTarget, now time.Time) bool {
	if m.healthy || mo.held(m, now) {
		return false
	}
	m.probeOut, m.probeAt = true, now
	return true
}

func (mo *model) done(m *mTarget, v Verdict, probe bool, now time.Time) {
	holder := probe && mo.held(m, now)
	if holder {
		m.probeOut = false
	}
	switch {
	case v.Success:
		m.failures = 0
		if holder {
			m.healthy, m.backoff, m.until, m.reason = true, mo.s.Cooldown, time.Time{}, ReasonProbeSucceeded
		}
	case v.Counts:
		for _, o := range mo.targets {
			if o == m || v.Scope == ScopeProvider && o.provider == m.provider || v.Scope == ScopeKey && o.target == m.target {
				mo.fail(o, v, holder && o == m, now)
			}
		}
	}
}

func (mo *model) fail(m *mTarget, v Verdict, holder bool, now time.Time) {
	m.failures++
	m.lastErr = v.ErrorType
	var imm time.Duration
	why := ReasonFailures
	if v.Auth {
		imm, why = mo.s.AuthCooldown, ReasonAuth
	} else if v.RetryAfter > 0 {
		imm, why = min(v.RetryAfter, mo.s.MaxCooldown), ReasonRetryAfter
	}
	switch {
	case holder:
		m.backoff = min(2*m.backoff, mo.s.MaxCooldown)
		m.until = now.Add(max(m.backoff, imm))
		m.healthy, m.reason = false, ReasonProbeFailed
	case imm > 0:
		m.probeOut = false
		if m.state(now) == Cooling {
			m.until = later(m.until, now.Add(imm))
		} else {
			m.until, m.healthy, m.reason = now.Add(imm), false, why
		}
	case m.healthy && m.failures >= mo.s.Failures:
		m.until, m.healthy, m.reason = now.Add(m.backoff), false, why
	}
}

// attempt is an attempt in flight: the target it tries and whether it holds
// the probe.
type attempt struct {
	m     *mTarget
	probe bool
}

// TestTrackerMatchesModel drives the Tracker and the model with the same
// random operations on a fake clock (checks, forced tries, verdicts of every
// scope and kind from attempts in flight, lost probes, first-byte samples,
// time passing, often exactly to a cooldown's or a lease's end) and compares,
// after every step, each target's state, consecutive failures, cooldown end,
// last error and EWMA, every Check and Force answer, and the notified
// transitions: exactly one per state change, with its From, To, Reason and
// Until.
func TestTrackerMatchesModel(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { runModel(t, seed, 2500) })
	}
}

func runModel(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 13))
	sec := func(lo, hi int) time.Duration { return time.Duration(lo+rng.IntN(hi-lo+1)) * time.Second }
	s := Settings{Failures: 1 + rng.IntN(4), Cooldown: sec(1, 20), AuthCooldown: sec(1, 400), ProbeLease: sec(5, 120)}
	s.MaxCooldown = s.Cooldown * time.Duration(1+rng.IntN(10))

	clk := newFakeClock()
	rec := &recorder{}
	tr := NewTracker(clk, rec.notify)
	mo := &model{s: s}
	// Two models on some keys, so that a model's failure must stay on its
	// entry and a key's must reach the key's other model.
	for _, e := range []struct{ provider, target, model string }{
		{"p", "t0", "a"}, {"p", "t0", "b"}, {"p", "t1", "a"}, {"p", "t2", "a"},
		{"q", "t3", "a"}, {"q", "t3", "b"}, {"q", "t4", "b"}, {"r", "t5", "a"},
	} {
		mo.targets = append(mo.targets, &mTarget{tg: tr.Add(e.provider, e.target, "k"+e.target[1:], e.model, s),
			provider: e.provider, target: e.target, healthy: true, backoff: s.Cooldown})
	}
	verdicts := []func() Verdict{
		func() Verdict { return success },
		func() Verdict { return success },
		func() Verdict { return success },
		func() Verdict { return http429 },
		func() Verdict { return http429K },
		func() Verdict { return http429After(sec(0, 400)) },
		func() Verdict { return http502 },
		func() Verdict { return connErr },
		func() Verdict { return timeout },
		func() Verdict { return http503After(sec(1, 400)) },
		func() Verdict { return http401 },
		func() Verdict { return http403 },
		func() Verdict { return http400 },
		func() Verdict { return cancelled },
		func() Verdict { return admission },
	}
	var inflight []attempt
	prev := make([]State, len(mo.targets)) // all healthy

	for step := range steps {
		now := clk.Now()
		for _, m := range mo.targets {
			m.reason = ""
		}
		what := ""
		switch op := rng.IntN(20); {
		case op < 6:
			m := mo.targets[rng.IntN(len(mo.targets))]
			ok, probe, until := m.tg.Check()
			wok, wprobe, wuntil := mo.check(m, now)
			what = fmt.Sprintf("Check(%s) = %v %v %v", m.tg.Key(), ok, probe, until)
			if ok != wok || probe != wprobe || !until.Equal(wuntil) {
				t.Fatalf("step %d: %s, model %v %v %v", step, what, wok, wprobe, wuntil)
			}
			if ok {
				inflight = append(inflight, attempt{m, probe})
			}
		case op < 7:
			m := mo.targets[rng.IntN(len(mo.targets))]
			probe := m.tg.Force()
			what = fmt.Sprintf("Force(%s) = %v", m.tg.Key(), probe)
			if want := mo.force(m, now); probe != want {
				t.Fatalf("step %d: %s, model %v", step, what, want)
			}
			inflight = append(inflight, attempt{m, probe})
		case op < 13:
			if len(inflight) == 0 {
				continue
			}
			i := rng.IntN(len(inflight))
			a := inflight[i]
			inflight = slices.Delete(inflight, i, i+1)
			if a.probe && rng.IntN(15) == 0 {
				what = fmt.Sprintf("lose probe of %s", a.m.tg.Key())
				break // the caller never resolves it: only the lease frees it
			}
			v := verdicts[rng.IntN(len(verdicts))]()
			what = fmt.Sprintf("Done(%s, %+v, %v)", a.m.tg.Key(), v, a.probe)
			a.m.tg.Done(v, a.probe)
			mo.done(a.m, v, a.probe, now)
		case op < 15:
			m := mo.targets[rng.IntN(len(mo.targets))]
			d := time.Duration(rng.Int64N(int64(3 * time.Second)))
			what = fmt.Sprintf("FirstByte(%s, %v)", m.tg.Key(), d)
			m.tg.FirstByte(d)
			if m.sampled {
				m.ewma += alpha * (float64(d) - m.ewma)
			} else {
				m.ewma, m.sampled = float64(d), true
			}
		default:
			var d time.Duration
			m := mo.targets[rng.IntN(len(mo.targets))]
			switch rng.IntN(4) {
			case 0: // exactly to a cooldown's end
				d = max(0, m.until.Sub(now))
			case 1: // exactly to a lease's end
				d = max(0, m.probeAt.Add(s.ProbeLease).Sub(now))
			case 2:
				d = time.Duration(rng.Int64N(int64(s.MaxCooldown)))
			default:
				d = time.Duration(rng.IntN(3000)) * time.Millisecond
			}
			what = fmt.Sprintf("advance %v", d)
			clk.Advance(d)
		}

		// Observe every target now; compare with the model.
		now = clk.Now()
		got := map[string]TargetStatus{}
		for _, st := range tr.Snapshot() {
			got[EntryKey(st.Target, st.Model)] = st
		}
		trs := map[string][]Transition{}
		for _, x := range rec.take() {
			trs[x.Key()] = append(trs[x.Key()], x)
		}
		for i, m := range mo.targets {
			g := got[m.tg.Key()]
			ws := m.state(now)
			var wuntil *time.Time
			if ws != Healthy {
				wuntil = &m.until
			}
			if g.State != ws || g.ConsecutiveFailures != m.failures || !sameTime(g.CooldownUntil, wuntil) || g.LastErrorType != m.lastErr {
				t.Fatalf("step %d after %s: %s is %s, %d failures, until %v, last %q; model %s, %d, %v, %q", step, what, m.tg.Key(),
					g.State, g.ConsecutiveFailures, fmtTime(g.CooldownUntil), g.LastErrorType, ws, m.failures, fmtTime(wuntil), m.lastErr)
			}
			if (g.EWMAFirstByteMS != nil) != m.sampled || m.sampled && math.Abs(*g.EWMAFirstByteMS*1e6-m.ewma) > 10 {
				t.Fatalf("step %d after %s: %s ewma %v ms, model %v ns (sampled %v)", step, what, m.tg.Key(), g.EWMAFirstByteMS, m.ewma, m.sampled)
			}
			var want []string
			if prev[i] != ws {
				reason := m.reason
				if reason == "" {
					reason = ReasonCooldownEnded
				}
				until := time.Time{}
				if ws == Cooling {
					until = m.until
				}
				want = []string{fmt.Sprintf("%s->%s %s %v", prev[i], ws, reason, until)}
			}
			var gotTrs []string
			for _, x := range trs[m.tg.Key()] {
				gotTrs = append(gotTrs, fmt.Sprintf("%s->%s %s %v", x.From, x.To, x.Reason, x.Until))
			}
			if !slices.Equal(gotTrs, want) {
				t.Fatalf("step %d after %s: %s notified %q, model %q", step, what, m.tg.Key(), gotTrs, want)
			}
			prev[i] = ws
		}
	}
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

func fmtTime(p *time.Time) string {
	if p == nil {
		return "none"
	}
	return p.Format(time.TimeOnly)
}
