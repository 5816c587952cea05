package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckConfigBedrock: check-config shows a bedrock provider's runtime
// host, format, auth, region and whether its credentials are the routes
// file's or the AWS chain's, never the keys; a missing region fails
// naming the field.
func TestCheckConfigBedrock(t *testing.T) {
	dir := t.TempDir()
	src := `providers:
  - name: br
    format: bedrock
    bedrock: { region: REGION }
    aws: { access_key_id: AKIACHECKCONFIG, secret_access_key: SECRET-SENTINEL-cc }
    max_concurrency: 2
  - name: chain
    format: bedrock
    bedrock: { region: eu-west-3 }
    max_concurrency: 2
models:
  - name: m
    candidates: [{ provider: br, model: "amazon.nova-lite-v1:0" }, { provider: chain, model: "amazon.nova-lite-v1:0" }]
`
	p := filepath.Join(dir, "routes.yaml")
	if err := os.WriteFile(p, []byte(strings.Replace(src, "REGION", "us-east-1", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"check-config", p}, &out, &errb); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	for _, want := range []string{
		"provider br: https://bedrock-runtime.us-east-1.amazonaws.com keys=1",
		"  format: bedrock auth: aws_sigv4 region=us-east-1 credentials=static\n",
		"  format: bedrock auth: aws_sigv4 region=eu-west-3 credentials=chain\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("%q not in:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String()+errb.String(), "SECRET-SENTINEL") {
		t.Fatal("check-config printed the secret key")
	}
	if err := os.WriteFile(p, []byte(strings.Replace(src, "REGION", `""`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errb.Reset()
	if code := run([]string{"check-config", p}, &out, &errb); code == 0 || !strings.Contains(errb.String(), "providers[0].bedrock.region is required") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}
