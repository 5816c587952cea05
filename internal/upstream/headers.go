package upstream

import (
	"net/http"
	"net/textproto"
	"strings"
)

// hopHeaders are meaningful only for one connection (RFC 9110 section 7.6.1)
// and never cross the gateway in either direction.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// neverForwarded are request headers no routes file may let through: the
// client's credentials and cookies, forwarding claims, and the headers the
// gateway sets itself (framing, encoding, its own request ID and controls).
var neverForwarded = map[string]bool{
	"Authorization": true, "Cookie": true, "Api-Key": true, "X-Api-Key": true, "X-Goog-Api-Key": true,
	"Forwarded": true, "X-Real-Ip": true, "Host": true, "Content-Length": true,
	"Content-Type": true, "Accept": true, "Accept-Encoding": true, "Content-Encoding": true,
	"Expect": true, "X-Request-Id": true,
}

// upstreamOnly are response headers the client must not see: cookies of the
// provider, identifiers of the provider's account, and headers the gateway
// sets itself.
var upstreamOnly = map[string]bool{
	"Set-Cookie": true, "Set-Cookie2": true, "X-Request-Id": true,
	"Openai-Organization": true, "Openai-Project": true, "Content-Length": true,
	"Alt-Svc": true, "Strict-Transport-Security": true, "Server": true,
	"X-Content-Type-Options": true,
}

// Budget of the provider response headers relayed to a client. The
// transport refuses a header block over MaxResponseHeaderBytes outright; of
// what it accepts, CopyResponseHeaders relays at most maxRelayedHeaders
// fields and maxRelayedHeaderBytes bytes (names and values), dropping the
// rest: a client gets the provider's rate-limit and request headers, not
// whatever a misbehaving provider piles up.
const (
	MaxResponseHeaderBytes = 64 << 10
	maxRelayedHeaders      = 64
	maxRelayedHeaderBytes  = 16 << 10
)

// NeverForwarded reports whether a request header may not be forwarded
// whatever the routes file allows: credentials, hop-by-hop and forwarding
// headers, and the headers the gateway sets itself.
func NeverForwarded(name string) bool {
	k := textproto.CanonicalMIMEHeaderKey(name)
	return neverForwarded[k] || isHop(k) || strings.HasPrefix(k, "X-Forwarded-") || strings.HasPrefix(k, "X-Gateway-")
}

// Forwarding is which client request headers reach a provider: an
// allow-list, so a header the gateway has not thought about never reaches a
// provider whose answers cool a key every client shares. Content headers
// are part of the format's request itself (anthropic-version): forwarding
// them says nothing about who provoked the answer. Chosen headers are
// values the client picks freely (a beta flag, what the routes file's
// forward_headers allows): an attempt that carried one may have provoked
// the provider's refusal itself (Call's answer then says ClientChosen).
type Forwarding struct {
	content []string // canonical names
	chosen  []string // canonical names
}

// formatForwarding is what a provider format forwards by default.
func formatForwarding(format string) Forwarding {
	switch format {
	case FormatAnthropic:
		return Forwarding{content: []string{"Anthropic-Version"}, chosen: []string{"Anthropic-Beta"}}
	case FormatGemini, FormatVertex, FormatBedrock:
		// OpenAI-Beta means nothing to Gemini or Bedrock (and a bedrock
		// request's every header is signed).
		return Forwarding{}
	}
	return Forwarding{chosen: []string{"Openai-Beta"}}
}

// Allow adds headers the routes file names (forward_headers); the names
// have been validated (a header name, not NeverForwarded).
func (f *Forwarding) Allow(names []string) {
	for _, n := range names {
		k := textproto.CanonicalMIMEHeaderKey(n)
		if !contains(f.content, k) && !contains(f.chosen, k) {
			f.chosen = append(f.chosen, k)
		}
	}
}

func contains(list []string, k string) bool {
	for _, v := range list {
		if v == k {
			return true
		}
	}
	return false
}

// ForwardRequestHeaders copies the client headers f allows from src into
// dst and reports whether one of them was client-chosen. A nil f forwards
// nothing. A header the client listed in Connection is hop-by-hop and stays.
func ForwardRequestHeaders(dst, src http.Header, f *Forwarding) (chosen bool) {
	if f == nil || len(src) == 0 {
		return false
	}
	var conn map[string]bool
	if _, ok := src["Connection"]; ok {
		conn = connectionTokens(src)
	}
	copyHeader := func(k string) bool {
		vv, ok := src[k]
		if !ok || len(vv) == 0 || conn[k] {
			return false
		}
		dst[k] = append(vv[:0:0], vv...)
		return true
	}
	for _, k := range f.content {
		copyHeader(k)
	}
	for _, k := range f.chosen {
		if copyHeader(k) {
			chosen = true
		}
	}
	return chosen
}

// connectionTokens returns the header names listed in Connection, which are
// hop-by-hop for this message too.
func connectionTokens(h http.Header) map[string]bool {
	var out map[string]bool
	for _, v := range h.Values("Connection") {
		for _, tok := range strings.Split(v, ",") {
			if tok = strings.TrimSpace(tok); tok != "" {
				if out == nil {
					out = map[string]bool{}
				}
				out[textproto.CanonicalMIMEHeaderKey(tok)] = true
			}
		}
	}
	return out
}

func isHop(k string) bool {
	for _, h := range hopHeaders {
		if k == h {
			return true
		}
	}
	return false
}

// CopyResponseHeaders copies provider response headers that may reach the
// client into dst, within the relayed-header budget: fields past
// maxRelayedHeaders or maxRelayedHeaderBytes are dropped (which ones, of a
// provider that sends that many, is map order), Content-Type never.
func CopyResponseHeaders(dst, src http.Header) {
	var conn map[string]bool
	if _, ok := src["Connection"]; ok {
		conn = connectionTokens(src)
	}
	fields, size := 0, 0
	for k, vv := range src {
		if isHop(k) || upstreamOnly[k] || conn[k] || strings.HasPrefix(k, "X-Gateway-") {
			// The gateway's own headers (its cost, its budget) are
			// never the provider's to set: a provider sending
			// X-Gateway-Cost-Usd: 0 must not reach the client as ours.
			continue
		}
		if _, ours := dst[k]; ours && strings.HasPrefix(k, "X-Ratelimit-") {
			// The gateway's own client limits were set already; the
			// provider's describe the gateway's key, not this client.
			continue
		}
		if k != "Content-Type" { // the answer's own type is never dropped
			n := 0
			for _, v := range vv {
				n += len(k) + len(v)
			}
			if fields+len(vv) > maxRelayedHeaders || size+n > maxRelayedHeaderBytes {
				continue
			}
			fields, size = fields+len(vv), size+n
		}
		dst[k] = append(dst[k][:0:0], vv...)
	}
}
