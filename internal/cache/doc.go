// Package cache owns the gateway's exact-match response cache (docs/cache.md):
// the key of a request (Key, over its body in canonical form), the stores an
// answer is kept in (Memory, in process and bounded by bytes), the
// collapse of concurrent identical misses into one upstream call (Flights),
// and the two forms of an answer: a stream the client received assembled
// into the stored non-stream form (Assembler), and a stored answer written
// as the stream a stream request is served (Replay), in the chat and
// messages formats. These are pure: no HTTP, no clock.
//
// It does not decide whether a route is cached, read headers, call
// providers or write records: internal/api does, calling in here. A store
// that fails is a miss to its caller, never an error the client sees.
package cache
