package upstream

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/mockupstream"
	"github.com/llmgw/gateway/internal/secret"
)

// firstChunkBody is the bench phase's request.
var firstChunkBody = []byte(`{"model":"bench-model","messages":[{"role":"user","content":"Say hello in one short sentence."}],` +
	`"max_tokens":32,"stream":true,"stream_options":{"include_usage":true}}`)

type firstChunkCase struct {
	name, format, base string
	auth               Auth
}

// firstChunkCases are the pass-through and each translated format, with
// the mock's base path of that format.
func firstChunkCases() []firstChunkCase {
	return []firstChunkCase{
		{"pass", FormatOpenAI, "/v1", Auth{Style: AuthBearer}},
		{"anthropic", FormatAnthropic, "/v1", Auth{Style: AuthXAPIKey}},
		{"bedrock", FormatBedrock, "", Auth{Style: AuthAWS, AWS: NewAWSSigner("us-east-1", "AKIDBENCHMOCK", "bench-mock-secret", "")}},
		{"gemini", FormatGemini, "/v1beta", Auth{Style: AuthHeader, Header: "X-Goog-Api-Key"}},
	}
}

// eachFirstChunkCase runs f as a sub-benchmark per case, with the case's
// endpoint on a mock in this process and a client for it. As in the bench
// phase, the mock checks a signature's shape, not its value
// (EnableBedrock would re-sign each request in this process).
func eachFirstChunkCase(b *testing.B, f func(b *testing.B, bc firstChunkCase, ep *Endpoint, c *Client)) {
	srv := httptest.NewServer(mockupstream.New(mockupstream.Behavior{Chunks: 2}))
	defer srv.Close()
	for _, bc := range firstChunkCases() {
		b.Run(bc.name, func(b *testing.B) {
			ep, err := NewEndpoint(bc.format, srv.URL+bc.base, nil, bc.auth, nil, 0)
			if err != nil {
				b.Fatal(err)
			}
			c := NewClient(ClientOptions{Provider: bc.name})
			defer c.CloseIdle()
			f(b, bc, ep, c)
		})
	}
}

// firstChunkCall parses the request and builds its call to ep, as the
// attempt loop does.
func firstChunkCall(b *testing.B, ep *Endpoint) (*ChatRequest, Call) {
	req, err := ParseChatRequest(firstChunkBody)
	if err != nil {
		b.Fatal(err)
	}
	call := Call{Key: secret.New("sk-bench"), Auth: ep.Auth, Extra: ep.Extra, Defaults: ep.Defaults, Stream: true}
	if err := req.Build(ep, "bench-upstream", &call); err != nil {
		b.Fatal(err)
	}
	return req, call
}

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
	eachFirstChunkCase(b, func(b *testing.B, bc firstChunkCase, ep *Endpoint, c *Client) {
		ctx := context.Background()
		var first time.Duration
		var pass PassReader
		b.ReportAllocs()
		for b.Loop() {
			start := time.Now()
			req, call := firstChunkCall(b, ep)
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

// BenchmarkFirstChunkCPU: the gateway's own work for a streamed chat
// request's first chunk, without the network or the mock: parse, Build,
// the request and its headers (signed for bedrock), Reader, and the
// provider's first bytes (captured from the mock once) read as events
// until one has client output. The difference between the pass-through
// and a translated format is what translating costs the first chunk in
// CPU.
func BenchmarkFirstChunkCPU(b *testing.B) {
	eachFirstChunkCase(b, func(b *testing.B, bc firstChunkCase, ep *Endpoint, c *Client) {
		ctx := context.Background()
		// The answer's bytes as the provider sent them.
		_, call := firstChunkCall(b, ep)
		resp, err := c.Send(ctx, &call)
		if err != nil {
			b.Fatal(err)
		}
		raw := resp.Body
		if fb, ok := raw.(*frameBody); ok {
			raw = fb.body
		}
		answer, err := io.ReadAll(raw)
		resp.Body.Close()
		if err != nil {
			b.Fatal(err)
		}
		var pass PassReader
		var out []byte
		var body bytes.Reader
		b.ReportAllocs()
		for b.Loop() {
			req, call := firstChunkCall(b, ep)
			if _, err := call.request(ctx); err != nil {
				b.Fatal(err)
			}
			rd := req.Reader(ep, &pass)
			body.Reset(answer)
			var r io.ReadCloser = io.NopCloser(&body)
			if call.bedrock {
				r = newFrameBody(r)
			}
			events := NewEventReader(r)
			for {
				ev, _, err := events.Next()
				if err != nil {
					b.Fatal(err)
				}
				o, err := rd.Event(out[:0], ev, false)
				if err != nil {
					b.Fatal(err)
				}
				if rd != Reader(&pass) {
					out = o
				}
				if len(o) > 0 {
					break
				}
			}
			events.Close()
		}
	})
}
