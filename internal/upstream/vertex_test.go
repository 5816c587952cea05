package upstream

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/llmgw/gateway/internal/mockupstream"
)

// fakeTokens is a TokenSource that counts its calls and fails with err.
type fakeTokens struct {
	calls   atomic.Int32
	tok     string
	err     error
	refused atomic.Value
}

func (f *fakeTokens) Token(ctx context.Context) (string, error) {
	f.calls.Add(1)
	return f.tok, f.err
}

func (f *fakeTokens) Refused(tok string) { f.refused.Store(tok) }

// TestVertexBuildURLs: the project's model path under base_url's host (a
// prefix kept), Gemini's methods, no embeddings, and Responses through
// the chat form.
func TestVertexBuildURLs(t *testing.T) {
	base := VertexBase("https://proxy.example/vx/", "my-proj", "europe-west4")
	ep, err := NewEndpoint(FormatVertex, base, nil, Auth{Style: AuthGoogle}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if ep.Serves(RouteEmbeddings) || !ep.Serves(RouteResponses) || !ep.Serves(RouteChat) || !ep.Serves(RouteMessages) {
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
	var unauthorized atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		got.Store(r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		if unauthorized.Load() {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":{"code":401,"message":"bad token","status":"UNAUTHENTICATED"}}`))
			return
		}
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
	if ok.refused.Load() != nil {
		t.Fatal("a 429 refused the token")
	}
	unauthorized.Store(true)
	if err := send(ok); !errors.As(err, &se) || se.Code != http.StatusUnauthorized || ok.refused.Load() != "ya29.token" {
		t.Fatalf("a 401: %v, refused %v", err, ok.refused.Load())
	}
}

// TestGoogleTokensCacheAndRefusal: against the mock's token endpoint, a
// token is fetched once and reused; the provider's refusal of it makes the
// next call fetch a new one, and a refusal of an older token changes
// nothing.
func TestGoogleTokensCacheAndRefusal(t *testing.T) {
	m := mockupstream.New(mockupstream.Behavior{})
	srv := httptest.NewServer(m)
	defer srv.Close()
	key, _, err := m.VertexServiceAccount(srv.URL+mockupstream.PathToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := NewGoogleTokens(key, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first, err := ts.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := ts.Token(ctx); again != first || m.TokenCalls() != 1 {
		t.Fatalf("not cached: %q then %q, %d calls", first, again, m.TokenCalls())
	}
	ts.Refused(first)
	second, err := ts.Token(ctx)
	if err != nil || second == first || m.TokenCalls() != 2 {
		t.Fatalf("after a refusal: %q (%v), %d calls", second, err, m.TokenCalls())
	}
	ts.Refused(first) // late: another attempt's refusal of the old token
	if third, _ := ts.Token(ctx); third != second || m.TokenCalls() != 2 {
		t.Fatalf("a stale refusal replaced the token: %q, %d calls", third, m.TokenCalls())
	}
	m.SetBehavior(mockupstream.Behavior{TokenStatus: http.StatusServiceUnavailable})
	ts.Refused(second)
	if _, err := ts.Token(ctx); err == nil {
		t.Fatal("a token endpoint answering 503 gave a token")
	}
	if _, err := ts.Token(canceled()); err == nil {
		t.Fatal("an ended context got a token")
	}
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// TestGoogleTokensNeedsAServiceAccount: a key the library cannot read is
// refused when the source is made, not at the first request.
func TestGoogleTokensNeedsAServiceAccount(t *testing.T) {
	if _, err := NewGoogleTokens([]byte(`{"type":"authorized_user"}`), 0); err == nil {
		t.Fatal("an authorized_user file made a token source")
	}
}
