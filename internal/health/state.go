package health

import (
	"fmt"
	"time"
)

// State is an entry's health state.
type State uint8

// The states of a target. The zero value is Healthy, so the hot path's
// "may I try it?" is a single comparison with zero.
const (
	Healthy State = iota // tried normally
	Cooling              // skipped until its cooldown ends
	Probing              // cooldown over: one live request (the probe) may try it
	numStates
)

// States lists every state, in order, for callers that export one gauge per
// state and want zeros for the empty ones.
var States = [numStates]State{Healthy, Cooling, Probing}

func (s State) String() string {
	switch s {
	case Healthy:
		return "healthy"
	case Cooling:
		return "cooling"
	case Probing:
		return "probing"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// MarshalText makes a State appear as its name in JSON (GET /admin/health).
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Settings is one provider's health policy (the routes file's
// `health: {failures, cooldown, max_cooldown, auth_cooldown}`). A zero or
// negative field takes its default (DefaultSettings); MaxCooldown below
// Cooldown is raised to Cooldown.
type Settings struct {
	// Failures is how many consecutive counted failures cool a healthy
	// target. Default 3.
	Failures int
	// Cooldown is how long a target cools before it is probed; it doubles
	// after each failed probe, up to MaxCooldown, and returns to Cooldown
	// when the target is healthy again. Default 5s.
	Cooldown time.Duration
	// MaxCooldown caps the doubled cooldown and any Retry-After. Default 30s,
	// so a recovered target gets traffic back within 30s.
	MaxCooldown time.Duration
	// AuthCooldown is how long a 401/403 cools its key. It is not capped by
	// MaxCooldown: a rejected key rarely heals sooner. Default 5m.
	AuthCooldown time.Duration
	// ProbeLease is how long a probe may stay unresolved before it is
	// presumed lost and another request may probe. It should exceed the
	// longest time between Check and Done of one attempt (queue budget +
	// connect + first-byte timeout when Done is called at the first byte).
	// An expired lease only allows a second probe; it never changes the
	// state. Default 1m.
	ProbeLease time.Duration
}

// DefaultSettings returns the defaults of DESIGN 10.1.
func DefaultSettings() Settings {
	return Settings{
		Failures:     3,
		Cooldown:     5 * time.Second,
		MaxCooldown:  30 * time.Second,
		AuthCooldown: 5 * time.Minute,
		ProbeLease:   time.Minute,
	}
}

// normalized fills defaults so that the state machine never sees a zero
// threshold or a zero cooldown, which would make cooling meaningless.
func (s Settings) normalized() Settings {
	d := DefaultSettings()
	if s.Failures <= 0 {
		s.Failures = d.Failures
	}
	if s.Cooldown <= 0 {
		s.Cooldown = d.Cooldown
	}
	if s.MaxCooldown <= 0 {
		s.MaxCooldown = d.MaxCooldown
	}
	if s.MaxCooldown < s.Cooldown {
		s.MaxCooldown = s.Cooldown
	}
	if s.AuthCooldown <= 0 {
		s.AuthCooldown = d.AuthCooldown
	}
	if s.ProbeLease <= 0 {
		s.ProbeLease = d.ProbeLease
	}
	return s
}

// Verdict is what one attempt on a target tells its health. The caller's
// single classification function fills it; this package applies no policy
// of its own to status codes or error types.
type Verdict struct {
	// Success: the target answered well. A success always counts.
	Success bool
	// Counts: a failure that says something about the target. False for
	// client faults (400/413/422), client cancels and admission failures:
	// such a verdict changes nothing except giving back a held probe.
	Counts bool
	// Scope is how far a counted failure reaches: this entry only (the
	// zero value, a model's failure), every model of its key, or every
	// entry of its provider (a transport failure).
	Scope Scope
	// RetryAfter, when positive on a counted failure, cools the failure's
	// scope at once for that long, capped at MaxCooldown. The classifier sets
	// it only on a 429 or a 503, for the verdict's scope.
	RetryAfter time.Duration
	// Auth: a 401/403; cools the failure's scope (the key: the classifier
	// marks these key-scoped) at once for AuthCooldown. It takes precedence
	// over RetryAfter.
	Auth bool
	// ErrorType becomes the targets' last_error_type; Status is carried
	// into the Transition it causes, for logs.
	ErrorType string
	Status    int
}

// Scope is how far a counted failure reaches beyond the entry it happened
// on. The caller's classification picks it; this package only spreads it.
type Scope uint8

const (
	// ScopeModel: the (target, model) entry alone (5xx, 529, a first-byte
	// timeout, 404, a 429 without a key-wide signal): another model of the
	// same key stays healthy.
	ScopeModel Scope = iota
	// ScopeKey: every model of the entry's key (401, 403, a key-wide 429).
	ScopeKey
	// ScopeProvider: every entry of the provider, whatever its key or
	// model (the provider cannot be reached: DNS, refused, TLS).
	ScopeProvider
)

// Reasons carried by a Transition.
const (
	ReasonFailures       = "failures"        // healthy -> cooling: Failures consecutive failures
	ReasonRetryAfter     = "retry_after"     // -> cooling at once: a Retry-After
	ReasonAuth           = "auth"            // -> cooling at once: 401/403
	ReasonCooldownEnded  = "cooldown_ended"  // cooling -> probing
	ReasonProbeSucceeded = "probe_succeeded" // probing (or a forced probe while cooling) -> healthy
	ReasonProbeFailed    = "probe_failed"    // probing -> cooling, with the doubled cooldown
	ReasonPeer           = "peer_replica"    // -> cooling at once: another replica cooled the target (DESIGN 10.4)
)

// Transition describes one state change of one entry.
type Transition struct {
	Provider, TargetID, KeyID, Model string
	From, To                         State
	Reason                           string
	// Until is the cooldown's end when To is Cooling, else zero.
	Until time.Time
	// ErrorType and Status are the verdict's that caused the change, if any.
	ErrorType string
	Status    int
}

// Key is the changed entry's identity, as EntryKey gives it.
func (tr Transition) Key() string { return EntryKey(tr.TargetID, tr.Model) }

// EntryKey is the identity of one (target, model) entry: the target's
// digest (hex, no slash) and the upstream model after the first slash.
func EntryKey(targetID, model string) string { return targetID + "/" + model }

// Clock is injected so cooldowns are tested without sleeping.
type Clock interface {
	Now() time.Time
}

// SystemClock is the process clock, with its monotonic reading, so a
// wall-clock jump neither ends nor stretches a cooldown.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

var _ Clock = SystemClock{}
