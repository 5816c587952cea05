package upstream

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
)

// converseBody is a Converse request of the size a chat turn makes: a
// system block, a few messages, a tool, the inference settings.
var converseBody = []byte(`{"system":[{"text":"You are a helpful assistant. Answer briefly."}],` +
	`"messages":[{"role":"user","content":[{"text":"` + strings.Repeat("What is the weather like in Paris today? ", 12) + `"}]},` +
	`{"role":"assistant","content":[{"text":"Let me look that up."}]},{"role":"user","content":[{"text":"Thanks."}]}],` +
	`"toolConfig":{"tools":[{"toolSpec":{"name":"get_weather","description":"the weather in a city","inputSchema":{"json":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}}]},` +
	`"inferenceConfig":{"maxTokens":512,"temperature":0.2,"stopSequences":["END"]}}`)

// BenchmarkBedrockSign: SigV4 over one Converse request as Client.Send
// signs it (its headers set, static credentials with a session token,
// aws-sdk-go-v2's signer hashing the body): the added cost per bedrock
// attempt. The target is 20µs.
func BenchmarkBedrockSign(b *testing.B) {
	s := NewAWSSigner("us-east-1", "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "FwoGZXIvYXdzEXAMPLEsessiontoken")
	ctx := context.Background()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost,
		"https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse", bytes.NewReader(converseBody))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header["Idempotency-Key"] = nil
	b.SetBytes(int64(len(converseBody)))
	b.ReportAllocs()
	for b.Loop() {
		// Each iteration signs afresh, as each attempt's new request is.
		for _, h := range []string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token"} {
			delete(req.Header, h)
		}
		if _, err := s.Sign(ctx, req, converseBody); err != nil {
			b.Fatal(err)
		}
	}
	if !strings.HasPrefix(req.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/") {
		b.Fatalf("not signed: %v", req.Header)
	}
}
