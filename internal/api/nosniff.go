package api

import "net/http"

// nosniffValue is shared by every response: net/http only reads it, and a
// handler that changed the header would replace the slice, not write into
// it. One slice for all saves an allocation per request.
var nosniffValue = []string{"nosniff"}

// nosniff marks an answer X-Content-Type-Options: nosniff. The API answers
// JSON or SSE, the console lives on the same origin, and a browser must
// never read a relayed provider body as a page of the gateway's. It runs
// for every request in Server.ServeHTTP, before any handler, and has
// returned by the time a stream is relayed: as a middleware it would keep
// two frames on every stream's stack for its whole life.
//
//go:noinline
func nosniff(h http.Header) { h["X-Content-Type-Options"] = nosniffValue }
