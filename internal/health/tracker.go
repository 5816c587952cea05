package health

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Tracker holds the health of every entry: one per (target, upstream model)
// the routes plan. Its lock guards only the set of entries (Add, Remove);
// the request path never takes it.
type Tracker struct {
	clock  Clock
	notify func(Transition)

	mu        sync.Mutex
	byKey     map[string]*Entry // by EntryKey
	providers map[string]*group // by provider name: a transport failure's reach
	keys      map[string]*group // by target ID: a key-scoped failure's reach
	// all is copied on write, so Snapshot and Counts read it without mu.
	all atomic.Pointer[[]*Entry]
}

// group is the entries one failure scope reaches beyond its own entry: a
// provider's, or one target's (its key's models). entries is copied on
// write, so a verdict walks it without any shared lock.
type group struct {
	entries atomic.Pointer[[]*Entry]
}

func newGroup() *group {
	g := &group{}
	g.entries.Store(&[]*Entry{})
	return g
}

// NewTracker returns an empty Tracker. A nil clock is the process clock.
// notify, if not nil, is called once for every state change of every entry,
// after the entry's lock is released; it may be called concurrently, and
// two changes of one entry on two goroutines may arrive out of order (each
// carries From and To). It must not block: it runs on the request path.
func NewTracker(clock Clock, notify func(Transition)) *Tracker {
	if clock == nil {
		clock = SystemClock{}
	}
	t := &Tracker{clock: clock, notify: notify, byKey: map[string]*Entry{},
		providers: map[string]*group{}, keys: map[string]*group{}}
	t.all.Store(&[]*Entry{})
	return t
}

func (t *Tracker) emit(tr Transition) {
	if t.notify != nil {
		t.notify(tr)
	}
}

// Add registers the entry of model on a target of provider and returns it;
// targetID is the target's digest, unique across providers. Adding an entry
// that is already there (a reload that kept it, or a second route naming
// the same upstream model) returns the same Entry with its health, and
// applies the new settings and key label from the next verdict on.
func (t *Tracker) Add(provider, targetID, keyID, model string, s Settings) *Entry {
	s = s.normalized()
	key := EntryKey(targetID, model)
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.byKey[key]; ok && e.providerName == provider {
		e.mu.Lock()
		e.keyID, e.s = keyID, s
		e.backoff = min(max(e.backoff, s.Cooldown), s.MaxCooldown)
		e.mu.Unlock()
		return e
	} else if ok {
		t.removeLocked(e)
	}
	pg := t.providers[provider]
	if pg == nil {
		pg = newGroup()
		t.providers[provider] = pg
	}
	kg := t.keys[targetID]
	if kg == nil {
		kg = newGroup()
		t.keys[targetID] = kg
	}
	e := &Entry{tracker: t, provider: pg, key: kg, providerName: provider, id: targetID, model: model,
		keyID: keyID, s: s, backoff: s.Cooldown}
	t.byKey[key] = e
	pg.entries.Store(appendCopy(*pg.entries.Load(), e))
	kg.entries.Store(appendCopy(*kg.entries.Load(), e))
	t.all.Store(appendCopy(*t.all.Load(), e))
	return e
}

// Remove forgets an entry (a reload dropped its target or its model): it
// leaves Snapshot and Counts, and attempts still in flight on it may report
// to it, but their verdicts no longer reach other entries (the provider may
// no longer have that origin or key). Adding it again later starts a fresh,
// healthy Entry.
func (t *Tracker) Remove(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.byKey[key]; ok {
		t.removeLocked(e)
	}
}

// Keys lists every entry's key, for a reload to tell which it dropped.
func (t *Tracker) Keys() []string {
	all := *t.all.Load()
	out := make([]string, 0, len(all))
	for _, e := range all {
		out = append(out, e.Key())
	}
	return out
}

func (t *Tracker) removeLocked(e *Entry) {
	e.removed.Store(true)
	delete(t.byKey, e.Key())
	not := func(x *Entry) bool { return x == e }
	if rest := drop(e.provider, not); rest == 0 {
		delete(t.providers, e.providerName)
	}
	if rest := drop(e.key, not); rest == 0 {
		delete(t.keys, e.id)
	}
	all := slices.DeleteFunc(slices.Clone(*t.all.Load()), not)
	t.all.Store(&all)
}

// drop removes the entries not keeps from g and returns how many are left.
func drop(g *group, not func(*Entry) bool) int {
	rest := slices.DeleteFunc(slices.Clone(*g.entries.Load()), not)
	g.entries.Store(&rest)
	return len(rest)
}

func appendCopy(s []*Entry, e *Entry) *[]*Entry {
	c := make([]*Entry, len(s), len(s)+1)
	copy(c, s)
	c = append(c, e)
	return &c
}

// TargetStatus is one entry, a (target, model), in GET /admin/health.
type TargetStatus struct {
	Provider string `json:"provider"`
	Target   string `json:"target"`
	KeyID    string `json:"key_id"`
	Model    string `json:"model"` // the upstream model

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

// Snapshot returns every entry's status, ordered by provider, key label,
// target and model.
func (t *Tracker) Snapshot() []TargetStatus {
	now := t.clock.Now()
	all := *t.all.Load()
	out := make([]TargetStatus, 0, len(all))
	for _, e := range all {
		out = append(out, e.status(now))
	}
	slices.SortFunc(out, func(a, b TargetStatus) int {
		return cmp.Or(cmp.Compare(a.Provider, b.Provider), cmp.Compare(a.KeyID, b.KeyID),
			cmp.Compare(a.Target, b.Target), cmp.Compare(a.Model, b.Model))
	})
	return out
}

// ProviderModel names the entries Counts adds up: one upstream model of
// one provider, over its keys.
type ProviderModel struct{ Provider, Model string }

// Counts returns, per provider and upstream model, how many entries (one
// per key) are in each state, with every state present (zeros included),
// for gateway_target_health.
func (t *Tracker) Counts() map[ProviderModel]map[State]int {
	now := t.clock.Now()
	out := map[ProviderModel]map[State]int{}
	for _, e := range *t.all.Load() {
		pm := ProviderModel{e.providerName, e.model}
		m := out[pm]
		if m == nil {
			m = make(map[State]int, numStates)
			for _, s := range States {
				m[s] = 0
			}
			out[pm] = m
		}
		m[e.status(now).State]++
	}
	return out
}

// CoolShared cools the entry of key (EntryKey) until until because another
// replica cooled it (shared health). An entry already cooling keeps the
// later end; the cooldown's doubling is left alone, as this replica saw no
// failure of its own. Unknown entries and past ends are ignored. The
// transition's reason is ReasonPeer, so the caller does not pass it on
// again.
func (t *Tracker) CoolShared(key string, until time.Time) {
	t.mu.Lock()
	tg := t.byKey[key]
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
