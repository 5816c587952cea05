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

// clientOnly are request headers that must never reach a provider: the
// client's own credentials, cookies, forwarding claims we do not trust, and
// headers the gateway sets itself.
var clientOnly = map[string]bool{
	"Authorization": true, "Cookie": true, "Api-Key": true, "X-Api-Key": true,
	"Forwarded": true, "X-Forwarded-For": true, "X-Forwarded-Host": true,
	"X-Forwarded-Proto": true, "X-Forwarded-Port": true, "X-Real-Ip": true,
	"Host": true, "Content-Length": true, "Accept-Encoding": true,
	"X-Request-Id": true, "X-Gateway-Priority": true,
	"Openai-Organization": true, "Openai-Project": true,
}

// upstreamOnly are response headers the client must not see: cookies of the
// provider, identifiers of the provider's account, and headers the gateway
// sets itself.
var upstreamOnly = map[string]bool{
	"Set-Cookie": true, "Set-Cookie2": true, "X-Request-Id": true,
	"Openai-Organization": true, "Openai-Project": true, "Content-Length": true,
	"Alt-Svc": true, "Strict-Transport-Security": true, "Server": true,
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

// ForwardRequestHeaders copies end-to-end client headers that may reach the
// provider into dst.
func ForwardRequestHeaders(dst, src http.Header) {
	conn := connectionTokens(src)
	for k, vv := range src {
		if isHop(k) || clientOnly[k] || conn[k] || strings.HasPrefix(k, "X-Forwarded-") || strings.HasPrefix(k, "X-Gateway-") {
			continue
		}
		dst[k] = append(dst[k][:0:0], vv...)
	}
}

// CopyResponseHeaders copies provider response headers that may reach the
// client into dst.
func CopyResponseHeaders(dst, src http.Header) {
	conn := connectionTokens(src)
	for k, vv := range src {
		if isHop(k) || upstreamOnly[k] || conn[k] {
			continue
		}
		if _, ours := dst[k]; ours && strings.HasPrefix(k, "X-Ratelimit-") {
			// The gateway's own client limits were set already; the
			// provider's describe the gateway's key, not this client.
			continue
		}
		dst[k] = append(dst[k][:0:0], vv...)
	}
}
