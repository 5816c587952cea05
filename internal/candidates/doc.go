// Package candidates owns the routes file model, the planning of one request
// into ordered candidates, and the attempt loop that walks them.
//
// Planning follows DESIGN section 3: lower priority tiers first; inside a tier
// a weighted random draw without replacement orders the entries; each entry
// expands into one candidate per key of its provider, starting from a key that
// rotates per request. A target is (provider, endpoint origin, key
// fingerprint) and owns one admission gate.
//
// The attempt loop (Runner) is the single place where the order of attempts
// and failover are decided. It admits each attempt through the admission
// scheduler, hands the admitted attempt to an Executor (which speaks HTTP to
// the provider and to the client), classifies the outcome through typed
// errors and records every candidate's fate. It knows nothing of provider
// wire formats.
package candidates
