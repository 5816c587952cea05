package anthropicclient

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// These tests put the official Go SDK on the client side of a stand-in
// handler built from this package, as the gateway's /v1/messages will be:
// the SDK's own request encoding, SSE decoding, event unions and
// Message.Accumulate judge the translation, not a model of them.

// sdkGateway answers /v1/messages from a canned provider reply, translating
// both ways.
type sdkGateway struct {
	t     *testing.T
	reply []byte // a chat.completion body, or a provider SSE body

	mu   sync.Mutex
	chat map[string]any // the last translated chat request
}

func (g *sdkGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.URL.Path != "/v1/messages" {
		writeError(w, http.StatusNotFound, "no such route")
		return
	}
	var head struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(body, &head)
	chat, stream, err := MessagesToChat(body, "upstream-model")
	var re *RequestError
	if errors.As(err, &re) {
		writeError(w, http.StatusBadRequest, re.Error())
		return
	} else if err != nil {
		g.t.Errorf("MessagesToChat: %v", err)
		writeError(w, http.StatusInternalServerError, "translation failed")
		return
	}
	var decoded map[string]any
	if err := json.Unmarshal(chat, &decoded); err != nil {
		g.t.Errorf("chat request not JSON: %v", err)
	}
	g.mu.Lock()
	g.chat = decoded
	g.mu.Unlock()

	if !stream {
		msg, _, err := ChatToMessage(g.reply, head.Model)
		if err != nil {
			writeError(w, http.StatusBadGateway, "bad provider answer")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(msg)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	tr := NewStreamTranslator(head.Model)
	var out []byte
	for _, ev := range splitEvents(g.reply) {
		out, err = feed(tr, out[:0], ev)
		if err != nil {
			var pe *ProviderError
			if errors.As(err, &pe) {
				out = ErrorEvent(out, pe.Status(), pe.Message)
			} else {
				out = ErrorEvent(out, http.StatusBadGateway, "provider stream malformed")
			}
			_, _ = w.Write(out)
			return
		}
		_, _ = w.Write(out)
		w.(http.Flusher).Flush()
	}
	_, _ = w.Write(tr.Finish(out[:0]))
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(ErrorBody(status, msg))
}

func sdkClient(t *testing.T, reply []byte) (anthropic.Client, *sdkGateway) {
	t.Helper()
	g := &sdkGateway{t: t, reply: reply}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	c := anthropic.NewClient(
		option.WithBaseURL(srv.URL),
		option.WithAPIKey("test-key-not-secret"),
		option.WithMaxRetries(0),
		option.WithRequestTimeout(10*time.Second),
	)
	return c, g
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func weatherTool() anthropic.ToolUnionParam {
	return anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
		Name:        "get_current_weather",
		Description: anthropic.String("Get the current weather"),
		InputSchema: anthropic.ToolInputSchemaParam{
			Properties: map[string]any{"location": map[string]any{"type": "string"}},
			Required:   []string{"location"},
		},
	}}
}

func TestSDKNonStreamingToolRoundTrip(t *testing.T) {
	var fx struct {
		Chat json.RawMessage `json:"chat"`
	}
	if err := json.Unmarshal(readFile(t, "testdata/responses/tool_calls.json"), &fx); err != nil {
		t.Fatal(err)
	}
	client, g := sdkClient(t, fx.Chat)
	msg, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model:         "claude-sonnet-4-5",
		MaxTokens:     512,
		System:        []anthropic.TextBlockParam{{Text: "Be brief."}},
		StopSequences: []string{"###"},
		Metadata:      anthropic.MetadataParam{UserID: anthropic.String("u-42")},
		Tools:         []anthropic.ToolUnionParam{weatherTool()},
		ToolChoice:    anthropic.ToolChoiceUnionParam{OfAny: &anthropic.ToolChoiceAnyParam{DisableParallelToolUse: anthropic.Bool(true)}},
		Messages: []anthropic.MessageParam{
			anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Boston?")),
			anthropic.NewAssistantMessage(anthropic.NewToolUseBlock("toolu_1", map[string]any{"location": "Boston, MA"}, "get_current_weather")),
			{OfSystem: &anthropic.SystemMessageParam{Content: []anthropic.TextBlockParam{{Text: "Use metric units."}}}},
			anthropic.NewUserMessage(
				anthropic.NewToolResultBlock("toolu_1", "22C and sunny", false),
				anthropic.NewTextBlock("And tomorrow?"),
			),
		},
	})
	if err != nil {
		t.Fatalf("SDK: %v", err)
	}

	// What the provider was asked.
	g.mu.Lock()
	chat := g.chat
	g.mu.Unlock()
	wantMsgs := decode(t, []byte(`[
		{"role":"system","content":"Be brief."},
		{"role":"user","content":"Weather in Boston?"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"get_current_weather","arguments":"{\"location\":\"Boston, MA\"}"}}]},
		{"role":"system","content":"Use metric units."},
		{"role":"tool","tool_call_id":"toolu_1","content":"22C and sunny"},
		{"role":"user","content":"And tomorrow?"}]`))
	if !reflect.DeepEqual(chat["messages"], wantMsgs) {
		t.Errorf("messages %s", mustJSON(t, chat["messages"]))
	}
	if chat["tool_choice"] != "required" || chat["parallel_tool_calls"] != false || chat["max_tokens"] != 512.0 ||
		chat["temperature"] != nil || chat["user"] != "u-42" || !reflect.DeepEqual(chat["stop"], []any{"###"}) {
		t.Errorf("chat request %s", mustJSON(t, chat))
	}

	// What the SDK made of the answer.
	if msg.ID != "msg_abc123" || msg.Model != "claude-sonnet-4-5" || msg.StopReason != anthropic.StopReasonToolUse {
		t.Errorf("message %s", msg.RawJSON())
	}
	if len(msg.Content) != 2 || msg.Content[0].Type != "tool_use" || msg.Content[0].ID != "call_abc123" ||
		msg.Content[0].Name != "get_current_weather" || string(msg.Content[0].Input) != `{"location":"Boston, MA"}` ||
		string(msg.Content[1].Input) != `{}` {
		t.Errorf("content %s", msg.RawJSON())
	}
	if msg.Usage.InputTokens != 82 || msg.Usage.OutputTokens != 17 {
		t.Errorf("usage %+v", msg.Usage)
	}
	// The SDK can turn the answer into the next turn's input.
	if p := msg.ToParam(); p.OfAssistant == nil || len(p.OfAssistant.Content) != 2 || p.OfAssistant.Content[0].OfToolUse == nil {
		t.Errorf("ToParam %+v", p)
	}
}

