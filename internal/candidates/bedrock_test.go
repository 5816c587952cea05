package candidates

import (
	"strings"
	"testing"

	"github.com/llmgw/gateway/internal/upstream"
)

// TestBedrockProviderPlan: a bedrock provider resolves to its runtime
// host's model collection, one AWS target whose id never derives from the
// secret key, chat and messages served (no embeddings, no Responses), a
// signer for its region, and the bedrock price table.
func TestBedrockProviderPlan(t *testing.T) {
	p := mustPlanner(t, `
providers:
  - name: br
    format: bedrock
    bedrock: { region: us-west-2 }
    aws: { access_key_id: AKIAEXAMPLE, secret_access_key: SECRET-SENTINEL }
    max_concurrency: 1
models:
  - name: claude
    candidates:
      - { provider: br, model: "anthropic.claude-3-5-haiku-20241022-v1:0" }
`, 1)
	br := p.Providers()[0]
	ep := br.Endpoint
	const models = "https://bedrock-runtime.us-west-2.amazonaws.com/model"
	if ep.URLs[upstream.RouteChat] != models || ep.URLs[upstream.RouteMessages] != models || ep.URLs[upstream.RouteResponses] != models || ep.Serves(upstream.RouteEmbeddings) {
		t.Fatalf("urls %q", ep.URLs)
	}
	if ep.Auth.Style != upstream.AuthAWS || ep.Auth.AWS == nil || ep.Auth.AWS.Region != "us-west-2" {
		t.Fatalf("auth %+v", ep.Auth)
	}
	if len(br.Targets) != 1 || !strings.HasPrefix(br.Targets[0].KeyID, "aws-") || strings.Contains(br.Targets[0].Key.Reveal(), "SECRET") {
		t.Fatalf("targets %+v", br.Targets)
	}
	if _, _, err := p.PlanRoute("claude", upstream.RouteEmbeddings); err == nil {
		t.Fatal("embeddings planned on a bedrock provider")
	}
	if vendorOf(upstream.FormatBedrock) != "bedrock" {
		t.Fatal("bedrock is not priced from the bedrock table")
	}
}
