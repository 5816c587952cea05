package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/llmgw/gateway/internal/secret"
)

// TestParseRequestRoutes: each route requires its own field; embeddings
// never stream.
func TestParseRequestRoutes(t *testing.T) {
	tests := []struct {
		route  Route
		body   string
		param  string // "-": valid
		stream bool
	}{
		{RouteMessages, `{"model":"m","max_tokens":5,"messages":[],"stream":true}`, "-", true},
		{RouteMessages, `{"model":"m","max_tokens":5}`, "messages", false},
		{RouteChat, `{"model":"m","messages":[],"input":null}`, "-", false}, // not a chat field: the provider's business
		{RouteMessages, `{"model":"m","max_tokens":5,"messages":[],"input":null}`, "-", false},
		{RouteEmbeddings, `{"model":"m","input":"x","stream":true}`, "-", false},
		{RouteEmbeddings, `{"model":"m","messages":[]}`, "input", false},
		{RouteEmbeddings, `{"model":"m","input":null}`, "input", false},
		{RouteEmbeddings, `{"model":"m","previous_response_id":"r","input":"x"}`, "-", false},
		{RouteResponses, `{"model":"m","input":[{"role":"user","content":"x"}],"stream":true}`, "-", true},
		{RouteResponses, `{"model":"m","previous_response_id":"resp_1"}`, "-", false},
		{RouteResponses, `{"model":"m","previous_response_id":null}`, "input", false},
		{RouteResponses, `{"model":"m"}`, "input", false},
	}
	for _, tt := range tests {
		r, err := ParseRequest(tt.route, []byte(tt.body))
		var re *RequestError
		switch {
		case tt.param == "-" && err != nil:
			t.Errorf("%s %s: %v", tt.route, tt.body, err)
		case tt.param == "-" && (r.Stream != tt.stream || r.Route != tt.route):
			t.Errorf("%s %s: stream %v route %s", tt.route, tt.body, r.Stream, r.Route)
		case tt.param != "-" && (!errors.As(err, &re) || re.Param != tt.param):
			t.Errorf("%s %s: %v, want a refusal naming %s", tt.route, tt.body, err, tt.param)
		}
	}
}

