package api

import (
	"bytes"
	"net/http"
	"strconv"

	"github.com/llmgw/gateway/internal/candidates"
	"github.com/llmgw/gateway/internal/upstream"
)

// A client with cost_in_usage: true gets "cost" (USD) inside the usage
// object it receives, as OpenRouter reports it (docs/cost.md): in a
// non-stream body read whole before the commit point, and in the stream
// event that carries a top-level usage object (the chat usage chunk,
// Anthropic's message_delta). The Responses stream nests its usage inside
// the response object and is left as sent.

// bodyWithCost returns the committed non-stream answer's body with its
// cost in the usage object, and sets the Content-Length to match; the body
// as it came when its cost or usage object is unknown.
func bodyWithCost(h http.Header, a *candidates.Attempt) []byte {
	first := a.First()
	usd, ok := a.Cost()
	if !ok {
		return first
	}
	b, ok := upstream.WithUsageCost(make([]byte, 0, len(first)+32), first, FormatUSD(usd))
	if !ok {
		return first
	}
	h.Set("Content-Length", strconv.Itoa(len(b)))
	return b
}

var usageMember = []byte(`"usage"`)

// eventWithCost returns a stream event with the request's cost so far in
// its top-level usage object, or ev unchanged when it has none.
func eventWithCost(a *candidates.Attempt, ev []byte) []byte {
	if !bytes.Contains(ev, usageMember) {
		return ev
	}
	start := bytes.Index(ev, []byte("data:"))
	if start < 0 || start > 0 && ev[start-1] != '\n' {
		return ev
	}
	end := bytes.IndexByte(ev[start:], '\n')
	if end < 0 {
		return ev
	}
	end += start
	usd, ok := a.CostSoFar()
	if !ok {
		return ev
	}
	data := bytes.TrimSpace(ev[start+len("data:") : end])
	out := make([]byte, 0, len(ev)+32)
	out = append(out, ev[:start]...)
	out = append(out, "data: "...)
	out, ok = upstream.WithUsageCost(out, data, FormatUSD(usd))
	if !ok {
		return ev
	}
	return append(out, ev[end:]...)
}
