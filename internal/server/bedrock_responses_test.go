package server_test

import (
	"strings"
	"testing"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// TestResponsesOverBedrock: a Responses client, stream and not, with and
// without a tool call, is answered by a bedrock candidate through the
// chat form, signed as the mock checks; the provider got a Converse
// request with the instructions as its system block, and the rows hold
// the usage.
func TestResponsesOverBedrock(t *testing.T) {
	g := start(t, bedrockSetup(setup{}))
	for _, stream := range []bool{false, true} {
		responsesCase(t, g, "claude-br", "br", stream, false, "success/200/(br)", "unused/0/(backup)")
	}
	last, ok := g.Primary.LastRequestAt("")
	if !ok || !strings.HasSuffix(last.Path, "/converse-stream") || !strings.Contains(string(last.Body), `"system":[{"text":"Be brief."}]`) ||
		!strings.Contains(string(last.Body), `"maxTokens":200`) {
		t.Fatalf("the provider's request: %v %s %s", ok, last.Path, last.Body)
	}
	g.Primary.SetBehavior(mockupstream.Behavior{Identity: "primary", ToolUse: mockupstream.ToolUseFirst})
	for _, stream := range []bool{false, true} {
		responsesCase(t, g, "claude-br", "br", stream, true, "success/200/(br)", "unused/0/(backup)")
	}
	if n := g.Backup.Stats().Requests; n != 0 {
		t.Fatalf("the backup got %d requests", n)
	}
}
