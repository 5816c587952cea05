package upstream

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// fakeTokens is a TokenSource that counts its calls and fails with err.
type fakeTokens struct {
	calls atomic.Int32
	tok   string
	err   error
}

func (f *fakeTokens) Token(ctx context.Context) (string, error) {
	f.calls.Add(1)
	return f.tok, f.err
}

// TestVertexBuildURLs: the project's model path under base_url's host (a
// prefix kept), Gemini's methods, and no embeddings or Responses.
func TestVertexBuildURLs(t *testing.T) {
	base := VertexBase("https://proxy.example/vx/", "my-proj", "europe-west4")
	ep, err := NewEndpoint(FormatVertex, base, nil, Auth{Style: AuthGoogle}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if ep.Serves(RouteEmbeddings) || ep.Serves(RouteResponses) || !ep.Serves(RouteChat) || !ep.Serves(RouteMessages) {
		t.Fatalf("serves %v", ep.URLs)
	}
	const prefix = "https://proxy.example/vx/v1/projects/my-proj/locations/europe-west4/publishers/google/models/gemini-2.5-flash:"
	for body, want := range map[string]string{
		`{"model":"g","messages":[{"role":"user","content":"hi"}]}`:               prefix + "generateContent",
		`{"model":"g","stream":true,"messages":[{"role":"user","content":"hi"}]}`: prefix + "streamGenerateContent?alt=sse",
	} {
		r, err := ParseRequest(RouteChat, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		var call Call
		if err := r.Build(ep, "gemini-2.5-flash", &call); err != nil {
			t.Fatal(err)
		}
		if call.URL != want || !call.gemini || !ep.Translates(RouteChat) {
			t.Errorf("URL %s (gemini %v), want %s", call.URL, call.gemini, want)
		}
	}
}

// TestVertexSendToken: every attempt asks the token source and sends its
// token as a bearer; a source that fails is a *TokenError and nothing is
// sent; a Google error body is classified as gemini's.
func TestVertexSendToken(t *testing.T) {
	var got atomic.Value
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		got.Store(r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		w.Write([]byte(`{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED"}}`))
	}))
	defer srv.Close()
	ep, err := NewEndpoint(FormatVertex, VertexBase(srv.URL, "p", "l"), nil, Auth{Style: AuthGoogle}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	c := NewClient(ClientOptions{Provider: "vx"})
	defer c.CloseIdle()
	r, _ := ParseRequest(RouteChat, []byte(`{"model":"g","messages":[{"role":"user","content":"hi"}]}`))
	send := func(ts TokenSource) error {
		call := Call{Auth: Auth{Style: AuthGoogle, Tokens: ts}}
		if err := r.Build(ep, "m", &call); err != nil {
			t.Fatal(err)
		}
		_, err := c.Send(context.Background(), &call)
		return err
	}
	ok := &fakeTokens{tok: "ya29.token"}
	var se *StatusError
	if err := send(ok); !errors.As(err, &se) || !se.KeyWide || !se.KeyScoped() || got.Load() != "Bearer ya29.token" {
		t.Fatalf("send: %v (%+v), Authorization %v", err, se, got.Load())
	}
	down := &fakeTokens{err: errors.New("token endpoint answered 500")}
	var te *TokenError
	if err := send(down); !errors.As(err, &te) || te.Provider != "vx" || !strings.Contains(err.Error(), "access token for vx") {
		t.Fatalf("a failed token: %v", err)
	}
	if hits.Load() != 1 {
		t.Fatalf("the provider got %d calls; a failed token must send nothing", hits.Load())
	}
}

// TestGoogleTokensNeedsAServiceAccount: a key the library cannot read is
// refused when the source is made, not at the first request.
func TestGoogleTokensNeedsAServiceAccount(t *testing.T) {
	if _, err := NewGoogleTokens([]byte(`{"type":"authorized_user"}`), 0); err == nil {
		t.Fatal("an authorized_user file made a token source")
	}
}