// streamSDK runs a streaming request against a provider SSE fixture and
// accumulates the events with the SDK.
func streamSDK(t *testing.T, fixture string) (anthropic.Message, []string, error) {
	t.Helper()
	client, _ := sdkClient(t, readFile(t, fixture))
	stream := client.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 256,
		Tools:     []anthropic.ToolUnionParam{weatherTool()},
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hi"))},
	})
	defer stream.Close()
	var msg anthropic.Message
	var types []string
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		if err := msg.Accumulate(ev); err != nil {
			t.Fatalf("Accumulate(%s): %v", ev.Type, err)
		}
	}
	return msg, types, stream.Err()
}

func TestSDKStreamingText(t *testing.T) {
	msg, types, err := streamSDK(t, "testdata/streams/text.openai.sse")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"message_start", "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if !reflect.DeepEqual(types, want) {
		t.Errorf("events %v", types)
	}
	if len(msg.Content) != 1 || msg.Content[0].Text != "Hello! \"Quoted\" é\n" || msg.StopReason != anthropic.StopReasonEndTurn ||
		msg.ID != "msg_123" || msg.Usage.InputTokens != 9 || msg.Usage.OutputTokens != 3 {
		t.Errorf("message %+v", msg)
	}
}

func TestSDKStreamingParallelTools(t *testing.T) {
	msg, _, err := streamSDK(t, "testdata/streams/parallel_tools.openai.sse")
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 2 || msg.StopReason != anthropic.StopReasonToolUse {
		t.Fatalf("message %+v", msg)
	}
	for i, want := range []struct{ id, name, input string }{
		{"call_weather", "get_weather", `{"location": "Paris"}`},
		{"call_time", "get_time", `{"tz": "Europe/Paris"}`},
	} {
		b := msg.Content[i]
		if b.Type != "tool_use" || b.ID != want.id || b.Name != want.name || string(b.Input) != want.input {
			t.Errorf("block %d: %s %s %s %s", i, b.Type, b.ID, b.Name, b.Input)
		}
	}
	if msg.Usage.InputTokens != 20 || msg.Usage.CacheReadInputTokens != 100 || msg.Usage.OutputTokens != 40 {
		t.Errorf("usage %+v", msg.Usage)
	}
}

func TestSDKStreamingProviderError(t *testing.T) {
	msg, types, err := streamSDK(t, "testdata/streams/error_chunk.openai.sse")
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("err = %v (%T), want *anthropic.Error", err, err)
	}
	if apiErr.Message != "The server had an error while processing your request." || apiErr.Type() != "api_error" {
		t.Errorf("error message %q type %q", apiErr.Message, apiErr.Type())
	}
	if len(types) != 3 || len(msg.Content) != 1 || msg.Content[0].Text != "Partial" {
		t.Errorf("before the error: %v %+v", types, msg.Content)
	}
}

func TestSDKRequestRefused(t *testing.T) {
	client, _ := sdkClient(t, nil)
	_, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 0,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hi"))},
	})
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("err = %v, want *anthropic.Error", err)
	}
	if apiErr.StatusCode != 400 || apiErr.Type() != "invalid_request_error" || apiErr.Message != "max_tokens: must be a positive integer" {
		t.Errorf("status %d type %q message %q", apiErr.StatusCode, apiErr.Type(), apiErr.Message)
	}
}
