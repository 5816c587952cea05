package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// eventFrame encodes one event frame with aws-sdk-go-v2's encoder, as
// Bedrock writes them.
func eventFrame(t testing.TB, eventType string, payload []byte) []byte {
	var h eventstream.Headers
	h.Set(":message-type", eventstream.StringValue("event"))
	h.Set(":event-type", eventstream.StringValue(eventType))
	h.Set(":content-type", eventstream.StringValue("application/json"))
	var buf bytes.Buffer
	if err := eventstream.NewEncoder().Encode(&buf, eventstream.Message{Headers: h, Payload: payload}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func exceptionFrame(t testing.TB, typ, msg string) []byte {
	var h eventstream.Headers
	h.Set(":message-type", eventstream.StringValue("exception"))
	h.Set(":exception-type", eventstream.StringValue(typ))
	p, _ := json.Marshal(map[string]string{"message": msg})
	var buf bytes.Buffer
	if err := eventstream.NewEncoder().Encode(&buf, eventstream.Message{Headers: h, Payload: p}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// fixtureFrames is a stream fixture of package bedrock as the frames of
// one ConverseStream body.
func fixtureFrames(t testing.TB, name string) []byte {
	b, err := os.ReadFile("bedrock/testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var e struct {
			Event string          `json:"event"`
			Data  json.RawMessage `json:"data"`
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			t.Fatalf("%s: %s", name, sc.Text())
		}
		out = append(out, eventFrame(t, e.Event, e.Data)...)
	}
	return out
}

// readBedrock reads a ConverseStream body as the attempt loop does (the
// one event reader over the frames, the bedrock reader over the events)
// and returns what the client would get.
func readBedrock(body io.Reader, route Route, includeUsage bool) ([]byte, error) {
	r := &ChatRequest{Route: route, Model: "claude", IncludeUsage: includeUsage}
	rd := r.bedrockReader()
	ev := NewEventReader(newFrameBody(io.NopCloser(body)))
	defer ev.Close()
	var out []byte
	for !rd.Done() {
		e, comment, err := ev.Next()
		if err == io.EOF {
			return rd.End(out)
		}
		if err != nil {
			return out, err
		}
		if comment {
			continue
		}
		if out, err = rd.Event(out, e, false); err != nil {
			return out, err
		}
	}
	return out, nil
}

var volatile = regexp.MustCompile(`"(id|created)":("[^"]*"|\d+)|"msg_[0-9a-zA-Z_]+"`)

// TestBedrockFramesSplitAtEveryByte: the fixtures' streams, as frames,
// give the client the same chunks however the body's reads are cut (at
// every byte boundary for chat, and one byte at a time for chat and
// Anthropic clients).
func TestBedrockFramesSplitAtEveryByte(t *testing.T) {
	for _, name := range []string{"stream_text.jsonl", "stream_tool.jsonl", "stream_guardrail.jsonl"} {
		body := fixtureFrames(t, name)
		for _, route := range []Route{RouteChat, RouteMessages} {
			whole, err := readBedrock(bytes.NewReader(body), route, true)
			if err != nil || !bytes.Contains(whole, []byte("[DONE]")) && !bytes.Contains(whole, []byte("message_stop")) {
				t.Fatalf("%s %s: %v\n%s", name, route, err, whole)
			}
			want := volatile.ReplaceAllString(string(whole), "")
			for i := 0; i <= len(body) && route == RouteChat; i++ {
				// Every split for chat; the Anthropic reader reads the same
				// events, one byte at a time below.
				got, err := readBedrock(io.MultiReader(bytes.NewReader(body[:i]), bytes.NewReader(body[i:])), route, true)
				if err != nil || volatile.ReplaceAllString(string(got), "") != want {
					t.Fatalf("%s %s split at %d: %v\n got %s\nwant %s", name, route, i, err, got, whole)
				}
			}
			got, err := readBedrock(iotest.OneByteReader(bytes.NewReader(body)), route, true)
			if err != nil || volatile.ReplaceAllString(string(got), "") != want {
				t.Fatalf("%s %s one byte at a time: %v", name, route, err)
			}
		}
	}
}

// TestBedrockBadFrames: a frame whose CRC is wrong, a body cut inside a
// frame, or one cut before messageStop is never read as a clean end; an
// exception frame is an error event (the loop fails over before the
// commit point).
func TestBedrockBadFrames(t *testing.T) {
	body := fixtureFrames(t, "stream_text.jsonl")
	bad := bytes.Clone(body)
	bad[len(bad)-1] ^= 1
	if _, err := readBedrock(bytes.NewReader(bad), RouteChat, false); !errors.Is(err, ErrBadFrame) {
		t.Errorf("bad CRC: got %v", err)
	}
	if _, err := readBedrock(bytes.NewReader(body[:len(body)-3]), RouteChat, false); err == nil {
		t.Error("cut inside a frame: no error")
	}
	first := eventFrame(t, "messageStart", []byte(`{"role":"assistant"}`))
	delta := eventFrame(t, "contentBlockDelta", []byte(`{"contentBlockIndex":0,"delta":{"text":"hi"}}`))
	if _, err := readBedrock(bytes.NewReader(append(first, delta...)), RouteChat, false); !errors.Is(err, ErrEndedEarly) {
		t.Errorf("cut before messageStop: got %v", err)
	}
	exc := append(bytes.Clone(first), exceptionFrame(t, "modelStreamErrorException", "model broke")...)
	out, err := readBedrock(bytes.NewReader(exc), RouteChat, false)
	var ee *EventError
	if !errors.As(err, &ee) || !strings.Contains(ee.Data, "ModelStreamErrorException") || len(out) != 0 {
		t.Errorf("exception: got %v, out %q", err, out)
	}
	notJSON := eventFrame(t, "contentBlockDelta", []byte(`{not json`))
	if _, err := readBedrock(bytes.NewReader(notJSON), RouteChat, false); !errors.Is(err, ErrBadFrame) {
		t.Errorf("payload not JSON: got %v", err)
	}
}

// TestBedrockSend: the request is signed (SigV4, service bedrock, the
// session token sent) after every header, the Idempotency-Key marker
// left unsigned; AWS's error types set what the classification reads; a
// credentials failure is a *TokenError, with nothing sent.
func TestBedrockSend(t *testing.T) {
	var status int
	var typ, body string
	var auth http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Clone()
		if r.URL.EscapedPath() != "/model/anthropic.claude-v2%3A1/converse" {
			t.Errorf("path %s", r.URL.EscapedPath())
		}
		w.Header().Set("X-Amzn-Errortype", typ)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	defer srv.Close()
	ep, err := NewEndpoint(FormatBedrock, srv.URL, nil, Auth{Style: AuthAWS, AWS: NewAWSSigner("eu-west-1", "AKIDEXAMPLE", "SECRET-SENTINEL", "TOKEN-SENTINEL")}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	c := NewClient(ClientOptions{Provider: "br"})
	defer c.CloseIdle()
	send := func(code int, tp, b string) error {
		t.Helper()
		status, typ, body = code, tp, b
		r, _ := ParseRequest(RouteChat, []byte(`{"model":"x","messages":[{"role":"user","content":"hi"}]}`))
		call := Call{Auth: ep.Auth}
		if err := r.Build(ep, "anthropic.claude-v2:1", &call); err != nil {
			t.Fatal(err)
		}
		resp, err := c.Send(context.Background(), &call)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := send(200, "", `{"output":{"message":{"role":"assistant","content":[{"text":"hi"}]}},"stopReason":"end_turn"}`); err != nil {
		t.Fatal(err)
	}
	a := auth.Get("Authorization")
	if !strings.HasPrefix(a, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/") || !strings.Contains(a, "/eu-west-1/bedrock/aws4_request") ||
		strings.Contains(a, "idempotency-key") || !strings.Contains(a, "content-type") || auth.Get("X-Amz-Security-Token") != "TOKEN-SENTINEL" ||
		strings.Contains(a, "SECRET-SENTINEL") {
		t.Errorf("signature: %v", auth)
	}
	for _, tc := range []struct {
		code                           int
		typ, body                      string
		keyWide, keyFault, model, long bool
		clientFault                    bool
	}{
		{429, "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/", `{"message":"slow down"}`, true, false, false, false, false},
		{429, "ModelNotReadyException", `{"message":"warming"}`, false, false, false, false, false},
		{424, "ModelStreamErrorException", `{"message":"broke"}`, false, false, true, false, false},
		{400, "ValidationException", `{"message":"Input is too long for requested model."}`, false, false, false, true, true},
		{400, "ValidationException", `{"message":"bad"}`, false, false, false, false, true},
		{400, "", `{"__type":"com.amazon.coral.service#IncompleteSignatureException","message":"sig"}`, false, true, false, false, false},
	} {
		var se *StatusError
		if err := send(tc.code, tc.typ, tc.body); !errors.As(err, &se) {
			t.Fatalf("%d %s: %v", tc.code, tc.typ, err)
		}
		if se.KeyWide != tc.keyWide || se.KeyFault != tc.keyFault || se.ModelFault != tc.model || se.ContextLength() != tc.long || se.ClientFault() != tc.clientFault {
			t.Errorf("%d %s %s: %+v", tc.code, tc.typ, tc.body, se)
		}
	}

	hits := 0
	srv.Config.Handler = http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits++ })
	broken := NewAWSSigner("eu-west-1", "", "", "")
	broken.load = func(context.Context) (aws.CredentialsProvider, error) {
		return nil, errors.New("no credentials in the chain")
	}
	ep.Auth.AWS = broken
	var te *TokenError
	if err := send(200, "", "{}"); !errors.As(err, &te) || hits != 0 {
		t.Fatalf("no credentials: got %v, %d requests sent", err, hits)
	}
}

// TestAWSSignerChain: without static keys the standard chain is used (the
// environment's keys here, with the shared files pointed away); a chain
// that finds nothing is an error for the attempt (a TokenError in Send).
func TestAWSSignerChain(t *testing.T) {
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", "")
	t.Setenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "")
	t.Setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	t.Setenv("AWS_SESSION_TOKEN", "")
	s := NewAWSSigner("us-east-2", "", "", "")
	if s.Static {
		t.Fatal("no keys, yet static")
	}
	req := func() *http.Request {
		r, _ := http.NewRequest(http.MethodPost, "https://bedrock-runtime.us-east-2.amazonaws.com/model/m/converse", nil)
		return r
	}
	if _, err := s.Sign(context.Background(), req(), nil); err == nil {
		t.Fatal("an empty chain signed")
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIACHAINEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "chain-secret")
	// The chain reads the environment when it loads (a routes load builds
	// a new signer): a new one sees the keys.
	s = NewAWSSigner("us-east-2", "", "", "")
	r := req()
	if _, err := s.Sign(context.Background(), r, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if a := r.Header.Get("Authorization"); !strings.HasPrefix(a, "AWS4-HMAC-SHA256 Credential=AKIACHAINEXAMPLE/") || !strings.Contains(a, "/us-east-2/bedrock/") {
		t.Fatalf("Authorization %q", a)
	}
}

// TestBedrockErrorBodyRedacted: a 403 that quotes the canonical request
// (as AWS's signature errors do, the session token in it) is kept without
// the credentials signed with, whether they came from the routes file or
// from the chain, which the gateway's redactor does not know.
func TestBedrockErrorBodyRedacted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Amzn-Errortype", "InvalidSignatureException")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, `{"message":"The request signature we calculated does not match. The Canonical String for this request should have been 'POST\n/model/m/converse\n\nx-amz-security-token:`+
			r.Header.Get("X-Amz-Security-Token")+`\n' and the key `+strings.TrimPrefix(strings.Fields(r.Header.Get("Authorization"))[1], "Credential=")+`"}`)
	}))
	defer srv.Close()
	signer := NewAWSSigner("us-east-1", "AKIAREDACTME0001", "secret-REDACT-0001", "token-SENTINEL-REDACT-0001")
	ep, err := NewEndpoint(FormatBedrock, srv.URL, nil, Auth{Style: AuthAWS, AWS: signer}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	c := NewClient(ClientOptions{Provider: "br"})
	defer c.CloseIdle()
	r, _ := ParseRequest(RouteChat, []byte(`{"model":"x","messages":[{"role":"user","content":"hi"}]}`))
	call := Call{Auth: ep.Auth}
	if err := r.Build(ep, "m", &call); err != nil {
		t.Fatal(err)
	}
	_, err = c.Send(context.Background(), &call)
	var se *StatusError
	if !errors.As(err, &se) || se.Code != 403 {
		t.Fatalf("got %v", err)
	}
	if b := string(se.Body); strings.Contains(b, "token-SENTINEL-REDACT-0001") || strings.Contains(b, "AKIAREDACTME0001") || !strings.Contains(b, "REDACTED") {
		t.Fatalf("body %s", b)
	}
}
