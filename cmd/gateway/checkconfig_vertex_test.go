package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// TestCheckConfigVertex: check-config shows a vertex provider's format,
// auth, service account and token URI, never its private key; a missing
// key file fails naming credentials_file.
func TestCheckConfigVertex(t *testing.T) {
	dir := t.TempDir()
	key, _, err := mockupstream.New(mockupstream.Behavior{}).VertexServiceAccount("https://oauth2.example/token", nil)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		PrivateKey string `json:"private_key"`
	}
	if err := json.Unmarshal(key, &f); err != nil {
		t.Fatal(err)
	}
	creds := filepath.Join(dir, "sa.json")
	if err := os.WriteFile(creds, key, 0o600); err != nil {
		t.Fatal(err)
	}
	src := `providers:
  - name: vx
    format: vertex
    vertex: { project: my-proj, location: europe-west4 }
    credentials_file: CREDS
    max_concurrency: 2
models:
  - name: m
    candidates: [{ provider: vx, model: gemini-2.5-flash }]
`
	p := filepath.Join(dir, "routes.yaml")
	if err := os.WriteFile(p, []byte(strings.Replace(src, "CREDS", creds, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"check-config", p}, &out, &errb); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	for _, want := range []string{
		"provider vx: https://europe-west4-aiplatform.googleapis.com keys=1",
		"  url: https://europe-west4-aiplatform.googleapis.com/v1/projects/my-proj/locations/europe-west4/publishers/google/models\n",
		"  format: vertex auth: google_service_account service_account=gateway@mock-project.iam.gserviceaccount.com token_uri=https://oauth2.example/token\n",
		"0. vx/sa-",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("%q not in:\n%s", want, out.String())
		}
	}
	for _, l := range strings.Split(f.PrivateKey, "\n")[1:3] {
		if strings.Contains(out.String()+errb.String(), l) {
			t.Fatal("check-config printed the private key")
		}
	}
	if err := os.WriteFile(p, []byte(strings.Replace(src, "CREDS", filepath.Join(dir, "gone.json"), 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errb.Reset()
	if code := run([]string{"check-config", p}, &out, &errb); code == 0 || !strings.Contains(errb.String(), "providers[0].credentials_file") {
		t.Fatalf("a missing key file: exit %d, stderr %q", code, errb.String())
	}
}
