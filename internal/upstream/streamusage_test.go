package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestBuildAsksUsage protects tokens_per_minute from a client that leaves
// out stream_options.include_usage: a chat stream to an openai provider
// asks for usage whatever the client sent (a splice: every other byte the
// client's), except where the provider opted out, the client asked itself,
// or nothing streams.
func TestBuildAsksUsage(t *testing.T) {
	openai := testEndpoint(t, FormatOpenAI, Auth{})
	optedOut := testEndpoint(t, FormatOpenAI, Auth{})
	optedOut.StreamUsage = false
	const msgs = `"messages":[{"role":"user","content":"hi \"usage\":null"}]`
	for _, tc := range []struct {
		name, body string
		ep         *Endpoint
		asks       bool
	}{
		{"no stream_options", `{"model":"m",` + msgs + `,"stream":true}`, openai, true},
		{"no stream_options, spaces", "{ \"model\" : \"m\" , " + msgs + " , \"stream\" : true \n}\n", openai, true},
		{"empty stream_options", `{"model":"m",` + msgs + `,"stream":true,"stream_options":{ }}`, openai, true},
		{"other option", `{"stream_options":{"x":1},"model":"m",` + msgs + `,"stream":true}`, openai, true},
		{"include_usage false", `{"model":"m",` + msgs + `,"stream":true,"stream_options":{"x":1,"include_usage":false}}`, openai, true},
		{"include_usage null", `{"model":"m",` + msgs + `,"stream":true,"stream_options":{"include_usage":null}}`, openai, true},
		{"stream_options null", `{"model":"m",` + msgs + `,"stream":true,"stream_options":null}`, openai, true},
		{"client asked", `{"model":"m",` + msgs + `,"stream":true,"stream_options":{"include_usage":true}}`, openai, false},
		{"not a stream", `{"model":"m",` + msgs + `}`, openai, false},
		{"provider opted out", `{"model":"m",` + msgs + `,"stream":true}`, optedOut, false},
		{"stream_options not an object", `{"model":"m",` + msgs + `,"stream":true,"stream_options":"x"}`, openai, false},
	} {
		for _, model := range []string{"m", "up-<model>"} {
			req, err := ParseChatRequest([]byte(tc.body))
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			var call Call
			if err := req.Build(tc.ep, model, &call); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if got := req.Reader(tc.ep, new(PassReader)).(*PassReader).hide; got != tc.asks {
				t.Errorf("%s: reader hides usage %v, want %v", tc.name, got, tc.asks)
			}
			if !tc.asks {
				if want := req.WithModel(model); !bytes.Equal(call.Body, want) {
					t.Errorf("%s: body %s, want the model splice alone %s", tc.name, call.Body, want)
				}
				continue
			}
			var got, want map[string]any
			if err := json.Unmarshal(call.Body, &got); err != nil {
				t.Fatalf("%s: body %s is not JSON: %v", tc.name, call.Body, err)
			}
			_ = json.Unmarshal([]byte(tc.body), &want)
			want["model"] = model
			so, _ := want["stream_options"].(map[string]any)
			if so == nil {
				so = map[string]any{}
			}
			so["include_usage"] = true
			want["stream_options"] = so
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s, model %s: body %s\ndecodes to %v\nwant %v", tc.name, model, call.Body, got, want)
			}
			again, err := ParseChatRequest(call.Body)
			if err != nil || !again.IncludeUsage || again.Model != model {
				t.Errorf("%s: the spliced body %s parses to %+v, %v", tc.name, call.Body, again, err)
			}
		}
	}
}

// openAIStream is a chat stream as OpenAI's API sends it, with or without
// stream_options.include_usage.
func openAIStream(usage bool) []string {
	end := "]}"
	if usage {
		end = `],"usage":null}`
	}
	pre := `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[`
	evs := []string{
		pre + `{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}` + end + "\n\n",
		pre + `{"index":0,"delta":{"content":"say \"usage\":null"},"finish_reason":null}` + end + "\n\n",
		pre + `{"index":0,"delta":{},"finish_reason":"stop"}` + end + "\n\n",
	}
	if usage {
		evs = append(evs, pre+`],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12,"prompt_tokens_details":{"cached_tokens":0}}}`+"\n\n")
	}
	return append(evs, "data: [DONE]\n\n")
}

