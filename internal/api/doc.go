// Package api is the gateway's HTTP face toward clients: the chi router, the
// OpenAI-compatible handlers, OpenAI-shaped error bodies, request ids, panic
// recovery, health and admin endpoints, and the Executor that relays one
// admitted attempt between a provider and the client.
//
// It owns the client side of the wire; what to try and in which order is the
// candidates package's decision, and how to talk to a provider is upstream's.
package api
