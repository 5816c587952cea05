package routes

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/llmgw/gateway/internal/secret"
)

// Routes is the routes file: what changes with the deployment (DESIGN section 3).
type Routes struct {
	Providers []ProviderConfig `yaml:"providers"`
	Models    []ModelConfig    `yaml:"models"`
	Clients   []ClientConfig   `yaml:"clients"`
	// Teams group clients under a shared budget (cost.go).
	Teams []TeamConfig `yaml:"teams"`
}

// ProviderConfig is one upstream account: an endpoint and its keys.
type ProviderConfig struct {
	Name string `yaml:"name"`
	// Format is the provider's wire format: openai (default), anthropic
	// (the Messages API), gemini (the Gemini API, base_url
	// https://generativelanguage.googleapis.com/v1beta; the key goes in
	// x-goog-api-key) or vertex (Gemini on Vertex AI: vertex and
	// credentials_file instead of base_url and api_keys).
	// docs/formats.md says what each translates.
	Format string `yaml:"format"`
	// PropagateTrace sends the provider the W3C trace context of each
	// attempt (traceparent, tracestate) when tracing is on; default false:
	// a provider learns nothing of the gateway's traces.
	PropagateTrace bool              `yaml:"propagate_trace"`
	BaseURL        string            `yaml:"base_url"`
	APIKeys        []secret.String   `yaml:"api_keys"`
	MaxConcurrency int               `yaml:"max_concurrency"`
	QueueBudget    Duration          `yaml:"queue_budget"`
	Timeouts       Timeouts          `yaml:"timeouts"`
	Headers        map[string]string `yaml:"headers"`
	// ForwardHeaders are client request headers forwarded to this provider
	// besides its format's own (OpenAI-Beta; anthropic-version and
	// anthropic-beta), e.g. OpenAI-Organization. Default none. A key-scoped
	// refusal (401, 403, 429) of a request carrying one does not count for
	// the key's health. Credentials, hop-by-hop and the gateway's own
	// headers cannot be listed.
	ForwardHeaders []string          `yaml:"forward_headers"`
	Query          map[string]string `yaml:"query"`
	Health         HealthConfig      `yaml:"health"`
	StreamCommit   StreamCommit      `yaml:"stream_commit"`
	// Retry is the last-resort retry of the same candidate (retry.go).
	Retry RetryConfig `yaml:"retry"`
	// Auth is how the keys travel: bearer (default for openai), x-api-key
	// (default for anthropic), none, or {header: NAME} ({header:
	// x-goog-api-key} is the default for gemini); google_service_account
	// (vertex's, and only vertex's) sends OAuth2 tokens instead of keys.
	Auth AuthConfig `yaml:"auth"`
	// DefaultMaxTokens is the max_tokens sent to an anthropic provider when
	// the client sets none (default 4096), and the maxOutputTokens sent to
	// a gemini one (default: none, the model's own limit).
	DefaultMaxTokens int `yaml:"default_max_tokens"`
	// StreamUsage (format openai, default true) makes the gateway ask for
	// usage on every chat stream (stream_options.include_usage), hiding the
	// usage chunk from a client that did not ask, so token rates and
	// records always know a stream's tokens. false for a server that
	// refuses stream_options: its streams then count only the usage their
	// client asked for (docs/formats.md).
	StreamUsage *bool `yaml:"stream_usage"`
	// Prefill (format openai only) says the server continues a trailing
	// assistant message (vLLM, DeepSeek, llama.cpp do), so a cut stream of
	// a route with resume may be continued here. Anthropic providers take
	// a prefill natively and need no flag.
	Prefill bool `yaml:"prefill"`
	// Prices override the default price table per upstream model (the
	// candidates' model, not the route's name). A price for a model no
	// route sends here is kept: routes may be added later.
	Prices map[string]PriceConfig `yaml:"prices"`
	// Vertex is where a format vertex provider's models are: its Google
	// Cloud project and location (vertex.go).
	Vertex VertexConfig `yaml:"vertex"`
	// Azure addresses an Azure OpenAI resource (format openai, azure.go):
	// a deployment and its api-version, or Azure's v1 API.
	Azure *AzureConfig `yaml:"azure"`
	// CredentialsFile is the service-account JSON key of auth
	// google_service_account, read and checked when the routes load.
	CredentialsFile string `yaml:"credentials_file"`
	// Credentials is the content of CredentialsFile, read at load so a
	// reload with a missing or broken key fails and the routes in service
	// keep serving. It holds a private key: never shown or logged.
	Credentials *ServiceAccount `yaml:"-" json:"-"`
	// Bedrock is where a format bedrock provider's models are: its AWS
	// region (bedrock.go).
	Bedrock BedrockConfig `yaml:"bedrock"`
	// AWS holds a format bedrock provider's static credentials; without
	// them the standard AWS chain is used (bedrock.go).
	AWS AWSConfig `yaml:"aws"`
}

