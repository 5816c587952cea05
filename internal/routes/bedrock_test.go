package routes

import (
	"fmt"
	"strings"
	"testing"
)

const bedrockSrc = `
providers:
  - name: br
    format: bedrock
    bedrock: { region: REGION }
%s    max_concurrency: 4
models:
  - name: claude
    candidates:
      - { provider: br, model: "anthropic.claude-3-5-haiku-20241022-v1:0" }
`

func bedrockYAML(region, extra string) []byte {
	return []byte(strings.Replace(fmt.Sprintf(bedrockSrc, extra), "REGION", region, 1))
}

// TestParseBedrockProvider: format bedrock needs no api_keys and no
// base_url (the region's runtime host), defaults to auth aws_sigv4, takes
// its credentials from aws: with ${VAR}s, or none (the standard chain).
func TestParseBedrockProvider(t *testing.T) {
	r, err := Parse(bedrockYAML("us-east-1", ""), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	p := r.Providers[0]
	if p.Auth.Style != AuthAWSSigV4 || p.BaseURL != "https://bedrock-runtime.us-east-1.amazonaws.com" || !p.AWS.AccessKeyID.Empty() {
		t.Fatalf("bedrock defaults: auth %+v base_url %q aws %v", p.Auth, p.BaseURL, p.AWS)
	}
	aws := "    aws: { access_key_id: \"${K}\", secret_access_key: \"${S}\", session_token: \"${T}\" }\n    base_url: http://127.0.0.1:9\n"
	r, err = Parse(bedrockYAML(`"${REGION}"`, aws), env(map[string]string{"REGION": "eu-central-2", "K": "AKIAX", "S": "sek", "T": "tok"}))
	if err != nil {
		t.Fatal(err)
	}
	p = r.Providers[0]
	if p.Bedrock.Region != "eu-central-2" || p.BaseURL != "http://127.0.0.1:9" || p.AWS.AccessKeyID.Reveal() != "AKIAX" ||
		p.AWS.SecretAccessKey.Reveal() != "sek" || p.AWS.SessionToken.Reveal() != "tok" {
		t.Fatalf("from the environment: %+v", p)
	}
	if s := fmt.Sprintf("%v %+v", p.AWS, p.AWS); strings.Contains(s, "sek") || strings.Contains(s, "tok") {
		t.Fatalf("the credentials print: %s", s)
	}
}

// TestParseBedrockErrors: each misconfiguration names its field.
func TestParseBedrockErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		src   []byte
		vars  map[string]string
		wants string
	}{
		{"no region", bedrockYAML(`""`, ""), nil, "providers[0].bedrock.region is required for format bedrock"},
		{"bad region", bedrockYAML("US_EAST", ""), nil, `providers[0].bedrock.region: "US_EAST" is not an AWS region`},
		{"unset key id", bedrockYAML("us-east-1", "    aws: { access_key_id: \"${K}\", secret_access_key: x }\n"), nil,
			"providers[0].aws.access_key_id is empty (it comes from ${K}, which is not set)"},
		{"no secret", bedrockYAML("us-east-1", "    aws: { access_key_id: AKIAX }\n"), nil, "providers[0].aws.secret_access_key is required with access_key_id"},
		{"secret alone", bedrockYAML("us-east-1", "    aws: { secret_access_key: x }\n"), nil, "providers[0].aws.access_key_id is required"},
		{"api keys", bedrockYAML("us-east-1", "    api_keys: [k]\n"), nil, "providers[0].api_keys: auth aws_sigv4 sends no key"},
		{"other auth", bedrockYAML("us-east-1", "    auth: bearer\n"), nil, "providers[0].auth: format bedrock takes auth aws_sigv4"},
		{"x-amz header", bedrockYAML("us-east-1", "    forward_headers: [X-Amz-Security-Token]\n"), nil,
			`providers[0].forward_headers[0]: "X-Amz-Security-Token" is never forwarded to format bedrock`},
		{"unknown aws field", bedrockYAML("us-east-1", "    aws: { secret_key: x }\n"), nil, `providers[0].aws: unknown field "secret_key"`},
		{"bedrock on openai", []byte(`
providers:
  - { name: oa, base_url: "http://x/v1", api_keys: [k], max_concurrency: 1, bedrock: { region: us-east-1 } }
models:
  - { name: m, candidates: [{ provider: oa }] }
`), nil, "providers[0].bedrock applies only to format bedrock"},
		{"sigv4 on openai", []byte(`
providers:
  - { name: oa, base_url: "http://x/v1", auth: aws_sigv4, max_concurrency: 1 }
models:
  - { name: m, candidates: [{ provider: oa }] }
`), nil, "providers[0].auth: aws_sigv4 applies only to format bedrock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.src, env(tc.vars))
			if err == nil || !strings.Contains(err.Error(), tc.wants) {
				t.Fatalf("got %v, want %q", err, tc.wants)
			}
			if strings.Contains(fmt.Sprint(err), "sek") {
				t.Fatalf("the error shows a secret: %v", err)
			}
		})
	}
}
