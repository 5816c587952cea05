package gemini

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

type requestCase struct {
	Name         string          `json:"name"`
	Source       string          `json:"source"`
	Body         json.RawMessage `json:"body"`
	Want         json.RawMessage `json:"want"`
	ErrorParam   string          `json:"error_param"`
	Stream       bool            `json:"stream"`
	IncludeUsage bool            `json:"include_usage"`
	Path         string          `json:"path"`
}

func loadJSON[T any](t testing.TB, name string) T {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}

// sameJSON compares two JSON texts as values, so a fixture may be written
// readably.
func sameJSON(t *testing.T, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got is not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("want is not JSON: %v", err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// TestChatToGemini runs testdata/requests.json: each body becomes exactly
// the Gemini body of its fixture, or is refused with a *FieldError naming
// the fixture's field.
func TestChatToGemini(t *testing.T) {
	for _, tc := range loadJSON[[]requestCase](t, "requests.json") {
		t.Run(tc.Name, func(t *testing.T) {
			if tc.Source == "" {
				t.Fatal("fixture without a source")
			}
			res, err := ChatToGemini(tc.Body, Options{Model: "gemini-2.5-flash"})
			if tc.Want == nil {
				var fe *FieldError
				if !errors.As(err, &fe) || fe.Param != tc.ErrorParam {
					t.Fatalf("err = %v, want a FieldError for %q", err, tc.ErrorParam)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			sameJSON(t, res.Body, tc.Want)
			if res.Stream != tc.Stream || res.IncludeUsage != tc.IncludeUsage {
				t.Fatalf("Stream %v IncludeUsage %v", res.Stream, res.IncludeUsage)
			}
			wantPath := tc.Path
			if wantPath == "" {
				wantPath = "models/gemini-2.5-flash:generateContent"
			}
			if res.Path != wantPath {
				t.Fatalf("Path = %q, want %q", res.Path, wantPath)
			}
		})
	}
}

// TestPromptBytesUnescaped: <, > and & reach Gemini as the client wrote
// them, not as \u003c escapes.
func TestPromptBytesUnescaped(t *testing.T) {
	res, err := ChatToGemini([]byte(`{"messages":[{"role":"user","content":"a<b>&c"}]}`), Options{Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res.Body), `"a<b>&c"`) {
		t.Fatalf("body %s", res.Body)
	}
}

func TestOptionsMaxTokensAndModel(t *testing.T) {
	res, err := ChatToGemini([]byte(`{"messages":[{"role":"user","content":"x"}]}`), Options{Model: "m/x", MaxTokens: 77})
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, res.Body, []byte(`{"contents":[{"role":"user","parts":[{"text":"x"}]}],"generationConfig":{"maxOutputTokens":77}}`))
	if res.Path != "models/m%2Fx:generateContent" {
		t.Fatalf("Path = %q", res.Path)
	}
	if p := Path("models/gemini-2.5-pro", true); p != "models/gemini-2.5-pro:streamGenerateContent?alt=sse" {
		t.Fatalf("Path = %q", p)
	}
	if req, err := EmbeddingsToGemini([]byte(`{"input":"a"}`), Options{Model: "models/e"}); err != nil ||
		req.Path != "models/e:batchEmbedContents" || !strings.Contains(string(req.Body), `"model":"models/e"`) {
		t.Fatalf("%+v %v", req, err)
	}
	if _, err := ChatToGemini([]byte(`{"messages":[]}`), Options{}); err == nil {
		t.Fatal("no model: no error")
	}
}