// Auth styles of the routes file.
const (
	AuthBearer  = "bearer"
	AuthXAPIKey = "x-api-key"
	AuthNone    = "none"
	AuthHeader  = "header" // written as {header: NAME}
	// AuthGoogleServiceAccount: OAuth2 access tokens minted from the
	// service-account key in credentials_file (format vertex).
	AuthGoogleServiceAccount = "google_service_account"
	// AuthAWSSigV4: requests signed with SigV4 by the AWS credentials of
	// aws, or of the standard AWS chain (format bedrock).
	AuthAWSSigV4 = "aws_sigv4"
)

// AuthConfig is a provider's auth: a style name, or {header: NAME} for a
// custom header (Azure's api-key).
type AuthConfig struct {
	Style  string
	Header string
}

// authHeader is the mapping form of auth.
type authHeader struct {
	Header string `yaml:"header"`
}

// UnmarshalYAML accepts a style name or {header: NAME}; the shape checker
// has checked the node already.
func (a *AuthConfig) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.MappingNode {
		var h authHeader
		if err := n.Decode(&h); err != nil {
			return errors.New("expected {header: NAME}")
		}
		a.Style, a.Header = AuthHeader, strings.TrimSpace(h.Header)
		return nil
	}
	var s string
	if err := n.Decode(&s); err != nil {
		return errors.New("expected bearer, x-api-key, none or {header: NAME}")
	}
	a.Style = strings.TrimSpace(s)
	return nil
}

// StreamCommit is a stream's commit point: the gateway holds the first
// Events events (comments aside), or what arrived within Within after the
// first one, before the client sees anything. Until then a stream that
// breaks or carries an error object fails over invisibly. The default,
// {events: 1}, commits at the first event.
type StreamCommit struct {
	Events int      `yaml:"events"`
	Within Duration `yaml:"within"` // 0: no time bound
}

// HealthConfig tunes how the provider's targets cool down after failures.
// Zero values take the defaults of DefaultHealth.
type HealthConfig struct {
	// Failures is how many consecutive counted failures cool a target.
	Failures int `yaml:"failures"`
	// Cooldown is the first cooldown; each failed probe doubles it.
	Cooldown Duration `yaml:"cooldown"`
	// MaxCooldown caps the doubling and any Retry-After.
	MaxCooldown Duration `yaml:"max_cooldown"`
	// AuthCooldown is how long a 401/403 takes a key out of rotation.
	AuthCooldown Duration `yaml:"auth_cooldown"`
}

// DefaultHealth is the health block of a provider that sets none.
// The cooldown starts short and its doubling stops at 30s, so a target that
// recovered gets traffic back within 30s.
var DefaultHealth = HealthConfig{
	Failures: 3, Cooldown: Duration(5 * time.Second),
	MaxCooldown: Duration(30 * time.Second), AuthCooldown: Duration(5 * time.Minute),
}

// Timeouts bound one attempt against a provider. Zero values take the
// defaults below; Idle absent is DefaultIdleTimeout, and an explicit
// `idle: 0s` turns the stream idle watchdog off.
type Timeouts struct {
	Connect   Duration  `yaml:"connect"`
	FirstByte Duration  `yaml:"first_byte"`
	Idle      *Duration `yaml:"idle"`
	Total     Duration  `yaml:"total"`
}

// IdleTimeout is the stream idle watchdog's bound: the default when idle is
// absent, zero (off) when it is set to 0s.
func (t Timeouts) IdleTimeout() time.Duration {
	if t.Idle == nil {
		return DefaultIdleTimeout
	}
	return time.Duration(*t.Idle)
}

// Default provider timeouts. FirstByte has none here: an unset first_byte
// falls back to GATEWAY_STREAM_FIRST_BYTE_TIMEOUT. DefaultIdleTimeout cuts
// a stream that stalls after its first event, which would otherwise hold
// the client until total.
const (
	DefaultConnectTimeout = 5 * time.Second
	DefaultIdleTimeout    = 60 * time.Second
	DefaultTotalTimeout   = 600 * time.Second
)

