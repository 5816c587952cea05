package upstream

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// TestForwardRequestHeaders is the request-header policy in one table: per
// provider format and forward_headers, which client header reaches the
// provider and whether it makes the attempt client-chosen. Everything not
// allowed stays at the gateway, whatever its kind.
func TestForwardRequestHeaders(t *testing.T) {
	openai := formatForwarding(FormatOpenAI)
	anthropic := formatForwarding(FormatAnthropic)
	allowed := formatForwarding(FormatOpenAI)
	allowed.Allow([]string{"OpenAI-Organization", "openai-project", "OpenAI-Beta"})
	tests := []struct {
		name    string
		f       *Forwarding
		header  string
		value   string
		forward bool
		chosen  bool
	}{
		{"credentials", &allowed, "Authorization", "Bearer client", false, false},
		{"x-api-key", &anthropic, "X-Api-Key", "client", false, false},
		{"cookie", &allowed, "Cookie", "s=1", false, false},
		{"hop-by-hop", &allowed, "Te", "trailers", false, false},
		{"forwarding claim", &allowed, "X-Forwarded-For", "1.2.3.4", false, false},
		{"gateway control", &allowed, "X-Gateway-Priority", "background", false, false},
		{"request id", &allowed, "X-Request-Id", "abc", false, false},
		{"client user agent", &openai, "User-Agent", "client/1", false, false},
		{"client accept", &openai, "Accept", "text/html", false, false},
		{"made-up header", &openai, "X-Mock-Status", "401", false, false},
		{"organization, not allowed", &openai, "Openai-Organization", "org-bogus", false, false},
		{"project, not allowed", &openai, "Openai-Project", "proj-bogus", false, false},
		{"organization, allowed", &allowed, "Openai-Organization", "org-1", true, true},
		{"project, allowed", &allowed, "Openai-Project", "proj-1", true, true},
		{"openai beta", &openai, "Openai-Beta", "assistants=v2", true, true},
		{"openai beta on anthropic", &anthropic, "Openai-Beta", "assistants=v2", false, false},
		{"anthropic version", &anthropic, "Anthropic-Version", "2023-06-01", true, false},
		{"anthropic beta", &anthropic, "Anthropic-Beta", "tools-2024", true, true},
		{"anthropic beta on openai", &openai, "Anthropic-Beta", "tools-2024", false, false},
		{"no policy", nil, "Openai-Beta", "assistants=v2", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := http.Header{}
			chosen := ForwardRequestHeaders(out, http.Header{tt.header: {tt.value}, "Content-Length": {"9"}}, tt.f)
			if got := out.Get(tt.header) == tt.value; got != tt.forward || chosen != tt.chosen {
				t.Fatalf("%s forwarded %v chosen %v, want %v %v (out %v)", tt.header, got, chosen, tt.forward, tt.chosen, out)
			}
			if len(out) > 1 {
				t.Fatalf("more than the header forwarded: %v", out)
			}
		})
	}
	// A header the client names in Connection is hop-by-hop, allowed or not.
	out := http.Header{}
	if ForwardRequestHeaders(out, http.Header{"Connection": {"keep-alive, OpenAI-Beta"}, "Openai-Beta": {"x"}}, &openai) || len(out) != 0 {
		t.Fatalf("a Connection-listed header crossed: %v", out)
	}
}

// TestNeverForwarded: the routes file cannot allow credentials, hop-by-hop
// headers or the gateway's own, in any spelling.
func TestNeverForwarded(t *testing.T) {
	for _, h := range []string{"authorization", "Cookie", "x-api-key", "Proxy-Authorization", "Connection", "Host",
		"Content-Length", "transfer-encoding", "X-Forwarded-Host", "x-gateway-deadline", "X-Request-Id"} {
		if !NeverForwarded(h) {
			t.Errorf("%s may be forwarded", h)
		}
	}
	for _, h := range []string{"OpenAI-Organization", "OpenAI-Project", "User-Agent", "X-Custom"} {
		if NeverForwarded(h) {
			t.Errorf("%s may not be forwarded", h)
		}
	}
}

