package anthropicclient

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestErrorBodyTypes(t *testing.T) {
	cases := map[int]string{
		400: "invalid_request_error",
		401: "authentication_error",
		402: "billing_error",
		403: "permission_error",
		404: "not_found_error",
		408: "invalid_request_error",
		413: "request_too_large",
		422: "invalid_request_error",
		429: "rate_limit_error",
		499: "api_error",
		500: "api_error",
		502: "api_error",
		503: "overloaded_error",
		504: "timeout_error",
		529: "overloaded_error",
		200: "api_error",
	}
	for status, typ := range cases {
		got := decode(t, ErrorBody(status, "went \"wrong\"\n<here>"))
		want := map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": "went \"wrong\"\n<here>"}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%d: %v, want %v", status, got, want)
		}
	}
}

func TestErrorEvent(t *testing.T) {
	out := ErrorEvent([]byte("before|"), 529, "Overloaded")
	const want = `before|event: error` + "\n" + `data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}` + "\n\n"
	if string(out) != want {
		t.Fatalf("got %q\nwant %q", out, want)
	}
	frames, err := parseFrames(out[len("before|"):])
	if err != nil || len(frames) != 1 || frames[0].Event != "error" {
		t.Fatalf("%v %v", frames, err)
	}
}

func TestErrorFromOpenAI(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
		want   string // message
	}{
		{"openai object", 400, `{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
			"This model's maximum context length is 128000 tokens."},
		{"error string", 400, `{"error":"prompt too long"}`, "prompt too long"},
		{"top-level message", 413, `{"message":"payload too large"}`, "payload too large"},
		{"fastapi detail", 422, `{"detail":"field required"}`, "field required"},
		{"html page", 400, `<html><body>Bad Request</body></html>`, "Bad Request"},
		{"empty", 418, ``, "I'm a teapot"},
		{"unknown status", 460, `{}`, "upstream error 460"},
		{"error without message", 400, `{"error":{"type":"invalid_request_error"}}`, "Bad Request"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := decode(t, ErrorFromOpenAI(c.status, []byte(c.body))).(map[string]any)
			e := got["error"].(map[string]any)
			if got["type"] != "error" || e["message"] != c.want || e["type"] != ErrorType(c.status) {
				t.Errorf("got %v, want message %q type %q", got, c.want, ErrorType(c.status))
			}
		})
	}
}

func TestProviderErrorStatus(t *testing.T) {
	cases := []struct {
		e    ProviderError
		want int
	}{
		{ProviderError{Code: "503"}, 503},
		{ProviderError{Code: "200"}, 502},
		{ProviderError{Type: "rate_limit_exceeded"}, 429},
		{ProviderError{Type: "overloaded_error"}, 529},
		{ProviderError{Type: "invalid_request_error", Code: "context_length_exceeded"}, 400},
		{ProviderError{Type: "server_error"}, 502},
		{ProviderError{}, 502},
	}
	for _, c := range cases {
		if got := c.e.Status(); got != c.want {
			t.Errorf("%+v: %d, want %d", c.e, got, c.want)
		}
	}
}

func TestRequestErrorString(t *testing.T) {
	if got := (&RequestError{Param: "max_tokens", Message: "field required"}).Error(); got != "max_tokens: field required" {
		t.Error(got)
	}
	if got := (&RequestError{Message: "not JSON"}).Error(); strings.Contains(got, ":") {
		t.Error(got)
	}
}

// TestAppendString: every string round-trips through appendString and
// encoding/json, invalid UTF-8 becoming U+FFFD, so error bodies and models
// built from arbitrary text are always valid JSON.
func TestAppendString(t *testing.T) {
	for _, s := range []string{
		"", "plain", `quote " backslash \ slash /`, "\x00\x01\x1f\x7f", "tab\tnl\ncr\r",
		"é ü 日本 😀", "\u2028\u2029", "bad \xff\xfe utf8 \xe6\x97", "<html>&amp;",
	} {
		lit := appendString(nil, s)
		if !utf8.Valid(lit) {
			t.Errorf("%q: output not UTF-8: %q", s, lit)
		}
		var back string
		if err := json.Unmarshal(lit, &back); err != nil {
			t.Fatalf("%q: %q is not a JSON string: %v", s, lit, err)
		}
		// Bad bytes become U+FFFD (none of the inputs holds one itself).
		if strings.ReplaceAll(back, "\uFFFD", "") != strings.ToValidUTF8(s, "") || utf8.ValidString(s) && back != s {
			t.Errorf("%q: round trip %q", s, back)
		}
		if string(appendString(nil, []byte(s))) != string(lit) {
			t.Errorf("%q: []byte and string forms differ", s)
		}
	}
}
