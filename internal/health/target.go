package health

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// alpha is the EWMA weight of a new first-byte sample: 0.3 follows a change
// of latency within a handful of requests while one slow answer moves the
// average by less than a third of its excess.
const alpha = 0.3

// word bits: the state, and whether consecutive failures are nonzero. Both
// are written under Entry.mu and read without it by the hot paths.
const (
	stateMask   = 0b11
	failingFlag = 0b100
)

// Entry is the health of one upstream model on one target (provider +
// origin + key): providers overload, rate-limit and fail per model, so one
// model's failures never cool another model of the same key. Its methods
// are safe for concurrent use; each locks only this entry (a key- or
// provider-scoped failure locks the entries it reaches one after another).
type Entry struct {
	tracker      *Tracker
	provider     *group // the provider's entries: a transport failure's reach
	key          *group // the target's entries, one per model: a key failure's reach
	providerName string
	id           string // the target's digest
	model        string

	// word mirrors state and failures != 0 so that Check on a healthy
	// target and Done of a success on an unblemished one are one atomic
	// load each.
	word atomic.Uint32
	// ewma is the first-byte EWMA in nanoseconds plus one; zero means no
	// sample yet.
	ewma atomic.Int64
	// sampled is when the last sample arrived (the clock's UnixNano).
	sampled atomic.Int64
	// recent holds the last len(recent) first-byte samples plus one (zero:
	// empty), for percentiles; next counts samples written.
	recent [64]atomic.Int64
	next   atomic.Uint64
	// cooled is cancelled with ErrCooling when the target next turns
	// cooling, and then replaced (see Cooled).
	cooled atomic.Pointer[signal]
	// removed detaches a target a reload dropped: its late verdicts may be
	// about an origin or key the provider no longer has.
	removed atomic.Bool

	mu         sync.Mutex
	keyID      string
	s          Settings
	state      State
	failures   int           // consecutive counted failures since the last success
	backoff    time.Duration // the cooldown a failed probe starts from: Cooldown, doubled per failed probe
	until      time.Time     // cooldown end, while Cooling or Probing
	probeHeld  bool          // a probe (or a forced attempt) is out
	probeSince time.Time     // when it went out, for its lease
	lastError  string
}

// Check is called just before trying the target. ok: try it. probe: the
// caller holds the target's one probe and must resolve it with exactly one
// Done (a non-counting verdict gives it back). When !ok, until is the end of
// the cooldown (already past while another request holds the probe), so a
// caller that skipped every candidate can pick the one closest to healthy.
func (t *Entry) Check() (ok, probe bool, until time.Time) {
	if State(t.word.Load()&stateMask) == Healthy {
		return true, false, time.Time{}
	}
	return t.checkSlow()
}

func (t *Entry) checkSlow() (ok, probe bool, until time.Time) {
	now := t.tracker.clock.Now()
	t.mu.Lock()
	tr, changed := t.advance(now)
	switch {
	case t.state == Healthy:
		ok = true
	case t.state == Probing && !t.probeHeld:
		t.probeHeld, t.probeSince = true, now
		ok, probe = true, true
	default:
		until = t.until
	}
	t.mu.Unlock()
	if changed {
		t.tracker.emit(tr)
	}
	return ok, probe, until
}

// Force is for a target the loop tries although Check said no (every
// candidate was skipped). If no probe is out, the attempt becomes the probe,
// even before the cooldown ends: its success heals the target, its failure
// doubles the cooldown. Otherwise (healthy, or a probe already out) it is an
// ordinary attempt. Either way the caller reports with Done(v, probe).
func (t *Entry) Force() (probe bool) {
	if State(t.word.Load()&stateMask) == Healthy {
		return false
	}
	now := t.tracker.clock.Now()
	t.mu.Lock()
	tr, changed := t.advance(now)
	if t.state != Healthy && !t.probeHeld {
		t.probeHeld, t.probeSince = true, now
		probe = true
	}
	t.mu.Unlock()
	if changed {
		t.tracker.emit(tr)
	}
	return probe
}

