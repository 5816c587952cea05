package mockupstream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

type completionBody struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
}

// TestNonStream protects the chat.completion shape the gateway relays byte for byte:
// echoed model, id, created, content naming the identity, and usage always present.
func TestNonStream(t *testing.T) {
	tests := []struct {
		name        string
		b           Behavior
		body        string
		wantContent string
		wantModel   string
	}{
		{"defaults", Behavior{}, chatBody, "Hello from mock chunk 1 2 3", "gpt-test"},
		{"identity and chunks", Behavior{Identity: "primary", Chunks: 5}, chatBody, "Hello from primary chunk 1 2 3 4 5", "gpt-test"},
		{"escaped identity and model", Behavior{Identity: "a\"b\\c\n", Chunks: 1},
			`{"model":"m\u003c\"x","messages":[{}]}`, "Hello from a\"b\\c\n chunk 1", "m<\"x"},
		{"unicode identity", Behavior{Identity: "héllo\u2028"}, chatBody, "Hello from héllo\u2028 chunk 1 2 3", "gpt-test"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ts := start(t, tt.b)
			resp := post(t, context.Background(), ts, tt.body)
			raw := readAll(t, resp)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status = %d, want 200; body %s", resp.StatusCode, raw)
			}
			if got := resp.Header.Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", got)
			}
			wantIdentity := tt.b.Identity
			if wantIdentity == "" {
				wantIdentity = DefaultIdentity
			}
			if got := resp.Header.Get(HeaderIdentity); got != strings.TrimRight(wantIdentity, "\n") {
				t.Errorf("%s = %q, want %q", HeaderIdentity, got, wantIdentity)
			}
			if !strings.HasPrefix(resp.Header.Get("X-Request-Id"), "req_mock_") {
				t.Errorf("X-Request-Id = %q, want req_mock_*", resp.Header.Get("X-Request-Id"))
			}
			var c completionBody
			if err := json.Unmarshal(raw, &c); err != nil {
				t.Fatalf("body %s: %v", raw, err)
			}
			if !strings.HasPrefix(c.ID, "chatcmpl-mock-") || c.Object != "chat.completion" || c.Created != fixedNow.Unix() || c.Model != tt.wantModel {
				t.Errorf("got id=%q object=%q created=%d model=%q, want chatcmpl-mock-*, chat.completion, %d, %q",
					c.ID, c.Object, c.Created, c.Model, fixedNow.Unix(), tt.wantModel)
			}
			if len(c.Choices) != 1 {
				t.Fatalf("choices = %d, want 1", len(c.Choices))
			}
			ch := c.Choices[0]
			if ch.Message.Role != "assistant" || ch.Message.Content != tt.wantContent || ch.FinishReason != "stop" {
				t.Errorf("choice = %+v, want assistant %q stop", ch, tt.wantContent)
			}
			chunks := tt.b.Chunks
			if chunks == 0 {
				chunks = DefaultChunks
			}
			want := usage{PromptTokens: (len(tt.body) + 3) / 4, CompletionTokens: chunks}
			want.TotalTokens = want.PromptTokens + want.CompletionTokens
			if c.Usage == nil || *c.Usage != want {
				t.Errorf("usage = %+v, want %+v", c.Usage, want)
			}
			waitIdle(t, s)
			if st := s.Stats(); st.Requests != 1 || st.Completed != 1 || st.InFlight != 0 {
				t.Errorf("stats = %+v, want 1 request completed", st)
			}
		})
	}
}

// TestRoutes covers the non-chat endpoints and the errors for unknown paths and methods,
// and that they do not count as model requests.
func TestRoutes(t *testing.T) {
	s, ts := start(t, Behavior{})
	readAll(t, post(t, context.Background(), ts, chatBody))
	waitIdle(t, s)

	tests := []struct {
		method, path string
		wantStatus   int
		wantIn       string
	}{
		{http.MethodGet, "/v1/models", 200, `"id":"mock-model"`},
		{http.MethodGet, "/mock/stats", 200, `{"requests":1,"in_flight":0,"completed":1,"failed":0,"rejected":0,"cancelled":0,"resets":0}`},
		{http.MethodGet, "/v1/chat/completions", 405, `"code":"method_not_allowed"`},
		{http.MethodPost, "/v1/models", 405, `"code":"method_not_allowed"`},
		{http.MethodGet, "/chat/completions", 404, `"type":"invalid_request_error"`},
		{http.MethodGet, "/v1/messages", 405, `{"type":"error","error":{"type":"invalid_request_error"`},
		{http.MethodGet, "/embeddings", 405, `"code":"method_not_allowed"`},
		{http.MethodGet, "/v1/responses", 405, `"code":"method_not_allowed"`},
		{http.MethodGet, "/mock/last-request", 200, `"path":"/v1/chat/completions"`},
		{http.MethodPost, "/mock/last-request", 405, `"code":"method_not_allowed"`},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, ts.URL+tt.path, nil)
			resp, err := ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw := readAll(t, resp)
			if resp.StatusCode != tt.wantStatus || !bytes.Contains(raw, []byte(tt.wantIn)) {
				t.Errorf("got %d %s, want %d containing %s", resp.StatusCode, raw, tt.wantStatus, tt.wantIn)
			}
		})
	}
	if st := s.Stats(); st.Requests != 1 {
		t.Errorf("Requests = %d, want 1 (only model requests count)", st.Requests)
	}
}

