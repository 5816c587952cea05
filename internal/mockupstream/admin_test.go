package mockupstream

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
)

// getJSON GETs path from the mock and returns the status and body.
func getJSON(t *testing.T, ts *httptest.Server, path string) (int, []byte) {
	t.Helper()
	resp, err := ts.Client().Get(ts.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, readAll(t, resp)
}

// TestLastRequestAt: each endpoint keeps its own last request, both spellings of a
// path read the same record, "" reads the latest of any, and LastRequest stays chat's.
func TestLastRequestAt(t *testing.T) {
	s, ts := start(t, Behavior{})
	if _, ok := s.LastRequestAt(""); ok {
		t.Fatal("LastRequestAt(\"\") before any request reports one")
	}
	readAll(t, post(t, context.Background(), ts, chatBody))
	readAll(t, postTo(t, context.Background(), ts, "/messages?beta=true", messagesBody, anthropicAuth...))
	readAll(t, postTo(t, context.Background(), ts, pathEmbeddings, `{"model":"e","input":"x"}`))

	tests := []struct {
		path, wantPath, wantBody string
		wantOK                   bool
	}{
		{pathChat, pathChat, chatBody, true},
		{pathMessages, "/messages", messagesBody, true},
		{"/messages", "/messages", messagesBody, true},
		{"/embeddings", pathEmbeddings, `{"model":"e","input":"x"}`, true},
		{"", pathEmbeddings, `{"model":"e","input":"x"}`, true},
		{pathResponses, "", "", false},
		{"/v1/models", "", "", false},
		{"/chat/completions", "", "", false},
	}
	for _, tt := range tests {
		got, ok := s.LastRequestAt(tt.path)
		if ok != tt.wantOK || got.Path != tt.wantPath || string(got.Body) != tt.wantBody {
			t.Errorf("LastRequestAt(%q) = %q %q %v, want %q %q %v", tt.path, got.Path, got.Body, ok, tt.wantPath, tt.wantBody, tt.wantOK)
		}
	}
	m, _ := s.LastRequestAt(pathMessages)
	if m.Method != http.MethodPost || m.Query.Get("beta") != "true" || m.Header.Get("X-Api-Key") != "sk-ant-test" ||
		m.Header.Get("Anthropic-Version") != "2023-06-01" {
		t.Errorf("recorded messages request = %+v", m)
	}
	if got := s.LastRequest(); got.Path != pathChat || string(got.Body) != chatBody {
		t.Errorf("LastRequest() = %q %q, want the chat request", got.Path, got.Body)
	}
}

// TestLastRequestHTTP: GET /mock/last-request gives a test in another process what
// the gateway sent: headers, and the body as JSON it can index (system, max_tokens).
func TestLastRequestHTTP(t *testing.T) {
	s, ts := start(t, Behavior{})
	if status, raw := getJSON(t, ts, "/mock/last-request?path=/v1/messages"); status != http.StatusNotFound {
		t.Errorf("before any request: %d %s, want 404", status, raw)
	}
	if status, raw := getJSON(t, ts, "/mock/last-request?path=/v1/nothing"); status != http.StatusBadRequest {
		t.Errorf("unknown path: %d %s, want 400", status, raw)
	}
	readAll(t, postTo(t, context.Background(), ts, pathMessages, messagesBody, anthropicAuth...))
	readAll(t, post(t, context.Background(), ts, `not json`))

	var got struct {
		Method  string              `json:"method"`
		Path    string              `json:"path"`
		Query   map[string][]string `json:"query"`
		Headers http.Header         `json:"headers"`
		Body    struct {
			System    string `json:"system"`
			MaxTokens int    `json:"max_tokens"`
		} `json:"body"`
	}
	status, raw := getJSON(t, ts, "/mock/last-request?path="+url.QueryEscape("/messages"))
	if status != http.StatusOK {
		t.Fatalf("got %d %s", status, raw)
	}
	decodeInto(t, string(raw), &got)
	if got.Method != "POST" || got.Path != pathMessages || got.Headers.Get("X-Api-Key") != "sk-ant-test" ||
		got.Headers.Get("Anthropic-Version") != "2023-06-01" || got.Body.System != "be brief" || got.Body.MaxTokens != 64 {
		t.Errorf("last request = %s", raw)
	}

	// A body that is not JSON comes back as a string; without ?path= the latest of any.
	var chat struct {
		Path string `json:"path"`
		Body string `json:"body"`
	}
	status, raw = getJSON(t, ts, "/mock/last-request")
	decodeInto(t, string(raw), &chat)
	if status != http.StatusOK || chat.Path != pathChat || chat.Body != "not json" {
		t.Errorf("latest request = %d %s, want the chat one with its body as a string", status, raw)
	}
	waitIdle(t, s)
}

// TestStatsHTTPByPath: /mock/stats keeps its exact shape and totals, and ?path= narrows
// it to one endpoint.
func TestStatsHTTPByPath(t *testing.T) {
	s, ts := start(t, Behavior{})
	readAll(t, post(t, context.Background(), ts, chatBody))
	readAll(t, postTo(t, context.Background(), ts, "/responses", responsesBody, HeaderStatus, "500"))
	readAll(t, postTo(t, context.Background(), ts, pathMessages, messagesBody)) // no key: rejected
	waitIdle(t, s)

	tests := []struct {
		query      string
		wantStatus int
		want       string
	}{
		{"", 200, `{"requests":3,"in_flight":0,"completed":1,"failed":1,"rejected":1,"cancelled":0,"resets":0}`},
		{"?path=/v1/chat/completions", 200, `{"requests":1,"in_flight":0,"completed":1,"failed":0,"rejected":0,"cancelled":0,"resets":0}`},
		{"?path=/v1/responses", 200, `{"requests":1,"in_flight":0,"completed":0,"failed":1,"rejected":0,"cancelled":0,"resets":0}`},
		{"?path=/messages", 200, `{"requests":1,"in_flight":0,"completed":0,"failed":0,"rejected":1,"cancelled":0,"resets":0}`},
		{"?path=/embeddings", 200, `{"requests":0,"in_flight":0,"completed":0,"failed":0,"rejected":0,"cancelled":0,"resets":0}`},
		{"?path=/v1/models", 400, ""},
	}
	for _, tt := range tests {
		status, raw := getJSON(t, ts, "/mock/stats"+tt.query)
		if status != tt.wantStatus || tt.want != "" && string(raw) != tt.want {
			t.Errorf("/mock/stats%s = %d %s, want %d %s", tt.query, status, raw, tt.wantStatus, tt.want)
		}
		if tt.want != "" && !json.Valid(raw) {
			t.Errorf("invalid JSON %s", raw)
		}
	}
}
