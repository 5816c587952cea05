package api

import "net/http"

// nosniffValue is shared by every response: net/http only reads it, and a
// handler that changed the header would replace the slice, not write into
// it. One slice for all saves an allocation per request.
var nosniffValue = []string{"nosniff"}

// nosniff marks an answer X-Content-Type-Options: nosniff. The API answers
// JSON or SSE, the console lives on the same origin, and a browser must
// never read a relayed provider body as a page of the gateway's.
func nosniff(h http.Header) { h["X-Content-Type-Options"] = nosniffValue }
