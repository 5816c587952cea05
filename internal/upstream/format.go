package upstream

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Route is the client API a request came in on. It names the request in
// records and metrics and decides, with a provider's format, where and how
// the request is sent.
type Route uint8

// The client routes.
const (
	RouteChat       Route = iota // POST /v1/chat/completions
	RouteMessages                // POST /v1/messages (Anthropic clients)
	RouteEmbeddings              // POST /v1/embeddings
	RouteResponses               // POST /v1/responses
	NumRoutes
)

var routeNames = [NumRoutes]string{"chat", "messages", "embeddings", "responses"}

// String is the route's name in records, metrics and the access log.
func (r Route) String() string {
	if r < NumRoutes {
		return routeNames[r]
	}
	return "unknown"
}

// Provider wire formats (the routes file's providers[].format).
const (
	FormatOpenAI    = "openai"
	FormatAnthropic = "anthropic"
	FormatGemini    = "gemini"  // the Gemini API (generativelanguage.googleapis.com)
	FormatVertex    = "vertex"  // Gemini on Vertex AI ({location}-aiplatform.googleapis.com)
	FormatBedrock   = "bedrock" // AWS Bedrock Runtime Converse (bedrock-runtime.{region}.amazonaws.com)
)

// GeminiKeyHeader is the header a gemini provider's key travels in by
// default: never the URL's ?key= query, which proxies and access logs
// keep.
const GeminiKeyHeader = "x-goog-api-key"

// AnthropicVersion is the anthropic-version header sent to anthropic
// providers whose headers do not set one and whose client did not send one.
const AnthropicVersion = "2023-06-01"

// AuthStyle is how a provider's key travels.
type AuthStyle uint8

// The auth styles. The zero value is bearer, so a Call built without an
// Auth authenticates as before.
const (
	AuthBearer  AuthStyle = iota // Authorization: Bearer KEY
	AuthXAPIKey                  // x-api-key: KEY
	AuthHeader                   // NAME: KEY, e.g. Azure's api-key
	AuthNone                     // no credential (local servers)
	AuthGoogle                   // Authorization: Bearer <OAuth2 access token from Tokens>
	AuthAWS                      // SigV4 by AWS (format bedrock)
)

// Auth is a provider's authentication.
type Auth struct {
	Style  AuthStyle
	Header string // the header name for AuthHeader
	// Tokens mints the access tokens of AuthGoogle; built once per routes
	// load, so every attempt of the provider shares its cached token.
	Tokens TokenSource
	// AWS signs the requests of AuthAWS; built once per routes load, so
	// every attempt of the provider shares its cached credentials.
	AWS *AWSSigner
}

// String renders the auth as the routes file writes it.
func (a Auth) String() string {
	switch a.Style {
	case AuthXAPIKey:
		return "x-api-key"
	case AuthHeader:
		return "header " + a.Header
	case AuthNone:
		return "none"
	case AuthGoogle:
		return "google_service_account"
	case AuthAWS:
		return "aws_sigv4"
	}
	return "bearer"
}

// Endpoint is how one provider is addressed: its format, the URL of each
// client route it can serve, its auth and its extra headers. It is built
// once from the routes file and shared by every attempt.
type Endpoint struct {
	Format string
	// URLs per client route; "" when the format cannot serve the route.
	URLs  [NumRoutes]string
	Auth  Auth
	Extra http.Header // the routes file's headers, sent on every call
	// Forward is which client headers reach the provider: the format's own,
	// plus the routes file's forward_headers (Forward.Allow).
	Forward Forwarding
	// Defaults are sent only when neither Extra nor the client set them
	// (anthropic-version).
	Defaults http.Header
	// DefaultMaxTokens is the max_tokens sent to an anthropic provider when
	// the client sets none.
	DefaultMaxTokens int64
	// StreamUsage makes a pass-through chat stream ask an openai provider
	// for its usage chunk when the client did not (the routes file's
	// stream_usage, default true); the client is then not shown it.
	StreamUsage bool
	// Prefill: the provider continues a trailing assistant message (a
	// resumed stream's prefill): anthropic always, openai with the routes
	// file's prefill: true.
	Prefill bool
	// gemini is where a gemini provider's methods are: the model is in
	// the path (models/{model}:generateContent), so the URL is made per
	// attempt (geminiURL) and URLs only says which routes are served.
	gemini geminiBase
	// bedrock is a bedrock endpoint's base URL (scheme://host/path, no
	// trailing slash): the model is in the path, so the URL is made per
	// attempt (toBedrock).
	bedrock string
}

// isBedrock reports whether the endpoint is a bedrock one.
func (e *Endpoint) isBedrock() bool { return e.bedrock != "" }

// geminiBase is a gemini endpoint's base URL, split where a method path
// goes between its path and its query.
type geminiBase struct {
	prefix string // scheme://host/path, without a trailing slash
	query  string // the routes file's query, encoded; "" for none
}