func testEndpoint(t *testing.T, format string, auth Auth) *Endpoint {
	t.Helper()
	ep, err := NewEndpoint(format, "http://p.example/v1", nil, auth, map[string]string{"X-Extra": "1"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

// TestBuildPassThroughAndTranslation: a pass-through body keeps the
// client's bytes with the model spliced in; a translated one is the other
// format's, and a field the format lacks is refused naming it, in the
// client's error shape.
func TestBuildPassThroughAndTranslation(t *testing.T) {
	openaiEP, anthropicEP := testEndpoint(t, FormatOpenAI, Auth{}), testEndpoint(t, FormatAnthropic, Auth{Style: AuthXAPIKey})
	chat, _ := ParseRequest(RouteChat, []byte(`{"model":"m", "messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]}`))
	var call Call
	if err := chat.Build(openaiEP, "up", &call); err != nil || string(call.Body) != `{"model":"up", "messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]}` ||
		call.URL != "http://p.example/v1/chat/completions" {
		t.Fatalf("pass-through: %v %s %s", err, call.Body, call.URL)
	}
	if err := chat.Build(anthropicEP, "claude-up", &call); err != nil || call.URL != "http://p.example/v1/messages" {
		t.Fatalf("translated: %v %s", err, call.URL)
	}
	var sent map[string]any
	_ = json.Unmarshal(call.Body, &sent)
	if sent["model"] != "claude-up" || sent["system"] == nil || sent["max_tokens"] != float64(4096) {
		t.Fatalf("translated body %s", call.Body)
	}

	for _, tt := range []struct {
		route   Route
		body    string
		param   string
		errType string // the client-format error's type at its path
	}{
		{RouteChat, `{"model":"m","n":2,"messages":[{"role":"user","content":"hi"}]}`, "n", "error.type=invalid_request_error"},
		{RouteMessages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"server_tool_use","id":"x","name":"web_search","input":{}}]}]}`, "", "type=error"},
	} {
		r, _ := ParseRequest(tt.route, []byte(tt.body))
		ep := anthropicEP
		if tt.route == RouteMessages {
			ep = openaiEP
		}
		err := r.Build(ep, "up", &call)
		var re *RequestError
		if !errors.As(err, &re) || (tt.param != "" && re.Param != tt.param) {
			t.Fatalf("%s: %v, want a refusal naming %q", tt.route, err, tt.param)
		}
		se := r.Refusal(re)
		path, want, _ := strings.Cut(tt.errType, "=")
		var v map[string]any
		_ = json.Unmarshal(se.Body, &v)
		got := v[path]
		if p, rest, nested := strings.Cut(path, "."); nested {
			got = v[p].(map[string]any)[rest]
		}
		if se.Code != http.StatusBadRequest || got != want {
			t.Fatalf("%s refusal %d %s", tt.route, se.Code, se.Body)
		}
	}
}

// TestRelayedErrorsChangeShape: a provider's 400 reaches the client in the
// client's shape with the provider's message.
func TestRelayedErrorsChangeShape(t *testing.T) {
	openaiEP, anthropicEP := testEndpoint(t, FormatOpenAI, Auth{}), testEndpoint(t, FormatAnthropic, Auth{})
	chat, _ := ParseRequest(RouteChat, []byte(`{"model":"m","messages":[]}`))
	se := &StatusError{Code: 400, Header: http.Header{}, Body: []byte(`{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: too big"}}`)}
	chat.Relayed(anthropicEP, se)
	if !strings.Contains(string(se.Body), `"message":"max_tokens: too big"`) || !strings.Contains(string(se.Body), `{"error":{`) {
		t.Fatalf("anthropic 400 for an OpenAI client: %s", se.Body)
	}
	msgs, _ := ParseRequest(RouteMessages, []byte(`{"model":"m","messages":[]}`))
	se = &StatusError{Code: 400, Header: http.Header{}, Body: []byte(`{"error":{"message":"bad temperature","type":"invalid_request_error"}}`)}
	msgs.Relayed(openaiEP, se)
	if !strings.Contains(string(se.Body), `"type":"error"`) || !strings.Contains(string(se.Body), "bad temperature") {
		t.Fatalf("openai 400 for an Anthropic client: %s", se.Body)
	}
	se = &StatusError{Code: 400, Header: http.Header{}, Body: []byte(`{"error":{"message":"same format"}}`)}
	chat.Relayed(openaiEP, se)
	if string(se.Body) != `{"error":{"message":"same format"}}` {
		t.Fatalf("a pass-through 400 changed: %s", se.Body)
	}
}

// TestPassReaders: pass-through readers return each event itself, tell
// error and last events before the commit point only, and read the usage
// of every format.
func TestPassReaders(t *testing.T) {
	tests := []struct {
		name   string
		route  Route
		format string
		events []string
		errAt  int // index of the event that is an error before commit; -1 none
		done   bool
		usage  Usage
	}{
		{"chat", RouteChat, FormatOpenAI, []string{
			"data: {\"choices\":[]}\n\n",
			"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4,\"total_tokens\":7}}\n\n",
			"data: [DONE]\n\n"}, -1, true, Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7}},
		{"chat error", RouteChat, FormatOpenAI, []string{"data: {\"error\":{\"message\":\"x\"}}\n\n"}, 0, false, Usage{}},
		{"messages", RouteMessages, FormatAnthropic, []string{
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":10,\"cache_read_input_tokens\":2,\"output_tokens\":1}}}\n\n",
			"event: ping\ndata: {\"type\":\"ping\"}\n\n",
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":5}}\n\n",
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"}, -1, true, Usage{PromptTokens: 12, CompletionTokens: 5, TotalTokens: 17, CachedTokens: 2}},
		{"messages overloaded", RouteMessages, FormatAnthropic, []string{
			"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"}, 0, false, Usage{}},
		{"responses", RouteResponses, FormatOpenAI, []string{
			"event: response.created\ndata: {\"type\":\"response.created\"}\n\n",
			"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":6,\"output_tokens\":2,\"total_tokens\":8}}}\n\n"}, -1, true, Usage{PromptTokens: 6, CompletionTokens: 2, TotalTokens: 8}},
		{"responses failed", RouteResponses, FormatOpenAI, []string{"event: response.failed\ndata: {\"type\":\"response.failed\"}\n\n"}, 0, true, Usage{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &ChatRequest{Route: tt.route}
			var pass PassReader
			rd := req.Reader(testEndpoint(t, tt.format, Auth{}), &pass)
			if rd != Reader(&pass) {
				t.Fatal("a pass-through request got a translating reader")
			}
			for i, ev := range tt.events {
				out, err := rd.Event(nil, []byte(ev), false)
				var ee *EventError
				if (i == tt.errAt) != errors.As(err, &ee) {
					t.Fatalf("event %d: err %v", i, err)
				}
				if err == nil && string(out) != ev {
					t.Fatalf("event %d changed: %q", i, out)
				}
				// After the commit point the same event is relayed as is; an
				// error event (a chat error object, an Anthropic or Responses
				// `event: error`) ends the stream with the event already sent.
				out, err = rd.Event(nil, []byte(ev), true)
				if string(out) != ev {
					t.Fatalf("event %d after commit: %q %v", i, out, err)
				}
				wantRelayed := i == tt.errAt
				if relayed := errors.As(err, &ee) && ee.Relayed; relayed != wantRelayed || (err != nil && !relayed) {
					t.Fatalf("event %d after commit: err %v, want a relayed error event: %v", i, err, wantRelayed)
				}
			}
			if rd.Done() != tt.done {
				t.Fatalf("done %v", rd.Done())
			}
			if u, ok := rd.Usage(); u != tt.usage || ok != (tt.usage != Usage{}) {
				t.Fatalf("usage %+v %v, want %+v", u, ok, tt.usage)
			}
		})
	}
	var pass PassReader
	rd := (&ChatRequest{Route: RouteResponses}).Reader(testEndpoint(t, FormatOpenAI, Auth{}), &pass)
	if u, ok := rd.TailUsage([]byte(`..."output":[],"usage":{"input_tokens":4,"output_tokens":3,"total_tokens":7}}`)); !ok || u != (Usage{PromptTokens: 4, CompletionTokens: 3, TotalTokens: 7}) {
		t.Fatalf("responses body usage %+v %v", u, ok)
	}
}

// TestSendAuthStyles: each style puts the key where it belongs, the
// client's own credentials never cross, and defaults yield to the
// routes file's headers and to the client's.
func TestSendAuthStyles(t *testing.T) {
	var got http.Header
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, "{}")
	}))
	defer ts.Close()
	c := NewClient(ClientOptions{Provider: "p"})
	defer c.CloseIdle()
	client := http.Header{"Authorization": {"Bearer client-tok"}, "X-Api-Key": {"client-tok"}, "Api-Key": {"client-tok"}}
	for _, tt := range []struct {
		auth Auth
		want map[string]string
	}{
		{Auth{}, map[string]string{"Authorization": "Bearer k", "X-Api-Key": "", "Api-Key": ""}},
		{Auth{Style: AuthXAPIKey}, map[string]string{"Authorization": "", "X-Api-Key": "k", "Api-Key": ""}},
		{Auth{Style: AuthHeader, Header: "api-key"}, map[string]string{"Authorization": "", "X-Api-Key": "", "Api-Key": "k"}},
		{Auth{Style: AuthNone}, map[string]string{"Authorization": "", "X-Api-Key": "", "Api-Key": ""}},
	} {
		resp, err := c.Send(context.Background(), &Call{URL: ts.URL, Key: secret.New("k"), Auth: tt.auth, ClientHeader: client,
			Defaults: http.Header{"Anthropic-Version": {AnthropicVersion}}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		for h, v := range tt.want {
			if got.Get(h) != v {
				t.Errorf("auth %s: %s = %q, want %q", tt.auth, h, got.Get(h), v)
			}
		}
		if got.Get("Anthropic-Version") != AnthropicVersion {
			t.Errorf("default anthropic-version not sent")
		}
	}
	// The client's anthropic-version wins over the default, the routes
	// file's over both.
	for _, tt := range []struct {
		client, extra, want string
	}{{"2024-10-22", "", "2024-10-22"}, {"2024-10-22", "2023-01-01", "2023-01-01"}} {
		fwd := formatForwarding(FormatAnthropic)
		call := &Call{URL: ts.URL, Auth: Auth{Style: AuthNone}, ClientHeader: http.Header{"Anthropic-Version": {tt.client}}, Forward: &fwd,
			Defaults: http.Header{"Anthropic-Version": {AnthropicVersion}}, Extra: http.Header{}}
		if tt.extra != "" {
			call.Extra.Set("Anthropic-Version", tt.extra)
		}
		resp, err := c.Send(context.Background(), call)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got.Get("Anthropic-Version") != tt.want {
			t.Errorf("anthropic-version %q, want %q", got.Get("Anthropic-Version"), tt.want)
		}
	}
}
