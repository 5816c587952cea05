// Package health owns the health of each target (provider + origin + key):
// its state (healthy, cooling, probing), the consecutive failures that cool
// it, its cooldown and the doubling of it, the single probe that may try a
// target whose cooldown has ended, and an EWMA of its first-byte latency.
// It also describes all of it for GET /admin/health (Snapshot), for the
// gateway_target_health gauges (Counts) and, through a notify callback, for
// transition logs and counters.
//
// It leaves to others: classifying an attempt's outcome (the caller's single
// classification function decides whether a verdict counts, its scope, its
// Retry-After; this package has no table of status codes), the order of
// candidates in a plan and what to do when every one is skipped (the
// candidates package, which reads Check's until and EWMA), persistence (health
// is process memory and starts healthy), and sharing health across replicas
// (later, through Redis). It imports only the standard library and starts no
// goroutine.
//
// # States
//
//	healthy --Failures consecutive counted failures--> cooling (Cooldown)
//	any     --Retry-After (429 key, 503 provider)-----> cooling (Retry-After, capped at MaxCooldown)
//	any     --401/403--------------------------------> cooling (AuthCooldown)
//	cooling --cooldown ends---------------------------> probing
//	probing --probe succeeds--------------------------> healthy (failures and backoff reset)
//	probing --probe fails-----------------------------> cooling (cooldown doubled, up to MaxCooldown)
//
// A provider-scoped failure (connect error, timeout, 408, 5xx) counts for
// every target of its provider; a key-scoped one (401, 403, 429) for its key.
// A success resets its target's consecutive failures. Client faults, client
// cancels and admission failures do not count and change nothing.
//
// Outside healthy, only the probe's verdict and immediate cooldowns
// (Retry-After, auth) change the state: a verdict from an attempt that began
// before the target cooled is counted (consecutive failures, last error) but
// neither heals the target nor re-cools it, so a burst of late results cannot
// skip the probe or reset the backoff. An immediate cooldown voids any probe
// that is out, so the probe's success cannot lift a Retry-After it did not
// see.
//
// # Probes
//
// When a cooling target's cooldown has ended, the first Check takes its one
// probe (probe=true) and every other Check skips it until the probe is
// resolved. The holder resolves it with Done: a success heals, a counted
// failure cools again with the doubled cooldown, and a verdict that does not
// count (the client left, admission failed, the request was at fault) gives
// the probe back with the state unchanged, so the next request probes. A
// probe that is never resolved is presumed lost after Settings.ProbeLease
// (default 1m) and another request may probe: a bug in a caller can delay
// recovery by a lease, never wedge a target. Force lets the attempt loop try
// a skipped target anyway (DESIGN: health never fails a request without an
// attempt); it takes the probe if none is out, even before the cooldown ends.
//
// States change lazily, when a method looks at the target, so no timer is
// needed; the cooling -> probing transition is notified by whoever first
// observes it.
//
// # Cost
//
// Check on a healthy target and Done of a success on a target without
// failures are one atomic load each, with no allocation. Everything else
// locks the one target it touches (a provider-scoped failure locks the
// provider's targets one after another); no lock is shared by all requests.
//
// # First-byte EWMA
//
// FirstByte feeds an exponentially weighted moving average with weight 0.3
// for the new sample; the first sample sets it. EWMA reports ok=false until
// then, so least-latency ordering can put unmeasured targets first.
package health