// isGemini reports whether the endpoint is a gemini one: a length test,
// cheaper on every attempt than comparing the format's name with "gemini",
// as long as "openai".
func (e *Endpoint) isGemini() bool { return e.gemini.prefix != "" }

// geminiURL is the URL of a method path from gemini.Path
// ("models/m:streamGenerateContent?alt=sse") on ep.
func (e *Endpoint) geminiURL(path string) string {
	u := e.gemini.prefix + "/" + path
	if e.gemini.query == "" {
		return u
	}
	if strings.Contains(path, "?") {
		return u + "&" + e.gemini.query
	}
	return u + "?" + e.gemini.query
}

// Serves reports whether the endpoint's format can serve the client route.
func (e *Endpoint) Serves(r Route) bool { return r < NumRoutes && e.URLs[r] != "" }

// Translates reports whether a request of route is translated for this
// endpoint (rather than passed through with only its model rewritten).
func (e *Endpoint) Translates(r Route) bool {
	switch r {
	case RouteChat:
		return e.Format == FormatAnthropic || e.isGemini() || e.isBedrock()
	case RouteMessages:
		return e.Format == FormatOpenAI || e.isGemini() || e.isBedrock()
	case RouteEmbeddings:
		return e.isGemini()
	case RouteResponses: // through the chat form (responses.go)
		return e.Format == FormatAnthropic || e.isGemini() || e.isBedrock()
	}
	return false
}

// NewEndpoint resolves a provider's addressing. baseURL has been validated
// (absolute http(s), no query); query is appended to every URL.
func NewEndpoint(format, baseURL string, query map[string]string, auth Auth, headers map[string]string, maxTokens int64) (*Endpoint, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("base_url: %w", err)
	}
	e := &Endpoint{Format: format, Auth: auth, Extra: http.Header{}, DefaultMaxTokens: maxTokens, StreamUsage: true}
	at := func(suffix string) string {
		v := *u
		v.Path = strings.TrimRight(u.Path, "/") + suffix
		q := v.Query()
		for k, val := range query {
			q.Set(k, val)
		}
		v.RawQuery = q.Encode()
		return v.String()
	}
	switch format {
	case FormatAnthropic:
		e.URLs[RouteChat] = at("/messages")
		e.URLs[RouteMessages] = e.URLs[RouteChat]
		e.URLs[RouteResponses] = e.URLs[RouteChat]
		e.Defaults = http.Header{"Anthropic-Version": {AnthropicVersion}}
	case FormatGemini, FormatVertex:
		// Chat, Anthropic and Responses clients reach generateContent
		// through the OpenAI form, embeddings batchEmbedContents. URLs
		// hold the models collection, which is what check-config shows;
		// Build makes the method's URL.
		base := at("/models")
		e.URLs[RouteChat], e.URLs[RouteMessages], e.URLs[RouteResponses] = base, base, base
		if format == FormatGemini {
			// Vertex embeds through :predict, a body of its own: not
			// served, so the planner leaves vertex candidates out.
			e.URLs[RouteEmbeddings] = base
		}
		v := *u
		v.Path, v.RawQuery = strings.TrimRight(u.Path, "/"), ""
		q := url.Values{}
		for k, val := range query {
			q.Set(k, val)
		}
		e.gemini = geminiBase{prefix: v.String(), query: q.Encode()}
	case FormatBedrock:
		// Chat, Anthropic and Responses clients reach Converse through
		// the OpenAI form; embeddings are not served. URLs hold
		// the model collection, which is what check-config shows; Build
		// makes the operation's URL. The routes file's query is not
		// sent: Converse takes none, and it would have to be signed.
		v := *u
		v.Path, v.RawQuery, v.RawPath = strings.TrimRight(u.Path, "/"), "", ""
		e.bedrock = v.String()
		e.URLs[RouteChat] = e.bedrock + "/model"
		e.URLs[RouteMessages] = e.URLs[RouteChat]
		e.URLs[RouteResponses] = e.URLs[RouteChat]
	case FormatOpenAI, "":
		e.Format = FormatOpenAI
		e.URLs[RouteChat] = at("/chat/completions")
		e.URLs[RouteMessages] = e.URLs[RouteChat]
		e.URLs[RouteEmbeddings] = at("/embeddings")
		e.URLs[RouteResponses] = at("/responses")
	default:
		return nil, fmt.Errorf("unknown format %q", format)
	}
	e.Forward = formatForwarding(e.Format)
	for k, v := range headers {
		if v != "" { // an unset ${VAR} leaves the header out rather than empty
			e.Extra.Set(k, v)
		}
	}
	return e, nil
}

// set puts the key where the endpoint's auth style wants it.
func (a Auth) set(h http.Header, key string) {
	switch a.Style {
	case AuthBearer:
		h.Set("Authorization", "Bearer "+key)
	case AuthXAPIKey:
		h.Set("X-Api-Key", key)
	case AuthHeader:
		h.Set(a.Header, key)
	}
}
