package mockupstream

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go"
)

// bedrockRuntime is AWS's own Bedrock Runtime client pointed at the mock, with
// static credentials and no retries (a refusal must reach the test as sent).
func bedrockRuntime(url string, creds aws.Credentials) *bedrockruntime.Client {
	return bedrockruntime.New(bedrockruntime.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(url),
		Credentials:  credentials.StaticCredentialsProvider{Value: creds},
		Retryer:      aws.NopRetryer{},
	})
}

// converseInput is one user turn offering the lookup tool.
func converseInput() *bedrockruntime.ConverseInput {
	return &bedrockruntime.ConverseInput{
		ModelId: aws.String("anthropic.claude-3-haiku-20240307-v1:0"),
		Messages: []types.Message{{Role: types.ConversationRoleUser,
			Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: "hi"}}}},
		ToolConfig: &types.ToolConfiguration{Tools: []types.Tool{&types.ToolMemberToolSpec{Value: types.ToolSpecification{
			Name:        aws.String("lookup"),
			InputSchema: &types.ToolInputSchemaMemberJson{Value: document.NewLazyDocument(map[string]any{"type": "object"})},
		}}}},
	}
}

// TestBedrockRuntimeSDK: aws-sdk-go-v2's bedrockruntime client, signing with
// static credentials, reads the mock's Converse and ConverseStream answers:
// text, a tool call with its JSON input, the stop reason and usage; an
// injected 429 reaches it as its typed ThrottlingException.
func TestBedrockRuntimeSDK(t *testing.T) {
	s, ts := start(t, Behavior{Chunks: 3, ToolUse: ToolUseFirst, CachedTokens: 4})
	creds := aws.Credentials{AccessKeyID: "AKIDMOCK", SecretAccessKey: "mock-secret", SessionToken: "mock-token"}
	s.EnableBedrock("us-east-1", creds.AccessKeyID, creds.SecretAccessKey, creds.SessionToken)
	c := bedrockRuntime(ts.URL, creds)
	ctx := context.Background()
	const want = "Hello from mock chunk 1 2 3"

	out, err := c.Converse(ctx, converseInput())
	if err != nil {
		t.Fatal(err)
	}
	msg, ok := out.Output.(*types.ConverseOutputMemberMessage)
	if !ok || len(msg.Value.Content) != 2 {
		t.Fatalf("output %#v", out.Output)
	}
	if text, ok := msg.Value.Content[0].(*types.ContentBlockMemberText); !ok || text.Value != want {
		t.Fatalf("text block %#v", msg.Value.Content[0])
	}
	use, ok := msg.Value.Content[1].(*types.ContentBlockMemberToolUse)
	if !ok || aws.ToString(use.Value.Name) != "lookup" || !strings.HasPrefix(aws.ToString(use.Value.ToolUseId), "tooluse_mock_") {
		t.Fatalf("tool block %#v", msg.Value.Content[1])
	}
	var input map[string]any
	if err := use.Value.Input.UnmarshalSmithyDocument(&input); err != nil || input["identity"] != "mock" {
		t.Fatalf("tool input %v %v", input, err)
	}
	u := out.Usage
	if out.StopReason != types.StopReasonToolUse || u == nil || aws.ToInt32(u.OutputTokens) != 4 ||
		aws.ToInt32(u.CacheReadInputTokens) != 4 || aws.ToInt32(u.TotalTokens) != aws.ToInt32(u.InputTokens)+4+4 {
		t.Fatalf("stop %s usage %+v", out.StopReason, u)
	}

	// maxTokens below the answer cuts it there, as Converse does.
	in := converseInput()
	in.InferenceConfig = &types.InferenceConfiguration{MaxTokens: aws.Int32(2)}
	out, err = c.Converse(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	msg, _ = out.Output.(*types.ConverseOutputMemberMessage)
	if out.StopReason != types.StopReasonMaxTokens || msg == nil || len(msg.Value.Content) != 1 || aws.ToInt32(out.Usage.OutputTokens) != 2 {
		t.Fatalf("max tokens 2: stop %s output %#v usage %+v", out.StopReason, out.Output, out.Usage)
	}

	in = converseInput()
	stream, err := c.ConverseStream(ctx, &bedrockruntime.ConverseStreamInput{ModelId: in.ModelId, Messages: in.Messages, ToolConfig: in.ToolConfig})
	if err != nil {
		t.Fatal(err)
	}
	es := stream.GetStream()
	var text, toolInput strings.Builder
	var toolName string
	var stop types.StopReason
	var usage *types.TokenUsage
	for ev := range es.Events() {
		switch e := ev.(type) {
		case *types.ConverseStreamOutputMemberContentBlockStart:
			if st, ok := e.Value.Start.(*types.ContentBlockStartMemberToolUse); ok {
				toolName = aws.ToString(st.Value.Name)
			}
		case *types.ConverseStreamOutputMemberContentBlockDelta:
			switch d := e.Value.Delta.(type) {
			case *types.ContentBlockDeltaMemberText:
				text.WriteString(d.Value)
			case *types.ContentBlockDeltaMemberToolUse:
				toolInput.WriteString(aws.ToString(d.Value.Input))
			}
		case *types.ConverseStreamOutputMemberMessageStop:
			stop = e.Value.StopReason
		case *types.ConverseStreamOutputMemberMetadata:
			usage = e.Value.Usage
		}
	}
	if err := es.Close(); err != nil {
		t.Fatal(err)
	}
	if err := es.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != want || toolName != "lookup" || toolInput.String() != `{"identity":"mock"}` ||
		stop != types.StopReasonToolUse || usage == nil || aws.ToInt32(usage.OutputTokens) != 4 {
		t.Fatalf("stream: %q tool %s(%s) stop %s usage %+v", text.String(), toolName, toolInput.String(), stop, usage)
	}

	// A stream that fails after it started ends in the SDK's typed exception.
	s.SetBehavior(Behavior{Chunks: 3, ErrorAfterChunks: 1})
	stream, err = c.ConverseStream(ctx, &bedrockruntime.ConverseStreamInput{ModelId: in.ModelId, Messages: in.Messages})
	if err != nil {
		t.Fatal(err)
	}
	es = stream.GetStream()
	for range es.Events() {
	}
	es.Close()
	var streamErr *types.ModelStreamErrorException
	if !errors.As(es.Err(), &streamErr) {
		t.Fatalf("mid-stream error: %#v", es.Err())
	}

	s.SetBehavior(Behavior{Status: http.StatusTooManyRequests})
	_, err = c.Converse(ctx, converseInput())
	var throttled *types.ThrottlingException
	var re interface{ HTTPStatusCode() int }
	if !errors.As(err, &throttled) || !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusTooManyRequests {
		t.Fatalf("429: %#v", err)
	}

	// Credentials the mock does not know are refused as AWS refuses them.
	_, err = bedrockRuntime(ts.URL, aws.Credentials{AccessKeyID: "AKIDMOCK", SecretAccessKey: "other", SessionToken: "mock-token"}).
		Converse(ctx, converseInput())
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "InvalidSignatureException" {
		t.Fatalf("wrong secret: %#v", err)
	}
}
