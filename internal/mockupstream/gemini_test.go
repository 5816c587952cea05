package mockupstream

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/genai"
)

// geminiClient is Google's own Go SDK pointed at the mock.
func geminiClient(t *testing.T, url, key string) *genai.Client {
	t.Helper()
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey: key, Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: url, APIVersion: "v1beta"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestGeminiSDK: the real SDK reads the mock's answers, whole and streamed,
// text, usage, a function call and an error with its status.
func TestGeminiSDK(t *testing.T) {
	s, ts := start(t, Behavior{Chunks: 3, ReasoningTokens: 2, CachedTokens: 4})
	c := geminiClient(t, ts.URL, "AIza-mock-key")
	ctx := context.Background()
	const want = "Hello from mock chunk 1 2 3"
	resp, err := c.Models.GenerateContent(ctx, "gemini-2.5-flash", genai.Text("hi"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text() != want || resp.Candidates[0].FinishReason != genai.FinishReasonStop {
		t.Fatalf("text %q finish %s", resp.Text(), resp.Candidates[0].FinishReason)
	}
	u := resp.UsageMetadata
	if u == nil || u.CandidatesTokenCount != 3 || u.ThoughtsTokenCount != 2 || u.CachedContentTokenCount != 4 ||
		u.TotalTokenCount != u.PromptTokenCount+5 {
		t.Fatalf("usage %+v", u)
	}
	last, _ := s.LastRequestAt(pathGeminiFor("gemini-2.5-flash", "generateContent"))
	if got := last.Header.Get("X-Goog-Api-Key"); got != "AIza-mock-key" {
		t.Fatalf("key header %q", got)
	}

	if text, finish, usage := genaiStream(t, c); text != want || finish != genai.FinishReasonStop || usage == nil || usage.CandidatesTokenCount != 3 {
		t.Fatalf("stream: %q %s %+v", text, finish, usage)
	}

	// maxOutputTokens below the answer cuts it there, finished MAX_TOKENS.
	resp, err = c.Models.GenerateContent(ctx, "gemini-2.5-flash", genai.Text("hi"), &genai.GenerateContentConfig{MaxOutputTokens: 2})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text() != "Hello from mock chunk 1 2" || resp.Candidates[0].FinishReason != genai.FinishReasonMaxTokens ||
		resp.UsageMetadata.CandidatesTokenCount != 2 {
		t.Fatalf("max tokens 2: %q %s %+v", resp.Text(), resp.Candidates[0].FinishReason, resp.UsageMetadata)
	}

	// A function call, as ToolUseFirst asks, reaches the SDK's parts.
	cfg := &genai.GenerateContentConfig{Tools: []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{Name: "lookup"}}}}}
	req, _ := http.NewRequest(http.MethodPost, "", nil) // only for the header's canonical name
	req.Header.Set(HeaderToolUse, ToolUseFirst)
	cfg.HTTPOptions = &genai.HTTPOptions{Headers: req.Header}
	resp, err = c.Models.GenerateContent(ctx, "gemini-2.5-flash", genai.Text("hi"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	calls := resp.FunctionCalls()
	if len(calls) != 1 || calls[0].Name != "lookup" || calls[0].Args["identity"] != "mock" {
		t.Fatalf("function calls %+v", calls)
	}

	// Embeddings: one unit vector per content, outputDimensionality long.
	dims := int32(4)
	emb, err := c.Models.EmbedContent(ctx, "gemini-embedding-001", []*genai.Content{
		{Parts: []*genai.Part{{Text: "a"}}}, {Parts: []*genai.Part{{Text: "b"}}}}, &genai.EmbedContentConfig{OutputDimensionality: &dims})
	if err != nil {
		t.Fatal(err)
	}
	if len(emb.Embeddings) != 2 || len(emb.Embeddings[0].Values) != 4 || emb.Embeddings[0].Values[0] == emb.Embeddings[1].Values[0] {
		t.Fatalf("embeddings %+v", emb.Embeddings)
	}

	// An injected 429 is RESOURCE_EXHAUSTED with the wait in RetryInfo.
	s.SetBehavior(Behavior{Status: http.StatusTooManyRequests, RetryAfter: "7"})
	_, err = c.Models.GenerateContent(ctx, "gemini-2.5-flash", genai.Text("hi"), nil)
	var apiErr genai.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != http.StatusTooManyRequests || apiErr.Status != "RESOURCE_EXHAUSTED" ||
		len(apiErr.Details) != 1 || apiErr.Details[0]["retryDelay"] != "7s" {
		t.Fatalf("429: %#v", err)
	}
}

// genaiStream streams "hi" to gemini-2.5-flash through c: the text, the
// finish reason and the last chunk's usage.
func genaiStream(t *testing.T, c *genai.Client) (string, genai.FinishReason, *genai.GenerateContentResponseUsageMetadata) {
	t.Helper()
	var text strings.Builder
	var finish genai.FinishReason
	var usage *genai.GenerateContentResponseUsageMetadata
	for chunk, err := range c.Models.GenerateContentStream(context.Background(), "gemini-2.5-flash", genai.Text("hi"), nil) {
		if err != nil {
			t.Fatal(err)
		}
		text.WriteString(chunk.Text())
		if fr := chunk.Candidates[0].FinishReason; fr != "" {
			finish = fr
		}
		usage = chunk.UsageMetadata
	}
	return text.String(), finish, usage
}

func pathGeminiFor(model, method string) string { return "/v1beta/models/" + model + ":" + method }

// TestGeminiKeysAndFaults: the key is required in x-goog-api-key and refused
// in the URL; KeyStatus reads it; a stream cut by the fault controls ends
// without a finishReason; the mid-stream error is Gemini's.
func TestGeminiKeysAndFaults(t *testing.T) {
	s, ts := start(t, Behavior{Chunks: 3})
	post := func(path, key string, hdr ...string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, ts.URL+path, strings.NewReader(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`))
		if key != "" {
			req.Header.Set("X-Goog-Api-Key", key)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	gen, stream := pathGeminiFor("m", "generateContent"), pathGeminiFor("m", "streamGenerateContent")+"?alt=sse"
	if resp, body := post(gen, ""); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, `"PERMISSION_DENIED"`) {
		t.Fatalf("no key: %d %s", resp.StatusCode, body)
	}
	if resp, body := post(gen+"?key=k", "k"); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("key in the URL: %d %s", resp.StatusCode, body)
	}
	if resp, _ := post(pathGeminiFor("m", "streamGenerateContent"), "k"); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("stream without alt=sse: %d", resp.StatusCode)
	}
	s.SetBehavior(Behavior{Chunks: 3, KeyStatus: map[string]int{"bad": http.StatusUnauthorized}})
	if resp, body := post(gen, "bad"); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, `"UNAUTHENTICATED"`) {
		t.Fatalf("KeyStatus: %d %s", resp.StatusCode, body)
	}
	if resp, _ := post(gen, "good"); resp.StatusCode != http.StatusOK {
		t.Fatalf("another key: %d", resp.StatusCode)
	}
	s.SetBehavior(Behavior{Chunks: 3, EndAfterChunks: 2})
	resp, body := post(stream, "k")
	if resp.StatusCode != http.StatusOK || strings.Contains(body, "finishReason") || strings.Count(body, "data: ") != 2 {
		t.Fatalf("cut stream: %s", body)
	}
	if !strings.Contains(body, "\r\n\r\n") {
		t.Fatalf("events not ended as Google's servers end them: %q", body)
	}
	s.SetBehavior(Behavior{Chunks: 3, ErrorAfterChunks: 1})
	if _, body := post(stream, "k"); !strings.Contains(body, `data: {"error":{"code":503,`) || strings.Contains(body, "finishReason") {
		t.Fatalf("stream error: %s", body)
	}
	s.SetBehavior(Behavior{Chunks: 2, FirstByteDelay: 50 * time.Millisecond})
	start := time.Now()
	if resp, body := post(stream, "k"); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"finishReason":"STOP"`) ||
		time.Since(start) < 50*time.Millisecond {
		t.Fatalf("first byte delay: %s", body)
	}
	if st, ok := s.StatsFor(gen); !ok || st.Requests == 0 {
		t.Fatalf("stats for a Gemini path: %+v %v", st, ok)
	}
}
