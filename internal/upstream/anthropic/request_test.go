package anthropic

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

// requestCase is one entry of testdata/requests.json: an OpenAI body and
// either the Messages API body it must become or the field it must be
// refused for.
type requestCase struct {
	Name    string `json:"name"`
	Options *struct {
		Model     string `json:"model"`
		MaxTokens int64  `json:"max_tokens"`
	} `json:"options"`
	Request      json.RawMessage `json:"request"`
	Want         json.RawMessage `json:"want"`
	Stream       *bool           `json:"stream"`
	IncludeUsage *bool           `json:"include_usage"`
	ErrorParam   *string         `json:"error_param"`
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

// decoded compares JSON by value: key order and number spelling aside.
func decoded(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	return v
}

// TestChatToMessages drives every request mapping of the contract, and every
// refusal, from testdata/requests.json.
func TestChatToMessages(t *testing.T) {
	for _, tc := range loadJSON[[]requestCase](t, "requests.json") {
		t.Run(tc.Name, func(t *testing.T) {
			opts := Options{Model: "claude-sonnet-4-5"}
			if tc.Options != nil {
				opts = Options{Model: tc.Options.Model, MaxTokens: tc.Options.MaxTokens}
			}
			got, err := ChatToMessages(tc.Request, opts)
			if tc.ErrorParam != nil {
				var fe *FieldError
				if !errors.As(err, &fe) {
					t.Fatalf("err = %v, want *FieldError for %q", err, *tc.ErrorParam)
				}
				if fe.Param != *tc.ErrorParam || fe.Message == "" {
					t.Fatalf("FieldError{%q, %q}, want param %q and a message", fe.Param, fe.Message, *tc.ErrorParam)
				}
				if fe.Param != "" && !strings.HasPrefix(fe.Error(), fe.Param+": ") {
					t.Fatalf("Error() = %q does not name the field", fe.Error())
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if g, w := decoded(t, got.Body), decoded(t, tc.Want); !reflect.DeepEqual(g, w) {
				t.Fatalf("body:\n got %s\nwant %s", got.Body, tc.Want)
			}
			if tc.Stream != nil && got.Stream != *tc.Stream {
				t.Errorf("Stream = %v, want %v", got.Stream, *tc.Stream)
			}
			if tc.IncludeUsage != nil && got.IncludeUsage != *tc.IncludeUsage {
				t.Errorf("IncludeUsage = %v, want %v", got.IncludeUsage, *tc.IncludeUsage)
			}
		})
	}
}

// TestChatToMessagesExactBytes pins the encoding the provider receives: field
// order, no HTML escaping of prompt text, the number as the client wrote it.
func TestChatToMessagesExactBytes(t *testing.T) {
	body := `{"model":"alias","temperature":0.50,"messages":[{"role":"user","content":"a < b & c > d \u2028"}]}`
	got, err := ChatToMessages([]byte(body), Options{Model: "claude-haiku-4-5"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"claude-haiku-4-5","messages":[{"role":"user","content":[{"type":"text","text":"a < b & c > d \u2028"}]}],"max_tokens":4096,"temperature":0.50}`
	if string(got.Body) != want {
		t.Fatalf("body:\n got %s\nwant %s", got.Body, want)
	}
}

// TestChatToMessagesNeedsModel: a missing upstream model is the gateway's
// mistake, not the client's, so it is not a FieldError.
func TestChatToMessagesNeedsModel(t *testing.T) {
	_, err := ChatToMessages([]byte(`{"messages":[{"role":"user","content":"x"}]}`), Options{})
	var fe *FieldError
	if err == nil || errors.As(err, &fe) {
		t.Fatalf("err = %v, want a plain error", err)
	}
}

// TestChatToMessagesNullIsAbsent: null for a field means the default, as
// OpenAI treats it, never a refusal.
func TestChatToMessagesNullIsAbsent(t *testing.T) {
	body := `{"model":"m","messages":[{"role":"user","content":"x"}],"n":null,"logprobs":null,"response_format":null,` +
		`"tools":null,"tool_choice":null,"stop":null,"temperature":null,"max_tokens":null,"user":null,"reasoning_effort":null}`
	got, err := ChatToMessages([]byte(body), Options{Model: "c"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"c","messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"max_tokens":4096}`
	if string(got.Body) != want {
		t.Fatalf("body:\n got %s\nwant %s", got.Body, want)
	}
}