// Done reports an attempt's verdict; probe is what Check or Force returned.
// It must be called once per attempt that holds a probe; for other attempts
// it may be skipped when the verdict does not count.
//
// A probe that is no longer held when its verdict arrives (its lease expired,
// or a Retry-After voided it) is treated as an ordinary attempt: with a bool
// for a claim, a late verdict cannot be told from the current holder's once
// a new probe is out, so the first probe verdict to arrive settles the state.
// Both are live results of the same target, so the decision stays grounded.
func (t *Entry) Done(v Verdict, probe bool) {
	if !probe && (!v.Success && !v.Counts || v.Success && t.word.Load() == 0) {
		return // nothing to give back, nothing to change
	}
	now := t.tracker.clock.Now()
	t.mu.Lock()
	tr1, changed1 := t.advance(now)
	holder := probe && t.probeHeld
	if holder {
		t.probeHeld = false
	}
	var tr2 Transition
	var changed2 bool
	switch {
	case v.Success:
		t.failures = 0
		if holder {
			tr2, changed2 = t.heal()
		}
		t.publish()
	case v.Counts:
		tr2, changed2 = t.fail(now, v, holder)
	}
	t.mu.Unlock()
	if changed1 {
		t.tracker.emit(tr1)
	}
	if changed2 {
		t.tracker.emit(tr2)
	}
	if !v.Success && v.Counts && v.Scope != ScopeModel && !t.removed.Load() {
		g := t.key
		if v.Scope == ScopeProvider {
			g = t.provider
		}
		for _, o := range *g.entries.Load() {
			if o != t {
				o.failSibling(now, v)
			}
		}
	}
}

// Release gives back a held probe without a verdict; the same as
// Done(Verdict{}, true).
func (t *Entry) Release() { t.Done(Verdict{}, true) }

// failSibling applies another entry's key- or provider-scoped failure to
// t, as an ordinary (non-probe) attempt's.
func (t *Entry) failSibling(now time.Time, v Verdict) {
	t.mu.Lock()
	tr1, changed1 := t.advance(now)
	tr2, changed2 := t.fail(now, v, false)
	t.mu.Unlock()
	if changed1 {
		t.tracker.emit(tr1)
	}
	if changed2 {
		t.tracker.emit(tr2)
	}
}

// fail applies one counted failure. Outside Healthy only the probe's verdict
// and immediate cooldowns change the state: late verdicts of attempts begun
// before the target cooled must not re-cool it or reset its backoff.
// t.mu is held.
func (t *Entry) fail(now time.Time, v Verdict, holder bool) (Transition, bool) {
	t.failures++
	t.lastError = v.ErrorType
	imm, reason := t.immediate(v)
	var tr Transition
	var changed bool
	switch {
	case holder:
		t.backoff = min(2*t.backoff, t.s.MaxCooldown)
		t.until = now.Add(max(t.backoff, imm))
		tr, changed = t.move(Cooling, ReasonProbeFailed, v)
	case imm > 0:
		// An immediate cooldown voids any probe out: the probe's success
		// must not lift a Retry-After it did not see.
		t.probeHeld = false
		if t.state == Cooling {
			t.until = later(t.until, now.Add(imm))
		} else {
			t.until = now.Add(imm)
			tr, changed = t.move(Cooling, reason, v)
		}
	case t.state == Healthy && t.failures >= t.s.Failures:
		t.until = now.Add(t.backoff)
		tr, changed = t.move(Cooling, ReasonFailures, v)
	}
	t.publish()
	return tr, changed
}

// immediate is how long v cools t at once, and why; zero for none.
func (t *Entry) immediate(v Verdict) (time.Duration, string) {
	switch {
	case v.Auth:
		return t.s.AuthCooldown, ReasonAuth
	case v.RetryAfter > 0:
		return min(v.RetryAfter, t.s.MaxCooldown), ReasonRetryAfter
	}
	return 0, ""
}

// heal makes t healthy after its probe succeeded. t.mu is held.
func (t *Entry) heal() (Transition, bool) {
	t.failures = 0
	t.backoff = t.s.Cooldown
	t.until = time.Time{}
	t.probeHeld = false
	return t.move(Healthy, ReasonProbeSucceeded, Verdict{})
}

// advance applies what time alone changes: the end of a cooldown and the
// expiry of a probe's lease. States change lazily, when somebody looks, so
// the package needs no timer or goroutine. t.mu is held.
func (t *Entry) advance(now time.Time) (tr Transition, changed bool) {
	if t.state == Cooling && !now.Before(t.until) {
		tr, changed = t.move(Probing, ReasonCooldownEnded, Verdict{})
		t.publish()
	}
	if t.probeHeld && now.Sub(t.probeSince) >= t.s.ProbeLease {
		t.probeHeld = false
	}
	return tr, changed
}

// move sets the state and describes the change; no change, no Transition.
// t.mu is held; the caller publishes and emits after unlocking.
func (t *Entry) move(to State, reason string, v Verdict) (Transition, bool) {
	if t.state == to {
		return Transition{}, false
	}
	tr := Transition{
		Provider: t.providerName, TargetID: t.id, KeyID: t.keyID, Model: t.model,
		From: t.state, To: to, Reason: reason,
		ErrorType: v.ErrorType, Status: v.Status,
	}
	if to == Cooling {
		tr.Until = t.until
		if old := t.cooled.Swap(newSignal()); old != nil {
			old.cancel(ErrCooling)
		}
	}
	t.state = to
	return tr, true
}