// TestPassReaderHidesUsage: the chunks a client that did not ask for usage
// receives are byte for byte those of a stream without include_usage,
// while the gateway reads the usage; a client that asked gets them all.
func TestPassReaderHidesUsage(t *testing.T) {
	relay := func(p *PassReader, evs []string) string {
		var sb strings.Builder
		for _, ev := range evs {
			buf := []byte(ev + "data: next") // the reader's buffer goes on
			out, err := p.Event(nil, buf[:len(ev)], true)
			if err != nil {
				t.Fatal(err)
			}
			if string(buf[len(buf)-len("data: next"):]) != "data: next" {
				t.Fatal("the cut wrote past the event")
			}
			sb.Write(out)
		}
		return sb.String()
	}
	hidden := &PassReader{kind: passChat, hide: true}
	if got, want := relay(hidden, openAIStream(true)), strings.Join(openAIStream(false), ""); got != want {
		t.Errorf("client got\n%s\nwant the stream without include_usage\n%s", got, want)
	}
	if u, ok := hidden.Usage(); !ok || u.TotalTokens != 12 || u.PromptTokens != 9 {
		t.Errorf("usage %+v, %v; want the usage chunk's 9 + 3", u, ok)
	}
	asked := &PassReader{kind: passChat}
	if got, want := relay(asked, openAIStream(true)), strings.Join(openAIStream(true), ""); got != want {
		t.Errorf("a client that asked got\n%s\nwant\n%s", got, want)
	}
	for _, tc := range []struct{ in, want string }{
		{`data: {"usage":null,"id":"x","choices":[]}`, `data: {"id":"x","choices":[]}`},
		{`data: {"id":"x" , "usage" : null }`, `data: {"id":"x"  }`},
		{`data: {"usage":null}`, `data: {}`},
		{`data: {"choices":[{"delta":{}}],"usage":{"total_tokens":5}}`, `data: {"choices":[{"delta":{}}]}`},
		{`data: {"choices":[ ],"usage":{"total_tokens":5}}`, ``},
		{`data: {"usage":"odd","id":"x"}`, `data: {"usage":"odd","id":"x"}`},
		{`data: {"x":{"usage":null}}`, `data: {"x":{"usage":null}}`},
	} {
		p := &PassReader{kind: passChat, hide: true}
		out, _ := p.Event(nil, []byte(tc.in+"\n\n"), true)
		if want := tc.want + "\n\n"; tc.want == "" && len(out) != 0 || tc.want != "" && string(out) != want {
			t.Errorf("%s -> %q, want %q", tc.in, out, tc.want)
		}
	}
	// A chunk that is not JSON is never relayed, cut or not.
	if out, err := (&PassReader{kind: passChat, hide: true}).Event(nil, []byte("data: {\"usage\":nul\n\n"), true); !errors.Is(err, ErrMalformedEvent) || len(out) != 0 {
		t.Errorf("a malformed chunk gave %q, %v; want nothing and ErrMalformedEvent", out, err)
	}
}

// FuzzHideUsage: whatever a provider sends, the cut stays inside the event,
// and a chunk that was one JSON object stays one.
func FuzzHideUsage(f *testing.F) {
	for _, ev := range openAIStream(true) {
		f.Add([]byte(ev))
	}
	for _, s := range []string{`data: {"usage":null}`, `data: {"usage" :null , "a":1}`, `data: {"a":[],"usage":{}}`,
		`data: {"choices":[],"usage":{"total_tokens":-1}}`, `data: {"usage":{"a":"\"`, "data: {\"usage\":null}\r\n\r\n"} {
		f.Add([]byte(s + "\n\n"))
	}
	f.Fuzz(func(t *testing.T, ev []byte) {
		in := bytes.Clone(ev)
		buf := append(bytes.Clone(ev), "tail"...)
		p := &PassReader{kind: passChat, hide: true}
		out, _ := p.Event(nil, buf[:len(ev)], true)
		if len(out) > len(ev) || string(buf[len(ev):]) != "tail" {
			t.Fatalf("%q: out %q, buffer after the event %q", in, out, buf[len(ev):])
		}
		if len(out) > 0 && json.Valid(eventData(in)) && bytes.HasPrefix(bytes.TrimSpace(eventData(in)), []byte("{")) &&
			!json.Valid(eventData(out)) {
			t.Fatalf("%q became %q, not JSON", in, out)
		}
	})
}
