package upstream

import (
	"net/http"
	"testing"
)

// TestHeaderHygiene: credentials, hop-by-hop and forwarding claims never cross.
func TestHeaderHygiene(t *testing.T) {
	in := http.Header{
		"Authorization": {"Bearer client-token"}, "Cookie": {"s=1"}, "Proxy-Authorization": {"x"},
		"Connection": {"keep-alive, X-Secret-Hop"}, "X-Secret-Hop": {"1"}, "Te": {"trailers"},
		"X-Forwarded-For": {"1.2.3.4"}, "Forwarded": {"for=1.2.3.4"}, "X-Request-Id": {"abc"},
		"X-Gateway-Priority": {"background"}, "Api-Key": {"k"}, "Upgrade": {"h2c"},
		"Openai-Beta": {"assistants=v2"}, "User-Agent": {"openai-go"},
	}
	out := http.Header{}
	ForwardRequestHeaders(out, in)
	for k := range out {
		switch k {
		case "Openai-Beta", "User-Agent":
		default:
			t.Errorf("request header %s reached the provider", k)
		}
	}
	if out.Get("Openai-Beta") == "" {
		t.Error("end-to-end header dropped")
	}
	resp := http.Header{"Set-Cookie": {"a=b"}, "Connection": {"close, X-Hop"}, "X-Hop": {"1"},
		"Openai-Organization": {"org-secret"}, "Content-Type": {"text/event-stream"}, "Transfer-Encoding": {"chunked"},
		"X-Ratelimit-Remaining-Requests": {"9"}}
	cout := http.Header{}
	CopyResponseHeaders(cout, resp)
	if len(cout) != 2 || cout.Get("Content-Type") == "" || cout.Get("X-Ratelimit-Remaining-Requests") == "" {
		t.Errorf("response headers relayed: %v", cout)
	}
}