// TestCopyResponseHeaders: provider cookies, account ids, hop-by-hop
// headers and the gateway's own never reach the client, and a provider that
// piles up headers gets at most the relayed-header budget through, with its
// Content-Type kept.
func TestCopyResponseHeaders(t *testing.T) {
	resp := http.Header{"Set-Cookie": {"a=b"}, "Connection": {"close, X-Hop"}, "X-Hop": {"1"},
		"Openai-Organization": {"org-secret"}, "Content-Type": {"text/event-stream"}, "Transfer-Encoding": {"chunked"},
		"X-Ratelimit-Remaining-Requests": {"9"}, "X-Content-Type-Options": {"sniff"}}
	cout := http.Header{}
	CopyResponseHeaders(cout, resp)
	if len(cout) != 2 || cout.Get("Content-Type") == "" || cout.Get("X-Ratelimit-Remaining-Requests") == "" {
		t.Errorf("response headers relayed: %v", cout)
	}

	pile := http.Header{"Content-Type": {"application/json"}}
	for i := range 500 {
		pile["X-Pile-"+strconv.Itoa(i)] = []string{strings.Repeat("v", 100)}
	}
	pile["X-Huge"] = []string{strings.Repeat("h", 1<<20)}
	cout = http.Header{}
	CopyResponseHeaders(cout, pile)
	fields, size := 0, 0
	for k, vv := range cout {
		if k == "Content-Type" {
			continue
		}
		for _, v := range vv {
			fields, size = fields+1, size+len(k)+len(v)
		}
	}
	if cout.Get("Content-Type") != "application/json" || fields == 0 || fields > maxRelayedHeaders || size > maxRelayedHeaderBytes {
		t.Errorf("relayed %d fields, %d bytes (Content-Type %q), want 1..%d fields within %d bytes",
			fields, size, cout.Get("Content-Type"), maxRelayedHeaders, maxRelayedHeaderBytes)
	}
}

// TestJSONContentType: which provider Content-Types a non-streaming 2xx
// may carry to be relayed.
func TestJSONContentType(t *testing.T) {
	for ct, want := range map[string]bool{
		"": true, "application/json": true, "application/json; charset=utf-8": true, "Application/JSON": true,
		"application/problem+json": true, "text/html": false, "text/html; charset=utf-8": false,
		"application/jsonx": false, "text/plain": false, "application/json\x00": false,
	} {
		if got := jsonContentType(ct); got != want {
			t.Errorf("jsonContentType(%q) = %v, want %v", ct, got, want)
		}
	}
}

// sdkHeaders is what an OpenAI SDK sends with a chat request.
var sdkHeaders = http.Header{
	"Authorization": {"Bearer sk-client"}, "Content-Type": {"application/json"}, "Accept": {"application/json"},
	"User-Agent": {"OpenAI/Python 1.50.0"}, "X-Stainless-Lang": {"python"}, "X-Stainless-Package-Version": {"1.50.0"},
	"X-Stainless-Os": {"Linux"}, "X-Stainless-Arch": {"x64"}, "X-Stainless-Runtime": {"CPython"},
	"X-Stainless-Runtime-Version": {"3.12.0"}, "X-Stainless-Retry-Count": {"0"}, "Content-Length": {"120"},
	"Accept-Encoding": {"gzip, deflate"}, "Connection": {"keep-alive"},
}

// BenchmarkForwardRequestHeaders: the per-attempt cost of choosing the
// client headers a provider gets, for an SDK's usual headers.
func BenchmarkForwardRequestHeaders(b *testing.B) {
	f := formatForwarding(FormatOpenAI)
	b.ReportAllocs()
	for b.Loop() {
		ForwardRequestHeaders(http.Header{}, sdkHeaders, &f)
	}
}