// ErrCooling is the cause of Cooled's context: the target turned cooling.
var ErrCooling = errors.New("the target turned cooling")

// signal is a context cancelled once, when its target turns cooling.
type signal struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

func newSignal() *signal {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &signal{ctx, cancel}
}

// Cooled returns a context that is cancelled, with cause ErrCooling, the
// next time the target turns cooling. An attempt still waiting on the
// target (context.AfterFunc) can then fail over at once instead of waiting
// out its own timeout on a target others already found failing.
func (t *Entry) Cooled() context.Context {
	s := t.cooled.Load()
	if s == nil {
		t.cooled.CompareAndSwap(nil, newSignal())
		s = t.cooled.Load()
	}
	return s.ctx
}

// publish mirrors state and failures into word. t.mu is held.
func (t *Entry) publish() {
	w := uint32(t.state)
	if t.failures != 0 {
		w |= failingFlag
	}
	t.word.Store(w)
}

// FirstByte feeds the first-byte EWMA with one sample; the caller feeds it
// from successful attempts only, so timeouts do not pose as latency.
func (t *Entry) FirstByte(d time.Duration) {
	d = max(d, 0)
	for {
		old := t.ewma.Load()
		next := int64(d) + 1
		if old != 0 {
			cur := old - 1
			next = cur + int64(alpha*float64(int64(d)-cur)) + 1
		}
		if t.ewma.CompareAndSwap(old, next) {
			t.sampled.Store(t.tracker.clock.Now().UnixNano())
			t.recent[(t.next.Add(1)-1)%uint64(len(t.recent))].Store(int64(d) + 1)
			return
		}
	}
}

// MinQuantileSamples is how many recent samples Quantile needs to answer.
const MinQuantileSamples = 20

// Quantile returns the q-quantile (0 < q < 1) of the target's recent
// first-byte samples (the last 64); ok is false with fewer than
// MinQuantileSamples. It copies and sorts at most 64 values: for hedging
// decisions, once per request, not per event.
func (t *Entry) Quantile(q float64) (d time.Duration, ok bool) {
	var buf [len(t.recent)]int64
	n := 0
	for i := range t.recent {
		if v := t.recent[i].Load(); v != 0 {
			buf[n] = v - 1
			n++
		}
	}
	if n < MinQuantileSamples {
		return 0, false
	}
	s := buf[:n]
	slices.Sort(s)
	return time.Duration(s[min(n-1, int(q*float64(n)))]), true
}

// LatencyStaleAfter is how long a first-byte EWMA stays current without a
// new sample. A target that least_latency passes over gets no samples, so
// one slow answer would otherwise keep it out of use for good.
const LatencyStaleAfter = 10 * time.Second

// CurrentEWMA is EWMA for ordering: ok is false as well when the last sample
// is older than LatencyStaleAfter, so the target is tried again (and
// measured anew) as if it had never been measured.
func (t *Entry) CurrentEWMA() (d time.Duration, ok bool) {
	d, ok = t.EWMA()
	if ok && t.tracker.clock.Now().UnixNano()-t.sampled.Load() > int64(LatencyStaleAfter) {
		return d, false
	}
	return d, ok
}

// EWMA returns the first-byte EWMA; ok is false until the first sample.
func (t *Entry) EWMA() (d time.Duration, ok bool) {
	v := t.ewma.Load()
	if v == 0 {
		return 0, false
	}
	return time.Duration(v - 1), true
}

// State returns the target's state now.
func (t *Entry) State() State {
	w := t.word.Load()
	if State(w&stateMask) == Healthy {
		return Healthy
	}
	return t.status(t.tracker.clock.Now()).State
}

// ID returns the entry's target's identity (the digest given to Add).
func (t *Entry) ID() string { return t.id }

// Model returns the entry's upstream model.
func (t *Entry) Model() string { return t.model }

// Key returns the entry's identity, EntryKey(ID(), Model()).
func (t *Entry) Key() string { return EntryKey(t.id, t.model) }

// status reads t for the admin view and the gauges, after advancing it.
func (t *Entry) status(now time.Time) TargetStatus {
	t.mu.Lock()
	tr, changed := t.advance(now)
	st := TargetStatus{
		Provider:            t.providerName,
		Target:              t.id,
		KeyID:               t.keyID,
		Model:               t.model,
		State:               t.state,
		ConsecutiveFailures: t.failures,
		LastErrorType:       t.lastError,
		ProbeInFlight:       t.probeHeld,
	}
	if t.state != Healthy {
		u := t.until.UTC().Round(0)
		st.CooldownUntil = &u
	}
	t.mu.Unlock()
	if changed {
		t.tracker.emit(tr)
	}
	if d, ok := t.EWMA(); ok {
		ms := float64(d) / float64(time.Millisecond)
		st.EWMAFirstByteMS = &ms
	}
	return st
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
