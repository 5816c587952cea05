package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/llmgw/gateway/internal/jsontext"
)

// TestParseChatRequest protects the 400 contract and the fields read from a body.
func TestParseChatRequest(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		wantErr   string // Param of the RequestError, "-" for none expected
		wantModel string
		stream    bool
	}{
		{"minimal", `{"model":"m","messages":[]}`, "-", "m", false},
		{"stream", `{"messages":[{"role":"user","content":"x"}], "stream" : true, "model":"gpt"}`, "-", "gpt", true},
		{"escaped model", `{"model":"a\"b","messages":[]}`, "-", `a"b`, false},
		{"escaped key", `{"\u006dodel":"m","messages":[]}`, "-", "m", false},
		{"nested model ignored", `{"model":"top","messages":[{"model":"inner"}],"x":{"model":"y"}}`, "-", "top", false},
		{"not json", `{"model":`, "", "", false},
		{"trailing garbage", `{"model":"m","messages":[]} x`, "", "", false},
		{"two objects", `{"model":"m","messages":[]}{}`, "", "", false},
		{"array", `[]`, "", "", false},
		{"missing model", `{"messages":[]}`, "model", "", false},
		{"empty model", `{"model":"","messages":[]}`, "model", "", false},
		{"number model", `{"model":4,"messages":[]}`, "model", "", false},
		{"duplicate model", `{"model":"a","model":"b","messages":[]}`, "model", "", false},
		{"missing messages", `{"model":"m"}`, "messages", "", false},
		{"messages not array", `{"model":"m","messages":"hi"}`, "messages", "", false},
		{"stream not bool", `{"model":"m","messages":[],"stream":"yes"}`, "stream", "", false},
		{"stream null", `{"model":"m","messages":[],"stream":null}`, "-", "m", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseChatRequest([]byte(tt.body))
			if tt.wantErr == "-" {
				if err != nil {
					t.Fatalf("err = %v, want nil", err)
				}
				if r.Model != tt.wantModel || r.Stream != tt.stream {
					t.Fatalf("got model %q stream %v, want %q %v", r.Model, r.Stream, tt.wantModel, tt.stream)
				}
				return
			}
			var re *RequestError
			if !errors.As(err, &re) {
				t.Fatalf("err = %v, want *RequestError", err)
			}
			if re.Param != tt.wantErr {
				t.Fatalf("param = %q, want %q", re.Param, tt.wantErr)
			}
		})
	}
}

// TestWithModelKeepsEverythingElse: only the model value changes, byte for byte.
func TestWithModelKeepsEverythingElse(t *testing.T) {
	body := `{ "stream_options": {"include_usage": true}, "model" :  "alias",` + "\n" + `"messages":[{"role":"user","content":"h\u00e9"}], "x-unknown": [1, 2.50, null] }`
	r, err := ParseChatRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	got := string(r.WithModel("gpt-4o-\"mini"))
	want := `{ "stream_options": {"include_usage": true}, "model" :  "gpt-4o-\"mini",` + "\n" + `"messages":[{"role":"user","content":"h\u00e9"}], "x-unknown": [1, 2.50, null] }`
	if got != want {
		t.Fatalf("rewrite:\n got %s\nwant %s", got, want)
	}
	if !json.Valid([]byte(got)) {
		t.Fatal("rewritten body is not valid JSON")
	}
	if string(r.WithModel("alias")) != body {
		t.Fatal("same model must return the original body")
	}
}

func FuzzParseChatRequest(f *testing.F) {
	for _, s := range []string{`{"model":"m","messages":[]}`, `{"model":"a\"b","messages":[{"c":"}"}]}`, `{}`, `[`, "{\"model\":\"\xff\",\"messages\":[]}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseChatRequest(b)
		if err != nil {
			return
		}
		out := r.WithModel("rewritten")
		if !json.Valid(out) {
			t.Fatalf("rewrite produced invalid JSON from %q: %q", b, out)
		}
		r2, err := ParseChatRequest(out)
		if err != nil || r2.Model != "rewritten" || r2.Stream != r.Stream {
			t.Fatalf("rewrite not re-parsable: %v %+v", err, r2)
		}
	})
}

// The model's fast path must decode exactly as json.Unmarshal does, since a
// model name that decodes differently routes differently.
func TestDecodeStringMatchesUnmarshal(t *testing.T) {
	for _, raw := range []string{
		`"gpt-4o"`, `""`, `"h\u00e9"`, `"a\"b"`, `"héllo"`, "\"\xff\"", "\"a\xc3\"", `"\\"`,
		`"\ud83d\ude00"`, `12`, `null`, `true`, `["m"]`, `{"m":1}`,
	} {
		checkDecodeString(t, []byte(raw))
	}
}