// TestInvalidBody checks that a body the gateway mangled is refused as OpenAI would,
// recorded anyway, and counted as Rejected.
func TestInvalidBody(t *testing.T) {
	tests := []struct {
		name, body, wantParam string
	}{
		{"not json", `{"model":`, ""},
		{"not an object", `[1,2]`, ""},
		{"stream not bool", `{"model":"m","messages":[{}],"stream":"yes"}`, ""},
		{"missing model", `{"messages":[{}]}`, "model"},
		{"empty messages", `{"model":"m","messages":[]}`, "messages"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ts := start(t, Behavior{})
			resp := post(t, context.Background(), ts, tt.body)
			raw := readAll(t, resp)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status = %d, want 400", resp.StatusCode)
			}
			e := decodeError(t, raw)
			param := ""
			if e.Error.Param != nil {
				param = *e.Error.Param
			}
			if e.Error.Type != "invalid_request_error" || param != tt.wantParam {
				t.Errorf("error = %s, want invalid_request_error with param %q", raw, tt.wantParam)
			}
			if got := string(s.LastRequest().Body); got != tt.body {
				t.Errorf("LastRequest().Body = %q, want %q", got, tt.body)
			}
			waitIdle(t, s)
			if st := s.Stats(); st.Rejected != 1 {
				t.Errorf("stats = %+v, want Rejected 1", st)
			}
		})
	}
}

// TestInjectedStatus covers error answers: status, OpenAI error body, Retry-After, the
// FailRate extremes, and that stream requests fail before any SSE byte.
func TestInjectedStatus(t *testing.T) {
	tests := []struct {
		name           string
		b              Behavior
		body           string
		wantStatus     int
		wantType       string
		wantCode       string
		wantRetryAfter string
	}{
		{"status 503 with retry-after", Behavior{Status: 503, RetryAfter: "7"}, chatBody, 503, "server_error", "service_unavailable", "7"},
		{"status 429", Behavior{Status: 429, RetryAfter: "1"}, chatBody, 429, "rate_limit_error", "rate_limit_exceeded", "1"},
		{"status 401", Behavior{Status: 401}, chatBody, 401, "authentication_error", "invalid_api_key", ""},
		{"status 400", Behavior{Status: 400}, chatBody, 400, "invalid_request_error", "mock_error", ""},
		{"stream fails before SSE", Behavior{Status: 502}, streamBody, 502, "server_error", "server_error", ""},
		{"fail rate 1 defaults to 500", Behavior{FailRate: 1}, chatBody, 500, "server_error", "server_error", ""},
		{"fail rate 1 with status", Behavior{FailRate: 1, Status: 504}, chatBody, 504, "server_error", "server_error", ""},
		{"fail rate 0 succeeds", Behavior{FailRate: 0}, chatBody, 200, "", "", ""},
		{"status 200 succeeds", Behavior{Status: 200}, chatBody, 200, "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ts := start(t, tt.b)
			resp := post(t, context.Background(), ts, tt.body)
			raw := readAll(t, resp)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status = %d, want %d; body %s", resp.StatusCode, tt.wantStatus, raw)
			}
			waitIdle(t, s)
			st := s.Stats()
			if tt.wantStatus == 200 {
				if st.Completed != 1 {
					t.Errorf("stats = %+v, want Completed 1", st)
				}
				return
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
			e := decodeError(t, raw)
			if e.Error.Message != "mock error" || e.Error.Type != tt.wantType || e.Error.Code == nil || *e.Error.Code != tt.wantCode {
				t.Errorf("error = %s, want mock error/%s/%s", raw, tt.wantType, tt.wantCode)
			}
			if got := resp.Header.Get("Retry-After"); got != tt.wantRetryAfter {
				t.Errorf("Retry-After = %q, want %q", got, tt.wantRetryAfter)
			}
			if st.Failed != 1 || st.Completed != 0 {
				t.Errorf("stats = %+v, want Failed 1", st)
			}
		})
	}
}

