package routes

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeServiceAccount writes a service-account key with a fresh RSA key
// and returns its path.
func writeServiceAccount(t *testing.T, dir string) string {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "proj", "client_email": "gw@proj.iam.gserviceaccount.com",
		"private_key":    string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"token_uri":      "https://oauth2.googleapis.com/token",
		"private_key_id": "abc",
	})
	p := filepath.Join(dir, "sa.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const vertexSrc = `
providers:
  - name: vx
    format: vertex
    vertex: { project: my-proj, location: europe-west4 }
    credentials_file: CREDS
    max_concurrency: 4
models:
  - name: flash
    candidates:
      - { provider: vx, model: gemini-2.5-flash }
`

// TestParseVertexProvider: format vertex needs no api_keys and no base_url
// (the location's host), defaults to auth google_service_account, and
// reads its key file at load.
func TestParseVertexProvider(t *testing.T) {
	creds := writeServiceAccount(t, t.TempDir())
	r, err := Parse([]byte(strings.Replace(vertexSrc, "CREDS", creds, 1)), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	p := r.Providers[0]
	if p.Auth.Style != AuthGoogleServiceAccount || p.BaseURL != "https://europe-west4-aiplatform.googleapis.com" {
		t.Fatalf("vertex defaults: auth %+v base_url %q", p.Auth, p.BaseURL)
	}
	if p.Credentials == nil || p.Credentials.ClientEmail != "gw@proj.iam.gserviceaccount.com" ||
		!strings.Contains(p.Credentials.PrivateKey, "PRIVATE KEY") || len(p.Credentials.JSON) == 0 {
		t.Fatalf("credentials not read: %+v", p.Credentials)
	}
	global := strings.Replace(strings.Replace(vertexSrc, "europe-west4", `"${VX_LOCATION}"`, 1), "CREDS", "${VX_CREDS}", 1)
	r, err = Parse([]byte(global), env(map[string]string{"VX_LOCATION": "global", "VX_CREDS": creds}))
	if err != nil || r.Providers[0].BaseURL != "https://aiplatform.googleapis.com" || r.Providers[0].Credentials == nil {
		t.Fatalf("the global location from ${VX_LOCATION}, the key from ${VX_CREDS}: %v %+v", err, r)
	}
	if _, err := Parse([]byte(global), env(map[string]string{"VX_LOCATION": "global"})); err == nil ||
		!strings.Contains(err.Error(), "providers[0].credentials_file is required") || !strings.Contains(err.Error(), "${VX_CREDS}, which is not set") {
		t.Fatalf("an unset ${VX_CREDS}: %v", err)
	}
	withBase := strings.Replace(vertexSrc, "    max_concurrency: 4\n", "    max_concurrency: 4\n    base_url: http://127.0.0.1:9/prefix\n", 1)
	r, err = Parse([]byte(strings.Replace(withBase, "CREDS", creds, 1)), env(nil))
	if err != nil || r.Providers[0].BaseURL != "http://127.0.0.1:9/prefix" {
		t.Fatalf("base_url override: %v %+v", err, r)
	}
}

// TestParseVertexErrors: each mistake names its field path.
func TestParseVertexErrors(t *testing.T) {
	dir := t.TempDir()
	creds := writeServiceAccount(t, dir)
	notJSON := filepath.Join(dir, "bad.json")
	noKey := filepath.Join(dir, "nokey.json")
	badKey := filepath.Join(dir, "badkey.json")
	os.WriteFile(notJSON, []byte("{nope"), 0o600)
	os.WriteFile(noKey, []byte(`{"type":"service_account","client_email":"a@b"}`), 0o600)
	os.WriteFile(badKey, []byte(`{"type":"service_account","client_email":"a@b","private_key":"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"}`), 0o600)
	src := strings.Replace(vertexSrc, "CREDS", creds, 1)
	for _, c := range []struct{ name, src, path, want string }{
		{"no project", strings.Replace(src, "project: my-proj, ", "", 1), "providers[0].vertex.project", "required"},
		{"no location", strings.Replace(src, ", location: europe-west4", "", 1), "providers[0].vertex.location", "required"},
		{"bad location", strings.Replace(src, "europe-west4", "eu/../x", 1), "providers[0].vertex.location", "not a Google Cloud location"},
		{"no credentials", strings.Replace(src, "    credentials_file: "+creds+"\n", "", 1), "providers[0].credentials_file", "required"},
		{"missing file", strings.Replace(vertexSrc, "CREDS", filepath.Join(dir, "gone.json"), 1), "providers[0].credentials_file", "no such file"},
		{"not json", strings.Replace(vertexSrc, "CREDS", notJSON, 1), "providers[0].credentials_file", "not JSON"},
		{"no private key", strings.Replace(vertexSrc, "CREDS", noKey, 1), "providers[0].credentials_file", "no private_key"},
		{"broken private key", strings.Replace(vertexSrc, "CREDS", badKey, 1), "providers[0].credentials_file", "not an RSA private key"},
		{"api keys", strings.Replace(src, "    max_concurrency: 4\n", "    max_concurrency: 4\n    api_keys: [k1]\n", 1), "providers[0].api_keys", "sends no key"},
		{"other auth", strings.Replace(src, "    max_concurrency: 4\n", "    max_concurrency: 4\n    auth: bearer\n", 1), "providers[0].auth", "google_service_account"},
		{"vertex on openai", strings.Replace(strings.Replace(src, "format: vertex", "format: openai\n    base_url: https://api.example/v1", 1), "    credentials_file: "+creds+"\n", "    api_keys: [k1]\n", 1), "providers[0].vertex", "only to format vertex"},
	} {
		_, err := Parse([]byte(c.src), env(nil))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Path != c.path || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %s: ...%s", c.name, err, c.path, c.want)
		}
	}
}