func FuzzDecodeString(f *testing.F) {
	for _, s := range []string{`"gpt-4o"`, `"a\"b"`, "\"\xff\"", `null`, `"\u00e9"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return // ParseRequest validates the whole body first
		}
		checkDecodeString(t, raw)
	})
}

func checkDecodeString(t *testing.T, raw []byte) {
	t.Helper()
	var want string
	wantErr := json.Unmarshal(raw, &want)
	got, ok := decodeString(raw)
	if ok != (wantErr == nil) || got != want {
		t.Fatalf("decodeString(%q) = %q, %v; json.Unmarshal: %q, %v", raw, got, ok, want, wantErr)
	}
}

// BenchmarkParseChatRequest parses a short chat request and two long ones:
// all of it runs before the upstream request is sent.
func BenchmarkParseChatRequest(b *testing.B) {
	short := `{"model":"bench-model","stream":true,"stream_options":{"include_usage":true},` +
		`"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say something short about the sea."}]}`
	for _, bc := range []struct {
		name string
		body []byte
	}{{"short", []byte(short)}, {"10kB", longChatBody(10_000)}, {"100kB", longChatBody(100_000)}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParseChatRequest(bc.body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// longChatBody is a chat request of about size bytes of conversation.
func longChatBody(size int) []byte {
	var sb strings.Builder
	sb.WriteString(`{"model":"bench-model","stream":true,"messages":[`)
	for i := 0; sb.Len() < size; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"role":"user","content":"%s\u00e9 \"quoted\" line %d\n"}`,
			strings.Repeat("lorem ipsum dolor sit amet ", 1+size/2000), i)
	}
	sb.WriteString("]}")
	return []byte(sb.String())
}

