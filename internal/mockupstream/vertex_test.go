package mockupstream

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"io"
	"net/http"
	"strings"
	"testing"

	"cloud.google.com/go/auth/credentials"
	"golang.org/x/oauth2/google"
	"google.golang.org/genai"
)

const vertexPath = "/v1/projects/p1/locations/us-central1/publishers/google/models/gemini-2.5-flash:"

// TestVertexTokenAndGenerate: the oauth2 library's JWT bearer grant gets a
// token from /token; the Vertex paths answer Gemini's bodies with it and
// refuse a request without it, or with a token the mock did not issue.
func TestVertexTokenAndGenerate(t *testing.T) {
	s, ts := start(t, Behavior{Chunks: 2})
	key, _, err := s.VertexServiceAccount(ts.URL+PathToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := google.JWTConfigFromJSON(key, vertexScope)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := cfg.TokenSource(context.Background()).Token()
	if err != nil {
		t.Fatal(err)
	}
	if s.TokenCalls() != 1 || !strings.HasPrefix(tok.AccessToken, "mock-vertex-token-") {
		t.Fatalf("token %q after %d calls", tok.AccessToken, s.TokenCalls())
	}
	post := func(method, bearer string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+vertexPath+method, strings.NewReader(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`))
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post("generateContent", tok.AccessToken); code != 200 || !strings.Contains(body, "Hello from mock chunk 1 2") {
		t.Fatalf("generateContent: %d %s", code, body)
	}
	if code, body := post("streamGenerateContent?alt=sse", tok.AccessToken); code != 200 || !strings.Contains(body, `"finishReason":"STOP"`) {
		t.Fatalf("stream: %d %s", code, body)
	}
	for _, bad := range []string{"", "made-up"} {
		if code, body := post("generateContent", bad); code != http.StatusUnauthorized || !strings.Contains(body, "UNAUTHENTICATED") {
			t.Fatalf("token %q: %d %s", bad, code, body)
		}
	}
	if code, _ := post("batchEmbedContents", tok.AccessToken); code != http.StatusNotFound {
		t.Fatalf("batchEmbedContents on Vertex: %d", code)
	}
}

// TestVertexTokenRefusals: an assertion signed by another key is refused,
// and TokenStatus fails every grant.
func TestVertexTokenRefusals(t *testing.T) {
	s, ts := start(t, Behavior{})
	key, _, err := s.VertexServiceAccount(ts.URL+PathToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	s.EnableVertex(&other.PublicKey, ts.URL+PathToken, "")
	cfg, _ := google.JWTConfigFromJSON(key, vertexScope)
	if _, err := cfg.TokenSource(context.Background()).Token(); err == nil || !strings.Contains(err.Error(), "invalid_grant") {
		t.Fatalf("a foreign signature: %v", err)
	}
	key, _, _ = s.VertexServiceAccount(ts.URL+PathToken, nil)
	cfg, _ = google.JWTConfigFromJSON(key, vertexScope)
	s.SetBehavior(Behavior{TokenStatus: http.StatusInternalServerError})
	if _, err := cfg.TokenSource(context.Background()).Token(); err == nil || !strings.Contains(err.Error(), "500") {
		t.Fatalf("TokenStatus 500: %v", err)
	}
	s.SetBehavior(Behavior{})
	if _, err := cfg.TokenSource(context.Background()).Token(); err != nil {
		t.Fatal(err)
	}
	if n := s.TokenCalls(); n != 2 {
		t.Fatalf("token calls %d, want 2 (EnableVertex starts the count again)", n)
	}
}

// TestVertexTokenStatusAdmin: TokenStatus is set through /mock/behavior
// like the other fault controls, and validated like Status.
func TestVertexTokenStatusAdmin(t *testing.T) {
	s, ts := start(t, Behavior{})
	resp, err := http.Post(ts.URL+"/mock/behavior", "application/json", strings.NewReader(`{"TokenStatus":503}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || s.Behavior().TokenStatus != 503 {
		t.Fatalf("POST /mock/behavior: %d, TokenStatus %d", resp.StatusCode, s.Behavior().TokenStatus)
	}
	if err := (Behavior{TokenStatus: 200}).Validate(); err == nil {
		t.Fatal("TokenStatus 200 validated")
	}
}

// TestVertexSDK: Google's genai client on its Vertex AI backend, with
// credentials made from the mock's service-account key (cloud.google.com/go/auth
// fetches the token from the mock's token endpoint), reads the Vertex
// paths' answers whole and streamed: text, finish reason and usage.
func TestVertexSDK(t *testing.T) {
	s, ts := start(t, Behavior{Chunks: 3})
	key, _, err := s.VertexServiceAccount(ts.URL+PathToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := credentials.NewCredentialsFromJSON(credentials.ServiceAccount, key,
		&credentials.DetectOptions{Scopes: []string{vertexScope}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c, err := genai.NewClient(ctx, &genai.ClientConfig{
		Backend: genai.BackendVertexAI, Project: "p1", Location: "us-central1", Credentials: creds,
		HTTPOptions: genai.HTTPOptions{BaseURL: ts.URL, APIVersion: "v1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	const want = "Hello from mock chunk 1 2 3"
	resp, err := c.Models.GenerateContent(ctx, "gemini-2.5-flash", genai.Text("hi"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text() != want || resp.Candidates[0].FinishReason != genai.FinishReasonStop ||
		resp.UsageMetadata == nil || resp.UsageMetadata.CandidatesTokenCount != 3 {
		t.Fatalf("text %q finish %s usage %+v", resp.Text(), resp.Candidates[0].FinishReason, resp.UsageMetadata)
	}
	if text, finish, usage := genaiStream(t, c); text != want || finish != genai.FinishReasonStop || usage == nil || usage.CandidatesTokenCount != 3 {
		t.Fatalf("stream: %q %s %+v", text, finish, usage)
	}
	// One token served both calls: the SDK caches it as the gateway does.
	if n := s.TokenCalls(); n != 1 {
		t.Fatalf("token calls %d, want 1", n)
	}
}
