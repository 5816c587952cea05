// Package candidates owns the planning of one request into ordered
// candidates, and the attempt loop that walks them up to the commit point.
// The routes file it plans from (model, parsing, validation) is
// internal/routes.
//
// Planning (plan.go, from validated routes.Routes): lower priority tiers
// first; inside a tier a weighted random draw without replacement orders the
// entries (or, with strategy: least_latency, each target's first-byte EWMA);
// each entry expands into one candidate per key of its provider, starting
// from a key that rotates per request. A target is (provider, endpoint
// origin, key fingerprint) and owns one admission gate and one health state.
//
// The attempt loop (Runner.Run, loop.go) is the single place where the order
// of attempts and failover are decided. Before the commit point it owns
// every attempt (attempt.go): cooling and retry-budget skips (skips.go),
// admission, the upstream call through a Sender, the watchdog, the first
// events held until the provider's stream_commit, and the last-resort
// retries of the same candidate before it fails over (retry.go). It returns
// the one committed Attempt, which the HTTP handler relays and ends with
// Finish, or the request's Outcome. With a route's hedge set, attempts race
// on goroutines until one commits (hedge.go). Classify (classify.go) is the
// one function that says what a failure means for the record, failover and
// health; records.go writes every candidate's fate. The package knows
// nothing of the client's HTTP side and leaves provider wire details to
// upstream.
package candidates