// TestFailRateDeterministic protects the exact, evenly spread schedule that lets a test
// predict which request fails.
func TestFailRateDeterministic(t *testing.T) {
	s, ts := start(t, Behavior{FailRate: 0.25, Status: 502})
	var got []int
	for range 8 {
		resp := post(t, context.Background(), ts, chatBody)
		readAll(t, resp)
		got = append(got, resp.StatusCode)
	}
	want := []int{200, 200, 200, 502, 200, 200, 200, 502}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("statuses = %v, want %v", got, want)
	}
	waitIdle(t, s)
	if st := s.Stats(); st.Failed != 2 || st.Completed != 6 {
		t.Errorf("stats = %+v, want Failed 2 Completed 6", st)
	}
}

// TestHeaderOverrides checks that each X-Mock-* header wins over the defaults for one
// request only.
func TestHeaderOverrides(t *testing.T) {
	tests := []struct {
		name    string
		headers []string
		body    string
		check   func(t *testing.T, resp *http.Response, raw []byte)
	}{
		{"identity", []string{HeaderIdentity, "backup"}, chatBody, func(t *testing.T, resp *http.Response, raw []byte) {
			if resp.Header.Get(HeaderIdentity) != "backup" || !bytes.Contains(raw, []byte("Hello from backup chunk 1")) {
				t.Errorf("identity not overridden: %s %s", resp.Header.Get(HeaderIdentity), raw)
			}
		}},
		{"chunks", []string{HeaderChunks, "2"}, chatBody, func(t *testing.T, resp *http.Response, raw []byte) {
			if !bytes.Contains(raw, []byte(`"content":"Hello from default chunk 1 2"`)) {
				t.Errorf("chunks not overridden: %s", raw)
			}
		}},
		{"status and retry-after", []string{HeaderStatus, "429", HeaderRetryAfter, "3"}, chatBody, func(t *testing.T, resp *http.Response, raw []byte) {
			if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "3" {
				t.Errorf("got %d Retry-After %q, want 429 and 3", resp.StatusCode, resp.Header.Get("Retry-After"))
			}
		}},
		{"fail rate", []string{HeaderFailRate, "1"}, chatBody, func(t *testing.T, resp *http.Response, raw []byte) {
			if resp.StatusCode != 500 {
				t.Errorf("status = %d, want 500", resp.StatusCode)
			}
		}},
		{"status 200 cancels default status", []string{HeaderStatus, "200"}, chatBody, func(t *testing.T, resp *http.Response, raw []byte) {
			if resp.StatusCode != 200 {
				t.Errorf("status = %d, want 200", resp.StatusCode)
			}
		}},
		{"usage off", []string{HeaderUsage, "false"}, streamUsageBody, func(t *testing.T, resp *http.Response, raw []byte) {
			if bytes.Contains(raw, []byte(`"usage"`)) {
				t.Errorf("usage chunk sent although %s: false: %s", HeaderUsage, raw)
			}
		}},
		{"latency", []string{HeaderLatency, "40ms"}, chatBody, nil}, // timed below
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defaults := Behavior{Identity: "default", Usage: true}
			if tt.name == "status 200 cancels default status" {
				defaults.Status = 503
			}
			_, ts := start(t, defaults)
			begin := time.Now()
			resp := post(t, context.Background(), ts, tt.body, tt.headers...)
			raw := readAll(t, resp)
			if tt.check != nil {
				tt.check(t, resp, raw)
			} else if d := time.Since(begin); d < 40*time.Millisecond {
				t.Errorf("answered after %v, want at least 40ms", d)
			}
			// The next request without headers is back to the defaults.
			resp = post(t, context.Background(), ts, chatBody)
			raw = readAll(t, resp)
			wantStatus := 200
			if defaults.Status != 0 {
				wantStatus = defaults.Status
			}
			if resp.StatusCode != wantStatus || wantStatus == 200 && !bytes.Contains(raw, []byte("Hello from default chunk 1 2 3")) {
				t.Errorf("override leaked into the next request: %d %s", resp.StatusCode, raw)
			}
		})
	}
}

