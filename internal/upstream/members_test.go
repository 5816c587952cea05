package upstream

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestPolicyMemberTwins protects the route check from model smuggling: a
// member the gateway reads for policy, spelled so that only a
// case-insensitive decoder (Go's encoding/json: Ollama, LocalAI, the mock,
// the translators) takes it for the real one, or sent twice, is refused
// with a 400 naming it, on every route; names that merely look alike pass.
func TestPolicyMemberTwins(t *testing.T) {
	routes := []Route{RouteChat, RouteMessages, RouteEmbeddings, RouteResponses}
	base := `"messages":[],"input":"x"`
	for _, tc := range []struct {
		name, members string
		param         string // "" when the body is accepted
	}{
		{"case twin after", `"model":"gpt-4o-mini","Model":"SMUGGLED"`, "Model"},
		{"case twin before", `"MODEL":"SMUGGLED","model":"gpt-4o-mini"`, "MODEL"},
		{"escaped twin", `"model":"gpt-4o-mini","\u004dodel":"SMUGGLED"`, "Model"},
		{"escaped exact twice", `"model":"gpt-4o-mini","\u006dodel":"SMUGGLED"`, "model"},
		{"long s", `"model":"m","ſtream":true`, "ſtream"},
		{"escaped long s", `"model":"m","\u017ftream":true`, "ſtream"},
		{"Kelvin sign", `"model":"m","top_\u212a":3`, "top_\u212a"},
		{"stream twice", `"model":"m","stream":false,"stream":true`, "stream"},
		{"stream twin", `"model":"m","stream":false,"Stream":true`, "Stream"},
		{"stream_options twice", `"model":"m","stream_options":{},"stream_options":{"include_usage":true}`, "stream_options"},
		{"stream_options twin", `"model":"m","Stream_Options":{"include_usage":true}`, "Stream_Options"},
		{"include_usage twin", `"model":"m","stream_options":{"include_usage":false,"Include_Usage":true}`, "stream_options.Include_Usage"},
		{"include_usage twice", `"model":"m","stream_options":{"include_usage":false,"include_usage":true}`, "stream_options.include_usage"},
		{"max_tokens twin", `"model":"m","max_tokens":10,"MAX_TOKENS":100000`, "MAX_TOKENS"},
		{"max_output_tokens twin", `"model":"m","Max_Output_Tokens":100000`, "Max_Output_Tokens"},
		{"tools twin", `"model":"m","Tools":[]`, "Tools"},
		{"look-alikes pass", `"model":"m","models":"x","Streaming":true,"modeL_":1,"stream_options":{"include_usage":true,"Include":1}`, ""},
		{"unknown upper case passes", `"model":"m","X_Custom":1,"Ünicode":2`, ""},
	} {
		for _, route := range routes {
			body := "{" + tc.members + "," + base + "}"
			_, err := ParseRequest(route, []byte(body))
			if tc.param == "" {
				if err != nil {
					t.Errorf("%s on %v: %v, want accepted", tc.name, route, err)
				}
				continue
			}
			re, ok := err.(*RequestError)
			if !ok {
				t.Errorf("%s on %v: error %v, want a *RequestError naming %q", tc.name, route, err, tc.param)
				continue
			}
			if re.Param != tc.param {
				t.Errorf("%s on %v: param %q (%s), want %q", tc.name, route, re.Param, re.Message, tc.param)
			}
		}
	}
}

// goView is what encoding/json (the decoder of Go providers and of the
// translators) reads from a body the gateway accepted.
type goView struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens *int64 `json:"max_tokens"`
}

// FuzzPolicyMembers holds the gateway's reading of every body it accepts to
// an outside judge: encoding/json, which folds keys and keeps the last
// duplicate, must read the same model, stream and include_usage, and the
// map an exact decoder keeps (the translators' map[string]RawMessage) must
// hold at most one spelling of each policy member. Seeds cover case,
// escape and Unicode-folding variants.
func FuzzPolicyMembers(f *testing.F) {
	for _, s := range []string{
		`{"model":"gpt-4o-mini","Model":"SMUGGLED","messages":[]}`,
		`{"model":"m","\u004dodel":"x","messages":[]}`,
		`{"model":"m","\u006dodel":"x","messages":[]}`,
		`{"model":"m","ſtream":true,"messages":[]}`,
		`{"model":"m","\u017Ftream":true,"messages":[]}`,
		`{"model":"m","stream":true,"stream":false,"messages":[]}`,
		`{"model":"m","stream":true,"stream_options":{"include_usage":true,"INCLUDE_USAGE":false},"messages":[]}`,
		`{"model":"m","stream_options":{"include_u\u0073age":true},"messages":[]}`,
		`{"model":"m","max_tokens":1,"max_to\u212Aens":2,"messages":[]}`,
		`{"model":"m","input":"x","Input":"y"}`,
		`{"model":"m","messages":[],"stream_options":null,"stream":true}`,
	} {
		f.Add([]byte(s), uint8(0))
		f.Add([]byte(s), uint8(3))
	}
	routes := []Route{RouteChat, RouteMessages, RouteEmbeddings, RouteResponses}
	f.Fuzz(func(t *testing.T, body []byte, r uint8) {
		route := routes[int(r)%len(routes)]
		req, err := ParseRequest(route, body)
		if err != nil {
			return
		}
		var v goView
		if json.Unmarshal(body, &v) != nil {
			return // a type encoding/json refuses (e.g. stream_options a string)
		}
		if v.Model != req.Model {
			t.Fatalf("%q: routed on model %q, encoding/json reads %q", body, req.Model, v.Model)
		}
		if route != RouteEmbeddings && v.Stream != req.Stream {
			t.Fatalf("%q: stream %v, encoding/json reads %v", body, req.Stream, v.Stream)
		}
		if got := v.StreamOptions != nil && v.StreamOptions.IncludeUsage; got != req.IncludeUsage {
			t.Fatalf("%q: include_usage %v, encoding/json reads %v", body, req.IncludeUsage, got)
		}
		var top map[string]json.RawMessage
		if json.Unmarshal(body, &top) != nil {
			t.Fatalf("%q accepted but not an object", body)
		}
		for _, name := range policyNames {
			n := 0
			for k := range top {
				if strings.EqualFold(k, name) {
					n++
					if k != name {
						t.Fatalf("%q: accepted %q, a twin of %q", body, k, name)
					}
				}
			}
			if n > 1 {
				t.Fatalf("%q: accepted %d spellings of %q", body, n, name)
			}
		}
	})
}
