package upstream

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/secret"
	"github.com/llmgw/gateway/internal/upstream/gemini"
)

func geminiEndpoint(t *testing.T, base string, query map[string]string) *Endpoint {
	t.Helper()
	ep, err := NewEndpoint(FormatGemini, base, query, Auth{Style: AuthHeader, Header: GeminiKeyHeader}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

// TestGeminiBuildURLs: the model is in the method's path, a stream asks for
// SSE, the routes file's query joins the method's, and every client route
// is served (the Responses API through the chat form).
func TestGeminiBuildURLs(t *testing.T) {
	ep := geminiEndpoint(t, "https://generativelanguage.googleapis.com/v1beta/", nil)
	if !ep.Serves(RouteResponses) || !ep.Serves(RouteChat) || !ep.Serves(RouteMessages) || !ep.Serves(RouteEmbeddings) {
		t.Fatalf("serves %v", ep.URLs)
	}
	for _, tc := range []struct {
		route Route
		body  string
		want  string
	}{
		{RouteChat, `{"model":"g","messages":[{"role":"user","content":"hi"}]}`,
			"https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"},
		{RouteChat, `{"model":"g","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			"https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"},
		{RouteMessages, `{"model":"g","max_tokens":9,"messages":[{"role":"user","content":"hi"}]}`,
			"https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"},
		{RouteEmbeddings, `{"model":"g","input":["a","b"]}`,
			"https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:batchEmbedContents"},
	} {
		r, err := ParseRequest(tc.route, []byte(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		var call Call
		if err := r.Build(ep, "gemini-2.5-flash", &call); err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		if call.URL != tc.want || !call.gemini {
			t.Errorf("%s: URL %s (gemini %v), want %s", tc.body, call.URL, call.gemini, tc.want)
		}
		if strings.Contains(string(call.Body), `"model"`) && tc.route != RouteEmbeddings {
			t.Errorf("%s: the model is in the path, not the body: %s", tc.body, call.Body)
		}
	}
	q := geminiEndpoint(t, "https://proxy.example/gemini", map[string]string{"tenant": "a b"})
	if got := q.geminiURL(gemini.Path("m", true)); got != "https://proxy.example/gemini/models/m:streamGenerateContent?alt=sse&tenant=a+b" {
		t.Errorf("stream with query: %s", got)
	}
	if got := q.geminiURL(gemini.Path("m", false)); got != "https://proxy.example/gemini/models/m:generateContent?tenant=a+b" {
		t.Errorf("with query: %s", got)
	}
	// A field Gemini cannot honour is the client's 400, naming it.
	r, _ := ParseRequest(RouteChat, []byte(`{"model":"g","n":2,"messages":[{"role":"user","content":"hi"}]}`))
	var call Call
	var re *RequestError
	if err := r.Build(ep, "m", &call); !errors.As(err, &re) || re.Param != "n" {
		t.Fatalf("n: 2 built: %v", err)
	}
	// An Anthropic client's refusal names the field of the OpenAI form as
	// such, not as a field the client wrote.
	r, _ = ParseRequest(RouteMessages, []byte(`{"model":"g","max_tokens":5,"messages":[{"role":"user","content":"hi"}],
		"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"auto","disable_parallel_tool_use":true}}`))
	if err := r.Build(ep, "m", &call); !errors.As(err, &re) || re.Param != "" ||
		!strings.HasPrefix(re.Message, "in the request's OpenAI form, parallel_tool_calls: ") {
		t.Fatalf("messages refusal: %#v", err)
	}
	// The same call built for an openai endpoint forgets gemini.
	oa := testEndpoint(t, FormatOpenAI, Auth{})
	r, _ = ParseRequest(RouteChat, []byte(`{"model":"g","messages":[]}`))
	if err := r.Build(oa, "m", &call); err != nil || call.gemini || call.URL != oa.URLs[RouteChat] {
		t.Fatalf("openai after gemini: %v %v %s", err, call.gemini, call.URL)
	}
}

// TestGeminiSendKeyAndErrors: the key travels in x-goog-api-key, never the
// URL, and a Gemini error body's RetryInfo and key reasons reach the
// StatusError the classification reads.
func TestGeminiSendKeyAndErrors(t *testing.T) {
	const key = "AIza-SENTINEL-key"
	var status int
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Goog-Api-Key") != key || strings.Contains(r.URL.String(), key) || r.Header.Get("Authorization") != "" {
			t.Errorf("key not in x-goog-api-key alone: %s %v", r.URL, r.Header)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	defer srv.Close()
	ep := geminiEndpoint(t, srv.URL+"/v1beta", nil)
	c := NewClient(ClientOptions{Provider: "g"})
	defer c.CloseIdle()
	send := func(code int, b string) *StatusError {
		t.Helper()
		status, body = code, b
		r, _ := ParseRequest(RouteChat, []byte(`{"model":"g","messages":[{"role":"user","content":"hi"}]}`))
		call := Call{Key: secret.New(key), Auth: ep.Auth}
		if err := r.Build(ep, "m", &call); err != nil {
			t.Fatal(err)
		}
		_, err := c.Send(context.Background(), &call)
		var se *StatusError
		if !errors.As(err, &se) {
			t.Fatalf("%d: %v", code, err)
		}
		return se
	}
	se := send(429, `{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}]}}`)
	if se.RetryAfter != 37*time.Second || !se.KeyWide || se.ClientFault() {
		t.Errorf("429: retry %s keyWide %v", se.RetryAfter, se.KeyWide)
	}
	se = send(400, `{"error":{"code":400,"message":"API key not valid.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID"}]}}`)
	if !se.KeyFault || se.ClientFault() || !se.KeyScoped() {
		t.Errorf("API_KEY_INVALID: keyFault %v clientFault %v", se.KeyFault, se.ClientFault())
	}
	se = send(400, `{"error":{"code":400,"message":"bad temperature","status":"INVALID_ARGUMENT"}}`)
	if se.KeyFault || !se.ClientFault() {
		t.Errorf("INVALID_ARGUMENT: keyFault %v clientFault %v", se.KeyFault, se.ClientFault())
	}
	for route, want := range map[Route]string{
		RouteChat:     `{"error":{"message":"bad temperature","type":"invalid_request_error","param":null,"code":null}}`,
		RouteMessages: `{"type":"error","error":{"type":"invalid_request_error","message":"bad temperature"}}`,
	} {
		cp := *se
		cp.Header = http.Header{"Content-Type": {"application/json"}}
		(&ChatRequest{Route: route}).Relayed(ep, &cp)
		if string(cp.Body) != want {
			t.Errorf("%s relayed %s, want %s", route, cp.Body, want)
		}
	}
	se = send(400, `{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}`)
	if !se.ContextLength() {
		t.Error("Gemini's token limit refusal is not a context length")
	}
}

// TestGeminiReaders: a stream becomes chat chunks (or Anthropic events),
// usage included; a stream without a finishReason is a cut; a blocked
// prompt is the client's 400; embeddings report the estimate.
func TestGeminiReaders(t *testing.T) {
	const stream = "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"Hel\"}]}}],\"responseId\":\"r1\"}\n\n" +
		"data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"lo\"}]},\"finishReason\":\"STOP\"}],\"usageMetadata\":{\"promptTokenCount\":7,\"candidatesTokenCount\":2,\"thoughtsTokenCount\":3,\"cachedContentTokenCount\":4},\"responseId\":\"r1\"}\n\n"
	for _, route := range []Route{RouteChat, RouteMessages} {
		r := &ChatRequest{Route: route, Model: "client-m", IncludeUsage: true}
		rd := r.geminiReader()
		var out []byte
		er := NewEventReader(strings.NewReader(stream))
		for {
			ev, _, err := er.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if out, err = rd.Event(out, ev, false); err != nil {
				t.Fatal(err)
			}
		}
		out, err := rd.End(out)
		if err != nil {
			t.Fatalf("%s end: %v", route, err)
		}
		s := string(out)
		want := []string{`"content":"Hel"`, `"finish_reason":"stop"`, "[DONE]"}
		if route == RouteMessages {
			want = []string{`"text":"Hel"`, `"stop_reason":"end_turn"`, "message_stop"}
		}
		for _, w := range want {
			if !strings.Contains(s, w) {
				t.Errorf("%s: %q not in %s", route, w, s)
			}
		}
		u, ok := rd.Usage()
		if !ok || u.PromptTokens != 7 || u.CompletionTokens != 5 || u.ReasoningTokens != 3 || u.CachedTokens != 4 {
			t.Errorf("%s usage %+v %v", route, u, ok)
		}
	}
	// Cut before a finishReason.
	rd := (&ChatRequest{Route: RouteChat, Model: "m"}).geminiReader()
	first := stream[:strings.Index(stream, "\n\n")+2]
	if _, err := rd.Event(nil, []byte(first), false); err != nil {
		t.Fatal(err)
	}
	if _, err := rd.End(nil); !errors.Is(err, ErrEndedEarly) || !errors.Is(err, gemini.ErrIncomplete) {
		t.Fatalf("cut: %v", err)
	}
	// A blocked prompt, whole or streamed: a 400 in the client's format.
	blocked := `{"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":5}}`
	rd = (&ChatRequest{Route: RouteChat, Model: "m"}).geminiReader()
	_, err := rd.Body([]byte(blocked))
	var se *StatusError
	if !errors.As(err, &se) || se.Code != 400 || !se.ClientFault() || !strings.Contains(string(se.Body), "SAFETY") {
		t.Fatalf("blocked body: %v", err)
	}
	rd = (&ChatRequest{Route: RouteMessages, Model: "m"}).geminiReader()
	_, err = rd.Event(nil, []byte("data: "+blocked+"\n\n"), false)
	if !errors.As(err, &se) || se.Code != 400 || !strings.Contains(string(se.Body), `"type":"error"`) {
		t.Fatalf("blocked stream: %v", err)
	}
	// An error object in the stream is an error event (fails over before
	// the commit point).
	rd = (&ChatRequest{Route: RouteChat, Model: "m"}).geminiReader()
	_, err = rd.Event(nil, []byte(`data: {"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}`+"\n\n"), false)
	var ee *EventError
	if !errors.As(err, &ee) {
		t.Fatalf("error event: %v", err)
	}
	// Embeddings.
	r, _ := ParseRequest(RouteEmbeddings, []byte(`{"model":"e","input":["abcdefgh","x"]}`))
	ep := geminiEndpoint(t, "https://g.example/v1beta", nil)
	var call Call
	if err := r.Build(ep, "gemini-embedding-001", &call); err != nil {
		t.Fatal(err)
	}
	rd = r.Reader(ep, &PassReader{})
	out, err := rd.Body([]byte(`{"embeddings":[{"values":[0.5,1]},{"values":[0.25,0]}]}`))
	if err != nil || !strings.Contains(string(out), `"embedding":[0.5,1]`) {
		t.Fatalf("embeddings: %v %s", err, out)
	}
	if u, ok := rd.Usage(); !ok || u.PromptTokens != 3 {
		t.Errorf("embeddings usage %+v %v, want the estimate 2+1", u, ok)
	}
}

// TestPassThroughReaderAllocsNothing: the gemini checks added to Build's
// and Reader's path cost an openai pass-through no allocation.
func TestPassThroughReaderAllocsNothing(t *testing.T) {
	ep := testEndpoint(t, FormatOpenAI, Auth{})
	r, err := ParseRequest(RouteChat, []byte(`{"model":"g","messages":[{"role":"user","content":"hi"}],"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	var pass PassReader
	if n := testing.AllocsPerRun(100, func() {
		if r.Reader(ep, &pass) != Reader(&pass) || ep.Translates(RouteChat) || ep.Translates(RouteEmbeddings) {
			t.Fatal("an openai chat is translated")
		}
	}); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}
