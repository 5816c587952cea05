// Package api is the gateway's HTTP face toward clients: the chi router, the
// OpenAI-compatible handlers, OpenAI-shaped error bodies, request ids, panic
// recovery, the access log, health and admin endpoints, and the relay that
// writes a committed attempt to the client (relay.go).
//
// It owns the client side of the wire: it reads and checks a request, asks
// candidates.Runner for an attempt, relays it from a shallow frame, and
// answers only once the attempt's outcome is on record. What to try and in
// which order is the candidates package's decision, and how to talk to a
// provider is upstream's.
package api
