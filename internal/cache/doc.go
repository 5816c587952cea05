// Package cache owns the gateway's exact-match response cache (docs/cache.md):
// the key of a request (Key, over its body in canonical form), the stores an
// answer is kept in (Memory, in process and bounded by bytes), and the
// collapse of concurrent identical misses into one upstream call (Flights).
//
// It does not decide whether a route is cached, read headers, call
// providers or write records: internal/api does, calling in here. A store
// that fails is a miss to its caller, never an error the client sees.
package cache
