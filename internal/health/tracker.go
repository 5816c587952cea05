package health

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Tracker holds the health of every target. Its lock guards only the set of
// targets (Add, Remove); the request path never takes it.
type Tracker struct {
	clock  Clock
	notify func(Transition)

	mu     sync.Mutex
	byID   map[string]*Target
	groups map[string]*group
	// all is copied on write, so Snapshot and Counts read it without mu.
	all atomic.Pointer[[]*Target]
}

// group is the targets of one provider, which share its provider-scoped
// failures. targets is copied on write, so a provider-scoped verdict walks
// it without any shared lock.
type group struct {
	targets atomic.Pointer[[]*Target]
}

// NewTracker returns an empty Tracker. A nil clock is the process clock.
// notify, if not nil, is called once for every state change of every target,
// after the target's lock is released; it may be called concurrently, and
// two changes of one target on two goroutines may arrive out of order (each
// carries From and To). It must not block: it runs on the request path.
func NewTracker(clock Clock, notify func(Transition)) *Tracker {
	if clock == nil {
		clock = SystemClock{}
	}
	t := &Tracker{clock: clock, notify: notify, byID: map[string]*Target{}, groups: map[string]*group{}}
	t.all.Store(&[]*Target{})
	return t
}

func (t *Tracker) emit(tr Transition) {
	if t.notify != nil {
		t.notify(tr)
	}
}

// Add registers a target of provider and returns it; targetID is the target's
// digest, unique across providers. Adding an ID that is already there (a
// reload that kept the target) returns the same Target with its health, and
// applies the new settings and key label from the next verdict on.
func (t *Tracker) Add(provider, targetID, keyID string, s Settings) *Target {
	s = s.normalized()
	t.mu.Lock()
	defer t.mu.Unlock()
	if tg, ok := t.byID[targetID]; ok && tg.provider == provider {
		tg.mu.Lock()
		tg.keyID, tg.s = keyID, s
		tg.backoff = min(max(tg.backoff, s.Cooldown), s.MaxCooldown)
		tg.mu.Unlock()
		return tg
	} else if ok {
		t.removeLocked(tg)
	}
	g := t.groups[provider]
	if g == nil {
		g = &group{}
		g.targets.Store(&[]*Target{})
		t.groups[provider] = g
	}
	tg := &Target{tracker: t, group: g, provider: provider, id: targetID, keyID: keyID, s: s, backoff: s.Cooldown}
	t.byID[targetID] = tg
	g.targets.Store(appendCopy(*g.targets.Load(), tg))
	t.all.Store(appendCopy(*t.all.Load(), tg))
	return tg
}

// Remove forgets a target (a reload dropped it): it leaves Snapshot and
// Counts, and attempts still in flight on it may report to it, but their
// verdicts no longer reach the provider's other targets (the removed target
// may have been an origin or key the provider no longer has). Adding the ID
// again later starts a fresh, healthy Target.
func (t *Tracker) Remove(targetID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tg, ok := t.byID[targetID]; ok {
		t.removeLocked(tg)
	}
}

func (t *Tracker) removeLocked(tg *Target) {
	tg.removed.Store(true)
	delete(t.byID, tg.id)
	not := func(x *Target) bool { return x == tg }
	rest := slices.DeleteFunc(slices.Clone(*tg.group.targets.Load()), not)
	tg.group.targets.Store(&rest)
	if len(rest) == 0 {
		delete(t.groups, tg.provider)
	}
	all := slices.DeleteFunc(slices.Clone(*t.all.Load()), not)
	t.all.Store(&all)
}

func appendCopy(s []*Target, tg *Target) *[]*Target {
	c := make([]*Target, len(s), len(s)+1)
	copy(c, s)
	c = append(c, tg)
	return &c
}

// TargetStatus is one target in GET /admin/health (DESIGN 10.1).
type TargetStatus struct {
	Provider            string     `json:"provider"`
	Target              string     `json:"target"`
	KeyID               string     `json:"key_id"`
	State               State      `json:"state"`
	ConsecutiveFailures int        `json:"consecutive_failures"`
	CooldownUntil       *time.Time `json:"cooldown_until"` // while cooling or probing; null when healthy
	// ProbeInFlight: a request holds the target's probe. A probing target
	// without one waits for its next request, which becomes the probe: an
	// idle target can stay so long after its cooldown ended.
	ProbeInFlight   bool     `json:"probe_in_flight"`
	LastErrorType   string   `json:"last_error_type"`    // "" before any counted failure
	EWMAFirstByteMS *float64 `json:"ewma_first_byte_ms"` // null without samples
}

// Snapshot returns every target's status, ordered by provider, key label and
// target.
func (t *Tracker) Snapshot() []TargetStatus {
	now := t.clock.Now()
	all := *t.all.Load()
	out := make([]TargetStatus, 0, len(all))
	for _, tg := range all {
		out = append(out, tg.status(now))
	}
	slices.SortFunc(out, func(a, b TargetStatus) int {
		return cmp.Or(cmp.Compare(a.Provider, b.Provider), cmp.Compare(a.KeyID, b.KeyID), cmp.Compare(a.Target, b.Target))
	})
	return out
}

// Counts returns, per provider, how many targets are in each state, with
// every state present (zeros included), for gateway_target_health.
func (t *Tracker) Counts() map[string]map[State]int {
	now := t.clock.Now()
	out := map[string]map[State]int{}
	for _, tg := range *t.all.Load() {
		m := out[tg.provider]
		if m == nil {
			m = make(map[State]int, numStates)
			for _, s := range States {
				m[s] = 0
			}
			out[tg.provider] = m
		}
		m[tg.status(now).State]++
	}
	return out
}

// CoolShared cools a target until until because another replica cooled it
// (shared health, DESIGN 10.4). A target already cooling keeps the later
// end; the cooldown's doubling is left alone, as this replica saw no
// failure of its own. Unknown targets and past ends are ignored. The
// transition's reason is ReasonPeer, so the caller does not pass it on
// again.
func (t *Tracker) CoolShared(targetID string, until time.Time) {
	t.mu.Lock()
	tg := t.byID[targetID]
	t.mu.Unlock()
	if tg == nil {
		return
	}
	now := t.clock.Now()
	if !until.After(now) {
		return
	}
	tg.mu.Lock()
	tr, changed := tg.advance(now)
	if changed {
		tg.mu.Unlock()
		t.emit(tr)
		tg.mu.Lock()
	}
	if tg.state == Cooling {
		tg.until = later(tg.until, until)
		tg.mu.Unlock()
		return
	}
	tg.probeHeld = false
	tg.until = until
	tr, changed = tg.move(Cooling, ReasonPeer, Verdict{})
	tg.publish()
	tg.mu.Unlock()
	if changed {
		t.emit(tr)
	}
}
