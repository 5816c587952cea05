package server_test

import (
	"context"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// TestResponsesOpenAISDK: the official OpenAI Go SDK's Responses client
// reads a whole answer and a stream from an anthropic-only and a
// gemini-only model, text and usage included.
func TestResponsesOpenAISDK(t *testing.T) {
	g := start(t, setup{routes: responsesRoutes})
	c := openaiClient(g)
	ctx := context.Background()
	for _, model := range []string{"claude-only", "gemini-only"} {
		params := responses.ResponseNewParams{Model: model, Instructions: openai.String("Be brief."),
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}
		r, err := c.Responses.New(ctx, params)
		if err != nil {
			t.Fatalf("%s: %v", model, err)
		}
		if r.Status != "completed" || r.OutputText() == "" || r.Usage.InputTokens == 0 || r.Usage.OutputTokens == 0 {
			t.Fatalf("%s: %+v", model, r)
		}
		stream := c.Responses.NewStreaming(ctx, params)
		var text string
		var done responses.Response
		for stream.Next() {
			ev := stream.Current()
			switch ev.Type {
			case "response.output_text.delta":
				text += ev.Delta
			case "response.completed":
				done = ev.AsResponseCompleted().Response
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("%s stream: %v", model, err)
		}
		if text == "" || done.OutputText() != text || done.Usage.TotalTokens == 0 {
			t.Fatalf("%s stream: text %q, completed %+v", model, text, done)
		}
	}
}
