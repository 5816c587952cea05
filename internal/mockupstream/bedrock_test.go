package mockupstream

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// signedConverse posts body to path, signed by aws-sdk-go-v2's signer
// with creds.
func signedConverse(t *testing.T, url string, creds aws.Credentials, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	sum := sha256.Sum256([]byte(body))
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]), "bedrock", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestBedrockSignedConverse: requests signed by the AWS SDK's own signer
// with the credentials EnableBedrock set are answered (Converse's body;
// ConverseStream's frames, which the SDK's decoder reads with their CRCs);
// a wrong secret, a missing signature or a missing session token is
// refused 403 with AWS's exception type; injected statuses carry theirs.
func TestBedrockSignedConverse(t *testing.T) {
	s, ts := start(t, Behavior{Chunks: 2})
	s.EnableBedrock("us-east-1", "AKIDMOCK", "mock-secret", "mock-token")
	good := aws.Credentials{AccessKeyID: "AKIDMOCK", SecretAccessKey: "mock-secret", SessionToken: "mock-token"}
	const body = `{"messages":[{"role":"user","content":[{"text":"hi"}]}]}`
	path := ts.URL + "/model/anthropic.claude-v2%3A1/converse"

	resp := signedConverse(t, path, good, body)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"text":"Hello from mock chunk 1 2"`) || !strings.Contains(string(b), `"stopReason":"end_turn"`) {
		t.Fatalf("converse: %d %s", resp.StatusCode, b)
	}

	resp = signedConverse(t, path+"-stream", good, body)
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "application/vnd.amazon.eventstream" {
		t.Fatalf("stream: %d %s", resp.StatusCode, ct)
	}
	var types []string
	dec := eventstream.NewDecoder()
	for {
		m, err := dec.Decode(resp.Body, nil)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, m.Headers.Get(":event-type").String())
	}
	resp.Body.Close()
	if got := strings.Join(types, ","); got != "messageStart,contentBlockDelta,contentBlockDelta,contentBlockStop,messageStop,metadata" {
		t.Fatalf("frames %s", got)
	}

	for _, tc := range []struct {
		name  string
		creds aws.Credentials
		typ   string
	}{
		{"wrong secret", aws.Credentials{AccessKeyID: "AKIDMOCK", SecretAccessKey: "other", SessionToken: "mock-token"}, "InvalidSignatureException"},
		{"other key", aws.Credentials{AccessKeyID: "AKIDOTHER", SecretAccessKey: "mock-secret", SessionToken: "mock-token"}, "UnrecognizedClientException"},
		{"no session token", aws.Credentials{AccessKeyID: "AKIDMOCK", SecretAccessKey: "mock-secret"}, "UnrecognizedClientException"},
	} {
		resp := signedConverse(t, path, tc.creds, body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.HasPrefix(resp.Header.Get("X-Amzn-Errortype"), tc.typ) {
			t.Errorf("%s: %d %s", tc.name, resp.StatusCode, resp.Header.Get("X-Amzn-Errortype"))
		}
	}
	resp, err := http.Post(path, "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.HasPrefix(resp.Header.Get("X-Amzn-Errortype"), "MissingAuthenticationTokenException") {
		t.Errorf("unsigned: %d %s", resp.StatusCode, resp.Header.Get("X-Amzn-Errortype"))
	}

	// An ARN's '/' travels escaped: the mock finds the operation, and the
	// signature (computed over the escaped path) still agrees.
	arn := ts.URL + "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fus.amazon.nova-lite-v1%3A0/converse"
	resp = signedConverse(t, arn, good, body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("ARN: %d %s", resp.StatusCode, resp.Header.Get("X-Amzn-Errortype"))
	}

	s.SetBehavior(Behavior{Status: http.StatusTooManyRequests})
	resp = signedConverse(t, path, good, body)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 429 || !strings.HasPrefix(resp.Header.Get("X-Amzn-Errortype"), "ThrottlingException:") || !strings.Contains(string(b), `"message":`) {
		t.Errorf("429: %d %v %s", resp.StatusCode, resp.Header, b)
	}
}