// FuzzParseRequestOnePass holds ParseRequest's single pass to the two-pass
// parse it replaced (validate with encoding/json, then walk the members),
// kept below as referenceParseRequest: the same error or the same request,
// on every route.
func FuzzParseRequestOnePass(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[]}`, `{"model":"m","messages":[],"stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":1,"messages":[}`, `{"model":"m","model":"n","messages":[]}`, `{"stream":5,"model":"m"} x`,
		`{"model":"m","input":null}`, `{"model":"m","previous_response_id":"r"}`, `[1]`, `{"a":1,}`, ` {} `,
		`{"mo\u0064el":"m","messages":[1,{"a":[]}]}`, `{"model":"m","Model":"x","messages":[]}`,
		`{"model":"m","messages":[],"stream_options":{"include_usage":true,"Include_usage":1}}`,
		`{"model":"m","messages":[],"stream_options":{ "include_usage" : true }}`, `{"model":"m","messages":[],"ſtream":true}`,
	} {
		f.Add([]byte(s), uint8(0))
	}
	routes := []Route{RouteChat, RouteMessages, RouteEmbeddings, RouteResponses}
	f.Fuzz(func(t *testing.T, body []byte, r uint8) {
		route := routes[int(r)%len(routes)]
		got, gotErr := ParseRequest(route, body)
		want, wantErr := referenceParseRequest(route, body)
		if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
			t.Fatalf("ParseRequest(%v, %q): error %v, the two-pass parse says %v", route, body, gotErr, wantErr)
		}
		if gotErr == nil && (got.Model != want.Model || got.Stream != want.Stream ||
			got.modelStart != want.modelStart || got.modelEnd != want.modelEnd ||
			got.optStart != want.optStart || got.optEnd != want.optEnd ||
			got.incStart != want.incStart || got.incEnd != want.incEnd || got.IncludeUsage != want.IncludeUsage) {
			t.Fatalf("ParseRequest(%v, %q) = %+v, the two-pass parse says %+v", route, body, got, want)
		}
	})
}

func referenceParseRequest(route Route, body []byte) (*ChatRequest, error) {
	if !json.Valid(body) {
		return nil, &RequestError{Message: "request body is not valid JSON (one JSON object expected)"}
	}
	i := jsontext.SkipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return nil, &RequestError{Message: "request body must be a JSON object"}
	}
	req := &ChatRequest{Body: body, modelStart: -1, Route: route, optStart: -1, incStart: -1}
	sawMessages, sawInput := false, false
	seen := map[string]bool{}
	i = jsontext.SkipSpace(body, i+1)
	for i < len(body) && body[i] != '}' {
		keyEnd := jsontext.SkipValue(body, i)
		key, err := decodeKey(body[i:keyEnd])
		if err != nil {
			return nil, &RequestError{Message: "request body has an unreadable key"}
		}
		i = jsontext.SkipSpace(body, keyEnd)
		i = jsontext.SkipSpace(body, i+1) // ':'
		valStart := i
		valEnd := jsontext.SkipValue(body, i)
		val := body[valStart:valEnd]
		// The policy rule, written with strings.EqualFold: what
		// encoding/json would take for a policy member must be it, once.
		for _, name := range policyNames {
			switch {
			case string(key) == name && seen[name]:
				return nil, &RequestError{Param: name, Message: "'" + name + "' appears more than once"}
			case string(key) == name:
				seen[name] = true
			case strings.EqualFold(string(key), name):
				return nil, twinError(string(key), name)
			}
		}
		switch string(key) {
		case "model":
			model, ok := decodeString(val)
			if !ok || model == "" {
				return nil, &RequestError{Param: "model", Message: "'model' must be a non-empty string"}
			}
			req.Model = model
			req.modelStart, req.modelEnd = valStart, valEnd
		case "messages":
			if len(val) == 0 || val[0] != '[' {
				return nil, &RequestError{Param: "messages", Message: "'messages' must be an array"}
			}
			sawMessages = true
		case "input":
			// Only embeddings and responses read it; on the chat routes it
			// is the provider's business, like any unknown field.
			if route == RouteEmbeddings || route == RouteResponses {
				if string(val) == "null" {
					return nil, &RequestError{Param: "input", Message: "'input' must not be null"}
				}
				sawInput = true
			}
		case "stream_options":
			req.optStart, req.optEnd = valStart, valEnd
			if err := referenceStreamOptions(req, val, valStart); err != nil {
				return nil, err
			}
		case "previous_response_id":
			if string(val) != "null" && route == RouteResponses {
				sawInput = true
			}
		case "stream":
			switch string(val) {
			case "true":
				req.Stream = true
			case "false", "null":
			default:
				return nil, &RequestError{Param: "stream", Message: "'stream' must be a boolean"}
			}
		}
		i = jsontext.SkipSpace(body, valEnd)
		if i < len(body) && body[i] == ',' {
			i = jsontext.SkipSpace(body, i+1)
		}
	}
	if req.modelStart < 0 {
		return nil, &RequestError{Param: "model", Message: "you must provide a model parameter"}
	}
	switch route {
	case RouteChat, RouteMessages:
		if !sawMessages {
			return nil, &RequestError{Param: "messages", Message: "you must provide a messages parameter"}
		}
	case RouteEmbeddings:
		if !sawInput {
			return nil, &RequestError{Param: "input", Message: "you must provide an input parameter"}
		}
		req.Stream = false // embeddings answer one JSON body
	case RouteResponses:
		if !sawInput {
			return nil, &RequestError{Param: "input", Message: "you must provide an input or previous_response_id parameter"}
		}
	}
	return req, nil
}

// referenceStreamOptions reads include_usage from the stream_options
// object val (at off in the body) by decoding its keys one by one.
func referenceStreamOptions(req *ChatRequest, val []byte, off int) *RequestError {
	if val[0] != '{' {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(val))
	_, _ = dec.Token() // {
	for dec.More() {
		tok, _ := dec.Token()
		k := tok.(string)
		var raw json.RawMessage
		_ = dec.Decode(&raw)
		end := off + int(dec.InputOffset())
		switch {
		case k == "include_usage" && req.incStart >= 0:
			return &RequestError{Param: "stream_options.include_usage", Message: "'stream_options.include_usage' appears more than once"}
		case k == "include_usage":
			req.incStart, req.incEnd = end-len(raw), end
			req.IncludeUsage = string(raw) == "true"
		case strings.EqualFold(k, "include_usage"):
			return twinError("stream_options."+k, "stream_options.include_usage")
		}
	}
	return nil
}

// The one pass must keep encoding/json's nesting limit (10,000 open objects
// and arrays, the body's own object included) where the reference had it.
func TestParseRequestNestingLimit(t *testing.T) {
	for _, depth := range []int{9998, 9999, 10000} {
		body := []byte(`{"model":"m","messages":[],"x":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}`)
		_, err := ParseRequest(RouteChat, body)
		_, want := referenceParseRequest(RouteChat, body)
		if (err == nil) != (want == nil) {
			t.Errorf("depth %d: ParseRequest error %v, two-pass parse %v", depth+1, err, want)
		}
		if depth == 9999 && err != nil || depth == 10000 && err == nil {
			t.Errorf("depth %d: error %v, want valid only up to 10,000 levels", depth+1, err)
		}
	}
}
