package upstream

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/mockupstream"
	"github.com/llmgw/gateway/internal/secret"
)

// BenchmarkFirstChunk: one streamed chat request from the client's body to
// its first chunk of client bytes, as the attempt loop makes it (parse,
// Build, Send, Reader, the event reader until an event has output), for
// the pass-through and each translated format, against the mock on
// loopback in this process. ns/op is the whole stream (drained, so the
// connection is reused); first-ns/op is the time to the first chunk, the
// `translate` bench phase's quantity without the gateway's HTTP server.
// Comparing first-ns/op across the sub-benchmarks shows what a translated
// stream's first chunk pays over the pass-through's.
func BenchmarkFirstChunk(b *testing.B) {
	m := mockupstream.New(mockupstream.Behavior{Chunks: 2})
	m.EnableBedrock("us-east-1", "AKIDBENCHMOCK", "bench-mock-secret", "")
	srv := httptest.NewServer(m)
	defer srv.Close()
	body := []byte(`{"model":"bench-model","messages":[{"role":"user","content":"Say hello in one short sentence."}],` +
		`"max_tokens":32,"stream":true,"stream_options":{"include_usage":true}}`)
	bearer := Auth{Style: AuthBearer}
	for _, bc := range []struct {
		name, format, base string
		auth               Auth
	}{
		{"pass", FormatOpenAI, "/v1", bearer},
		{"anthropic", FormatAnthropic, "/v1", Auth{Style: AuthXAPIKey}},
		{"bedrock", FormatBedrock, "", Auth{Style: AuthAWS, AWS: NewAWSSigner("us-east-1", "AKIDBENCHMOCK", "bench-mock-secret", "")}},
		{"gemini", FormatGemini, "/v1beta", Auth{Style: AuthHeader, Header: "X-Goog-Api-Key"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ep, err := NewEndpoint(bc.format, srv.URL+bc.base, nil, bc.auth, nil, 0)
			if err != nil {
				b.Fatal(err)
			}
			c := NewClient(ClientOptions{Provider: bc.name})
			defer c.CloseIdle()
			ctx := context.Background()
			var first time.Duration
			var pass PassReader
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				req, err := ParseChatRequest(body)
				if err != nil {
					b.Fatal(err)
				}
				call := Call{Key: secret.New("sk-bench"), Auth: ep.Auth, Extra: ep.Extra, Defaults: ep.Defaults, Stream: true}
				if err := req.Build(ep, "bench-upstream", &call); err != nil {
					b.Fatal(err)
				}
				resp, err := c.Send(ctx, &call)
				if err != nil {
					b.Fatal(err)
				}
				rd := req.Reader(ep, &pass)
				events := NewEventReader(resp.Body)
				var out []byte
				got := false
				for {
					ev, comment, err := events.Next()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					if comment {
						continue
					}
					o, err := rd.Event(out[:0], ev, got)
					if err != nil {
						b.Fatal(err)
					}
					if rd != Reader(&pass) {
						out = o
					}
					if len(o) > 0 && !got {
						got = true
						first += time.Since(start)
					}
				}
				if !rd.Done() {
					if _, err := rd.End(nil); err != nil { // gemini has no last event
						b.Fatal(err)
					}
				}
				if !got {
					b.Fatalf("%s: no chunk", bc.name)
				}
				events.Close()
				resp.Body.Close()
			}
			b.ReportMetric(float64(first.Nanoseconds())/float64(b.N), "first-ns/op")
		})
	}
}
