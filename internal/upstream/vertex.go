package upstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
)

// Format vertex is Gemini on Vertex AI: the same request, answer, stream
// and error bodies as format gemini (the endpoint is a gemini one, with
// the models collection under the project's location), and OAuth2 access
// tokens of a service account instead of an API key. Embeddings are not
// served: Vertex embeds through :predict, a body of its own.

// VertexScope is the OAuth2 scope a Vertex AI token is asked for.
const VertexScope = "https://www.googleapis.com/auth/cloud-platform"

// VertexBase is the base URL of a Vertex project's Google models: base is
// the scheme and host (https://{location}-aiplatform.googleapis.com, or a
// private endpoint or test server, with an optional path prefix).
func VertexBase(base, project, location string) string {
	return strings.TrimRight(base, "/") + "/v1/projects/" + url.PathEscape(project) +
		"/locations/" + url.PathEscape(location) + "/publishers/google"
}

// GeminiBodies reports whether a format speaks Gemini's bodies (gemini
// and vertex).
func GeminiBodies(format string) bool { return format == FormatGemini || format == FormatVertex }

// TokenSource gives the access token an attempt sends. It caches: a call
// costs a lock while its token is fresh. Refused tells it that the
// provider refused tok (401), so the next call fetches a new one rather
// than sending a revoked token until it expires.
type TokenSource interface {
	Token(ctx context.Context) (string, error)
	Refused(tok string)
}

// TokenError is a failure to get an access token (the token endpoint
// down, refusing the service account, unreachable): the provider cannot
// be called at all, so the failure is the provider's, as a refused dial
// is. Nothing was sent to the provider.
type TokenError struct {
	Provider string
	Err      error
}

func (e *TokenError) Error() string { return fmt.Sprintf("access token for %s: %v", e.Provider, e.Err) }
func (e *TokenError) Unwrap() error { return e.Err }

// tokenFetchTimeout bounds one token request: the oauth2 library does
// not take the attempt's context, so its HTTP client's timeout is what
// keeps a hung token endpoint from holding attempts (all of them wait on
// the one fetch, under ReuseTokenSource's lock).
const tokenFetchTimeout = 10 * time.Second

// googleTokens mints a service account's tokens through the oauth2
// library's JWT bearer grant, cached by its ReuseTokenSource and renewed
// shortly before they expire. ReuseTokenSource cannot forget a token, so
// Refused replaces it with a fresh one.
type googleTokens struct {
	fresh func() oauth2.TokenSource
	ts    atomic.Pointer[oauth2.TokenSource]
}

// NewGoogleTokens returns the token source of a service-account JSON key
// (read and checked when the routes loaded). It starts no goroutine and
// fetches nothing until the first attempt asks.
func NewGoogleTokens(jsonKey []byte, connectTimeout time.Duration) (TokenSource, error) {
	cfg, err := google.JWTConfigFromJSON(jsonKey, VertexScope)
	if err != nil {
		return nil, err
	}
	if connectTimeout <= 0 {
		connectTimeout = 5 * time.Second
	}
	d := &net.Dialer{Timeout: connectTimeout}
	// Its own transport: no proxy from the environment, as for provider
	// calls, and no kept-alive connection (a token is fetched about once
	// an hour, and an idle pooled one would outlive a reload).
	hc := &http.Client{Timeout: tokenFetchTimeout, Transport: &http.Transport{
		Proxy: nil, DialContext: d.DialContext, TLSHandshakeTimeout: connectTimeout, DisableKeepAlives: true,
	}}
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, hc)
	// jwt.Config.TokenSource is an oauth2.ReuseTokenSource over the
	// grant: one token in use until shortly before its expiry.
	g := &googleTokens{fresh: func() oauth2.TokenSource { return cfg.TokenSource(ctx) }}
	ts := g.fresh()
	g.ts.Store(&ts)
	return g, nil
}

func (g *googleTokens) Token(ctx context.Context) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	t, err := (*g.ts.Load()).Token()
	if err != nil {
		return "", err
	}
	if t.AccessToken == "" {
		return "", errors.New("the token endpoint answered no access_token")
	}
	return t.AccessToken, nil
}

func (g *googleTokens) Refused(tok string) {
	cur := g.ts.Load()
	if t, err := (*cur).Token(); err != nil || t.AccessToken != tok {
		return // already replaced, by another attempt's refusal
	}
	ts := g.fresh()
	g.ts.CompareAndSwap(cur, &ts)
}