// TestMalformedOverride checks that a bad X-Mock-* value is refused with 400 naming the
// header, instead of silently running the wrong scenario.
func TestMalformedOverride(t *testing.T) {
	tests := []struct{ header, value string }{
		{HeaderLatency, "10"},
		{HeaderLatency, "-1s"},
		{HeaderFirstByteDelay, "soon"},
		{HeaderStallAfterHeaders, "maybe"},
		{HeaderComments, "x"},
		{HeaderComments, "-1"},
		{HeaderCommentInterval, "1 s"},
		{HeaderChunks, "1.5"},
		{HeaderChunks, "99999999"},
		{HeaderChunkInterval, "fast"},
		{HeaderStallAfterChunks, "two"},
		{HeaderResetAfterChunks, "-3"},
		{HeaderStatus, "abc"},
		{HeaderStatus, "99"},
		{HeaderStatus, "600"},
		{HeaderFailRate, "1.5"},
		{HeaderFailRate, "NaN"},
		{HeaderHangRate, "-0.1"},
		{HeaderHangRate, "half"},
		{HeaderSlowRate, "2"},
		{HeaderSlowDelay, "later"},
		{HeaderUsage, "yes please"},
	}
	for _, tt := range tests {
		t.Run(tt.header+"="+tt.value, func(t *testing.T) {
			s, ts := start(t, Behavior{})
			resp := post(t, context.Background(), ts, chatBody, tt.header, tt.value)
			raw := readAll(t, resp)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status = %d, want 400", resp.StatusCode)
			}
			e := decodeError(t, raw)
			if e.Error.Type != "invalid_request_error" || e.Error.Param == nil || *e.Error.Param != tt.header ||
				!strings.Contains(e.Error.Message, tt.header) {
				t.Errorf("error = %s, want invalid_request_error naming %s", raw, tt.header)
			}
			waitIdle(t, s)
			if st := s.Stats(); st.Rejected != 1 {
				t.Errorf("stats = %+v, want Rejected 1", st)
			}
		})
	}
}

// TestLastRequest protects what gateway tests assert on: the forwarded headers, body and
// query, returned as a copy the caller may change.
func TestLastRequest(t *testing.T) {
	s, ts := start(t, Behavior{})
	if got := s.LastRequest(); got.Header != nil || got.Body != nil {
		t.Fatalf("LastRequest before any request = %+v, want zero", got)
	}
	body := `{"model":"upstream-model","messages":[{"role":"user","content":"x"}],"unknown_field":{"a":1}}`
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/chat/completions?api-version=2024-10&x=1", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer provider-key")
	req.Header.Set("X-Provider", "p1")
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	// Models and stats requests must not replace the recorded chat request.
	resp, err = ts.Client().Get(ts.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)

	got := s.LastRequest()
	if got.Method != http.MethodPost || got.Path != "/v1/chat/completions" {
		t.Errorf("method/path = %s %s, want POST /v1/chat/completions", got.Method, got.Path)
	}
	if string(got.Body) != body {
		t.Errorf("body = %s, want %s", got.Body, body)
	}
	if got.Query.Get("api-version") != "2024-10" || got.Query.Get("x") != "1" {
		t.Errorf("query = %v, want api-version=2024-10 x=1", got.Query)
	}
	if got.Header.Get("Authorization") != "Bearer provider-key" || got.Header.Get("X-Provider") != "p1" {
		t.Errorf("headers = %v", got.Header)
	}
	got.Body[0] = 'X'
	got.Header.Set("X-Provider", "changed")
	if again := s.LastRequest(); again.Body[0] != '{' || again.Header.Get("X-Provider") != "p1" {
		t.Errorf("LastRequest shares memory with its caller")
	}
}

// TestSetBehaviorConcurrent runs requests while the defaults change, for the race
// detector, and checks every answer came from one of the behaviours set.
func TestSetBehaviorConcurrent(t *testing.T) {
	s, ts := start(t, Behavior{Identity: "a"})
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for w := range 8 {
		wg.Go(func() {
			for i := range 10 {
				if w == 0 && i%2 == 0 {
					s.SetBehavior(Behavior{Identity: "b", Chunks: 2})
				}
				resp := post(t, context.Background(), ts, chatBody)
				id := resp.Header.Get(HeaderIdentity)
				readAll(t, resp)
				if id != "a" && id != "b" {
					errs <- id
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for id := range errs {
		t.Errorf("identity %q, want a or b", id)
	}
	if got := s.Behavior().Identity; got != "b" {
		t.Errorf("Behavior().Identity = %q, want b", got)
	}
	waitIdle(t, s)
	if st := s.Stats(); st.Requests != 80 || st.Completed != 80 {
		t.Errorf("stats = %+v, want 80 completed", st)
	}
}
