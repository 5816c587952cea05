package upstream

import (
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// TestResponsesBuild: a Responses request goes to an anthropic or gemini
// provider in its own format through the chat form, is passed through to
// an openai one byte for byte, and a built-in tool is refused naming it.
func TestResponsesBuild(t *testing.T) {
	const body = `{"model":"client-m","instructions":"Be brief.","input":"hi","max_output_tokens":64,"stream":true}`
	r, err := ParseRequest(RouteResponses, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	var call Call
	if err := r.Build(testEndpoint(t, FormatOpenAI, Auth{}), "client-m", &call); err != nil || string(call.Body) != body ||
		!strings.HasSuffix(call.URL, "/v1/responses") {
		t.Fatalf("openai: %v %s %s", err, call.URL, call.Body)
	}
	if err := r.Build(testEndpoint(t, FormatAnthropic, Auth{}), "claude-up", &call); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`"model":"claude-up"`, `"system":"Be brief."`, `"max_tokens":64`, `"stream":true`} {
		if !strings.Contains(string(call.Body), w) || !strings.HasSuffix(call.URL, "/v1/messages") {
			t.Errorf("anthropic: %q not in %s (%s)", w, call.Body, call.URL)
		}
	}
	ep := geminiEndpoint(t, "https://g.example/v1beta", nil)
	if err := r.Build(ep, "gemini-up", &call); err != nil || call.URL != "https://g.example/v1beta/models/gemini-up:streamGenerateContent?alt=sse" ||
		!strings.Contains(string(call.Body), `"maxOutputTokens":64`) {
		t.Fatalf("gemini: %v %s %s", err, call.URL, call.Body)
	}
	r, _ = ParseRequest(RouteResponses, []byte(`{"model":"m","input":"x","tools":[{"type":"web_search"}]}`))
	for _, ep := range []*Endpoint{testEndpoint(t, FormatAnthropic, Auth{}), ep} {
		err := r.Build(ep, "up", &call)
		var re *RequestError
		if !errors.As(err, &re) || re.Param != "tools[0].type" {
			t.Fatalf("%s: %v", ep.Format, err)
		}
		if se := r.Refusal(re); se.Code != 400 || !strings.Contains(string(se.Body), `"param":"tools[0].type"`) {
			t.Fatalf("refusal %s", se.Body)
		}
	}
}

// twoReads delivers s in two reads, split at i.
func twoReads(s string, i int) io.Reader {
	return io.MultiReader(strings.NewReader(s[:i]), strings.NewReader(s[i:]))
}

var volatileResponses = regexp.MustCompile(`(resp|msg|fc)_[0-9a-f]{48}|"created_at":\d+`)

// readResponses reads stream through the attempt's reader for a Responses
// client, as the relay does, and returns its output with the gateway's
// random ids and clock taken out.
func readResponses(t *testing.T, ep *Endpoint, body io.Reader) (string, Usage) {
	t.Helper()
	r, err := ParseRequest(RouteResponses, []byte(`{"model":"client-m","input":"hi","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	rd := r.Reader(ep, &PassReader{})
	er := NewEventReader(body)
	defer er.Close()
	var out []byte
	for !rd.Done() {
		ev, _, err := er.Next()
		if err == io.EOF {
			if out, err = rd.End(out); err != nil {
				t.Fatalf("end: %v", err)
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if out, err = rd.Event(out, ev, false); err != nil {
			t.Fatal(err)
		}
	}
	u, ok := rd.Usage()
	if !ok {
		t.Fatal("no usage")
	}
	return volatileResponses.ReplaceAllString(string(out), "X"), u
}

// TestResponsesReaders: an anthropic stream and a gemini stream become the
// same Responses events wherever reads split them, with the provider's
// usage for the record.
func TestResponsesReaders(t *testing.T) {
	const anthropicStream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude\",\"content\":[],\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"lo\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"get_weather\",\"input\":{}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"city\\\":\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\\\"Paris\\\"}\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":9}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	const geminiStream = "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"Hel\"}]}}],\"responseId\":\"r1\"}\n\n" +
		"data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"lo\"}]},\"finishReason\":\"STOP\"}],\"usageMetadata\":{\"promptTokenCount\":7,\"candidatesTokenCount\":2,\"cachedContentTokenCount\":4},\"responseId\":\"r1\"}\n\n"
	for _, tc := range []struct {
		name   string
		ep     *Endpoint
		stream string
		want   []string
		prompt int64
	}{
		{"anthropic", testEndpoint(t, FormatAnthropic, Auth{}), anthropicStream, []string{
			`"delta":"Hel"`, `"type":"response.output_text.done","sequence_number":6,"item_id":"X","output_index":0,"content_index":0,"text":"Hello"`,
			`"type":"function_call","status":"in_progress","call_id":"toolu_1","name":"get_weather","arguments":""`,
			`"type":"response.function_call_arguments.done","sequence_number":12,"item_id":"X","output_index":1,"name":"get_weather","arguments":"{\"city\":\"Paris\"}"`,
			`event: response.completed`, `"usage":{"input_tokens":12,"input_tokens_details":{"cached_tokens":0},"output_tokens":9,`}, 12},
		{"gemini", geminiEndpoint(t, "https://g.example/v1beta", nil), geminiStream, []string{
			`"text":"Hello"`, `event: response.completed`, `"input_tokens_details":{"cached_tokens":4},"output_tokens":2`}, 7},
	} {
		whole, u := readResponses(t, tc.ep, strings.NewReader(tc.stream))
		for _, w := range tc.want {
			if !strings.Contains(whole, w) {
				t.Errorf("%s: %s not in\n%s", tc.name, w, whole)
			}
		}
		if u.PromptTokens != tc.prompt {
			t.Errorf("%s usage %+v", tc.name, u)
		}
		for i := 1; i < len(tc.stream); i++ {
			if got, _ := readResponses(t, tc.ep, twoReads(tc.stream, i)); got != whole {
				t.Fatalf("%s split at %d:\n%s\nwant\n%s", tc.name, i, got, whole)
			}
		}
	}
}

// TestResponsesReaderCut: a translated stream that ends before its last
// event is a cut, never a clean response.completed.
func TestResponsesReaderCut(t *testing.T) {
	r, _ := ParseRequest(RouteResponses, []byte(`{"model":"m","input":"hi","stream":true}`))
	rd := r.Reader(testEndpoint(t, FormatAnthropic, Auth{}), &PassReader{})
	out, err := rd.Event(nil, []byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"usage\":{\"input_tokens\":1}}}\n\n"), false)
	if err != nil {
		t.Fatal(err)
	}
	if out, err = rd.End(out); !errors.Is(err, ErrEndedEarly) || strings.Contains(string(out), "response.completed") {
		t.Fatalf("%v %s", err, out)
	}
}

// TestResponsesRelayed: a translated provider's client fault reaches a
// Responses client as OpenAI's error object, with the provider's message
// and status.
func TestResponsesRelayed(t *testing.T) {
	r, _ := ParseRequest(RouteResponses, []byte(`{"model":"m","input":"hi"}`))
	for _, tc := range []struct {
		ep   *Endpoint
		body string
	}{
		{testEndpoint(t, FormatAnthropic, Auth{}), `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long"}}`},
		{geminiEndpoint(t, "https://g.example/v1beta", nil), `{"error":{"code":400,"message":"prompt is too long","status":"INVALID_ARGUMENT"}}`},
	} {
		se := &StatusError{Code: 400, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(tc.body)}
		r.Relayed(tc.ep, se)
		if se.Code != 400 || string(se.Body) != `{"error":{"message":"prompt is too long","type":"invalid_request_error","param":null,"code":null}}` {
			t.Errorf("%s: %d %s", tc.ep.Format, se.Code, se.Body)
		}
	}
}