// ModelConfig is a model name clients send, and where it may be served.
type ModelConfig struct {
	Name string `yaml:"name"`
	// Strategy orders the candidates inside a priority tier: weighted (the
	// default: a weighted random draw) or least_latency (by each target's
	// first-byte EWMA, targets without samples first, weight breaking ties).
	Strategy string `yaml:"strategy"`
	// Deadline bounds the whole request: every attempt, queue wait and the
	// relay. Clients may shorten it with X-Gateway-Deadline. Zero: none.
	Deadline Duration `yaml:"deadline"`
	// Hedge, when set, starts the next candidate too once the running
	// attempt has not committed after After: a duration, or a percentile
	// of the running target's first-byte latency ("p95"). Off by default.
	Hedge HedgeConfig `yaml:"hedge"`
	// Resume, when its attempts are set, continues a text stream cut after
	// its commit point on the next candidate that takes a prefill, in the
	// same client stream (docs/architecture.md, "Resuming a cut stream").
	// Off by default.
	Resume ResumeConfig `yaml:"resume"`
	// MaxTokensEstimate is the output tokens reserved against a budget
	// for a request that sets no max_tokens (TokensEstimate): 1..1e7,
	// absent for DefaultMaxTokensEstimate.
	MaxTokensEstimate int `yaml:"max_tokens_estimate"`
	// Cache, when set, serves repeats of a request from a stored answer
	// (CacheConfig, docs/cache.md). Nil: off.
	Cache      *CacheConfig  `yaml:"cache"`
	Candidates []EntryConfig `yaml:"candidates"`
}

// ResumeConfig is a model route's resume of cut streams.
type ResumeConfig struct {
	// Attempts is how many continuations one request may start, 0..3;
	// 0 (or the block absent) is off.
	Attempts int `yaml:"attempts"`
}

// MaxResumeAttempts bounds resume.attempts.
const MaxResumeAttempts = 3

// HedgeConfig is a model route's hedging.
type HedgeConfig struct {
	After string `yaml:"after"` // "800ms" or "p95"
	Max   int    `yaml:"max"`   // extra attempts at once; default 1

	after    time.Duration // parsed After, when a duration
	quantile float64       // parsed After, when a percentile
}

// Delay is After parsed by Parse: a fixed delay, or the quantile (0.95 for
// p95) of the running target's first-byte latency; one of them is zero.
func (h HedgeConfig) Delay() (after time.Duration, quantile float64) {
	return h.after, h.quantile
}

// Model route strategies.
const (
	StrategyWeighted     = "weighted"
	StrategyLeastLatency = "least_latency"
)

// EntryConfig is one provider+model entry of a route.
type EntryConfig struct {
	Provider string `yaml:"provider"`
	Model    string `yaml:"model"`
	Priority int    `yaml:"priority"`
	Weight   int    `yaml:"weight"`
}

// ClientConfig is one client key, stored as the SHA-256 of its bearer token.
type ClientConfig struct {
	Name      string `yaml:"name"`
	KeySHA256 string `yaml:"key_sha256"`
	Priority  string `yaml:"priority"`
	// Limits, each absent for none (DESIGN 10.4). MaxConcurrency counts
	// the client's upstream attempts in flight; the rates count requests
	// and the tokens of the upstream's usage in a one-minute window. With
	// GATEWAY_REDIS_URL they hold across replicas.
	MaxConcurrency    int `yaml:"max_concurrency"`
	RequestsPerMinute int `yaml:"requests_per_minute"`
	TokensPerMinute   int `yaml:"tokens_per_minute"`
	// Team names one of teams; its budget then applies too. "" for none.
	Team string `yaml:"team"`
	// Budget is the client's own spending limit; nil for none.
	Budget *BudgetConfig `yaml:"budget"`
	// CostInUsage adds "cost" (USD) to the usage object the client gets.
	CostInUsage bool `yaml:"cost_in_usage"`
}

// Duration is a time.Duration written in Go syntax in YAML.
type Duration time.Duration

// UnmarshalYAML accepts "250ms", "30s", ... The caller adds the path and
// line; a duration is never a secret, so the value is shown.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return errors.New("expected a duration (like 250ms or 30s)")
	}
	v, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("%s is not a duration (write it like 250ms, 30s or 2m)", quoteShort(s))
	}
	if v < 0 {
		return fmt.Errorf("%s is negative", quoteShort(s))
	}
	*d = Duration(v)
	return nil
}
