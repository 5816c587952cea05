package api

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestCountTokensAndMessagesPaths protects issue 21: count_tokens answers
// the documented estimate for a routed model, and every error under
// /v1/messages, including unknown paths and methods, is Anthropic-shaped,
// while other paths keep OpenAI's shape.
func TestCountTokensAndMessagesPaths(t *testing.T) {
	url := startGateway(t, &bodyUpstream{}, newOutcomes())
	const (
		msgs  = `[{"role":"user","content":"hello there"}]`
		sys   = `"be brief"`
		tools = `[{"name":"get_time","input_schema":{"type":"object"}}]`
	)
	tests := []struct {
		name, method, path, body string
		status                   int
		anthropicType            string // "" for a success or an OpenAI-shaped error
		want                     string // the body of a success
	}{
		{"estimate", "POST", countTokensPath, `{"model":"m","system":` + sys + `,"messages":` + msgs + `,"tools":` + tools + `}`,
			200, "", `{"input_tokens":` + itoa((len(msgs)+len(sys)+len(tools)+3)/4) + "}\n"},
		{"messages only", "POST", countTokensPath, `{"model":"m","messages":` + msgs + `}`, 200, "", `{"input_tokens":` + itoa((len(msgs)+3)/4) + "}\n"},
		{"unknown model", "POST", countTokensPath, `{"model":"nope","messages":[]}`, 404, "not_found_error", ""},
		{"no model", "POST", countTokensPath, `{"messages":[]}`, 400, "invalid_request_error", ""},
		{"no messages", "POST", countTokensPath, `{"model":"m"}`, 400, "invalid_request_error", ""},
		{"not JSON", "POST", countTokensPath, `{`, 400, "invalid_request_error", ""},
		{"wrong method", "GET", countTokensPath, "", 405, "invalid_request_error", ""},
		{"unknown path under messages", "POST", "/v1/messages/batches", `{}`, 404, "not_found_error", ""},
		{"messages wrong method", "GET", "/v1/messages", "", 405, "invalid_request_error", ""},
		{"unknown path elsewhere", "POST", "/v1/nope", `{}`, 404, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, url+tt.path, strings.NewReader(tt.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, b)
			}
			if tt.status == 200 {
				if string(b) != tt.want {
					t.Fatalf("body %s, want %s", b, tt.want)
				}
				return
			}
			var e struct {
				Type  string `json:"type"`
				Error struct {
					Type    string `json:"type"`
					Message string `json:"message"`
					Code    string `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatalf("not JSON: %s", b)
			}
			if tt.anthropicType == "" {
				if e.Type != "" || e.Error.Code == "" {
					t.Fatalf("want an OpenAI-shaped error: %s", b)
				}
				return
			}
			if e.Type != "error" || e.Error.Type != tt.anthropicType || e.Error.Message == "" || e.Error.Code != "" {
				t.Fatalf("want an Anthropic %s error: %s", tt.anthropicType, b)
			}
		})
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
