package routes

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/secret"
	"github.com/llmgw/gateway/internal/upstream"
)

// Routes is the routes file: what changes with the deployment (DESIGN section 3).
type Routes struct {
	Providers []ProviderConfig `yaml:"providers"`
	Models    []ModelConfig    `yaml:"models"`
	Clients   []ClientConfig   `yaml:"clients"`
}

// ProviderConfig is one upstream account: an endpoint and its keys.
type ProviderConfig struct {
	Name           string            `yaml:"name"`
	Format         string            `yaml:"format"`
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
	// Auth is how the keys travel: bearer (default for openai), x-api-key
	// (default for anthropic), none, or {header: NAME}.
	Auth AuthConfig `yaml:"auth"`
	// DefaultMaxTokens is the max_tokens sent to an anthropic provider when
	// the client sets none (default 4096).
	DefaultMaxTokens int `yaml:"default_max_tokens"`
	// StreamUsage (format openai, default true) makes the gateway ask for
	// usage on every chat stream (stream_options.include_usage), hiding the
	// usage chunk from a client that did not ask, so token rates and
	// records always know a stream's tokens. false for a server that
	// refuses stream_options: its streams then count only the usage their
	// client asked for (docs/formats.md).
	StreamUsage *bool `yaml:"stream_usage"`
}

// Auth styles of the routes file.
const (
	AuthBearer  = "bearer"
	AuthXAPIKey = "x-api-key"
	AuthNone    = "none"
	AuthHeader  = "header" // written as {header: NAME}
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
var DefaultHealth = HealthConfig{
	Failures: 3, Cooldown: Duration(10 * time.Second),
	MaxCooldown: Duration(5 * time.Minute), AuthCooldown: Duration(5 * time.Minute),
}

// Timeouts bound one attempt against a provider. Zero values take the
// defaults documented at DefaultTimeouts; Idle zero means off.
type Timeouts struct {
	Connect   Duration `yaml:"connect"`
	FirstByte Duration `yaml:"first_byte"`
	Idle      Duration `yaml:"idle"`
	Total     Duration `yaml:"total"`
}

// Default provider timeouts. FirstByte has none here: an unset first_byte
// falls back to GATEWAY_STREAM_FIRST_BYTE_TIMEOUT.
const (
	DefaultConnectTimeout = 5 * time.Second
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
	Hedge      HedgeConfig   `yaml:"hedge"`
	Candidates []EntryConfig `yaml:"candidates"`
}

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

// Known wire formats: the upstream package has an adapter for each.
var knownFormats = map[string]bool{upstream.FormatOpenAI: true, upstream.FormatAnthropic: true}

// MaxFileBytes caps the routes file. A real one is a few KiB; the cap
// keeps a mistake (GATEWAY_CONFIG=/dev/zero, a log file, a symlink swapped
// to something huge under a running gateway) from growing the process
// without bound when it is read at start or on a reload.
const MaxFileBytes = 16 << 20

// ErrFileTooLarge is returned, wrapped, for a routes file over
// MaxFileBytes.
var ErrFileTooLarge = errors.New("larger than the 16 MiB a routes file may have")

// ReadFile reads the routes file at path, at most MaxFileBytes
// of it. It reads through a limit rather than trusting the file's size, so
// a file that grows while it is read, or a device such as /dev/zero that
// has no size, ends the read too. Errors are prefixed "routes file".
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("routes file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("routes file: %w", err)
	}
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("routes file %s: %w", path, ErrFileTooLarge)
	}
	return b, nil
}

// Load reads and validates the routes file at path.
func Load(path string) (*Routes, error) {
	b, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	r, err := Parse(b, os.LookupEnv)
	if err != nil {
		return nil, fmt.Errorf("routes file %s: %w", path, err)
	}
	return r, nil
}

// Parse decodes and validates a routes file. lookup resolves ${VAR}
// references; it is a parameter so tests need not touch the process env.
// Every error it returns matches ErrInvalid and, except for a YAML
// syntax error without a line, is a *FieldError naming the YAML path.
func Parse(b []byte, lookup func(string) (string, bool)) (*Routes, error) {
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(b)).Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, syntaxError(b, err)
	}
	var r Routes
	check := shapeChecker{lines: lineIndex{}}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		root := doc.Content[0]
		if err := check.check(root, reflect.TypeFor[Routes](), ""); err != nil {
			return nil, err
		}
		if err := root.Decode(&r); err != nil {
			var te *yaml.TypeError
			if errors.As(err, &te) {
				// Not expected after a clean walk, and yaml's text can
				// echo a value (a key), so it is not passed on.
				return nil, &FieldError{Msg: "the file does not fit the routes format"}
			}
			return nil, syntaxError(nil, err) // alias loops and excessive aliasing
		}
	}
	v := validator{lines: check.lines, exp: r.expand(lookup)}
	v.collectKeys(&r)
	if err := v.validate(&r); err != nil {
		return nil, err
	}
	return &r, nil
}

// varRef matches ${VAR} and ${VAR:-default}; as in the shell, the default
// applies when VAR is unset or empty.
var varRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-[^}]*)?\}`)

// expandString replaces ${VAR} and ${VAR:-default}. A missing variable
// expands to ""; the returned expansion says which variables were used and
// in what state, for the caller's error message.
func expandString(s string, lookup func(string) (string, bool)) (string, expansion) {
	var x expansion
	matches := varRef.FindAllStringSubmatchIndex(s, -1)
	if matches == nil {
		return s, x
	}
	var b strings.Builder
	last := 0
	for _, m := range matches {
		b.WriteString(s[last:m[0]])
		last = m[1]
		name := s[m[2]:m[3]]
		v, ok := lookup(name)
		u := varUse{Name: name, Set: ok, Empty: ok && v == ""}
		if m[4] >= 0 && v == "" {
			v = s[m[4]+2 : m[5]]
			u.Defaulted = true
		}
		if !slices.ContainsFunc(x.vars, func(o varUse) bool { return o.Name == name }) {
			x.vars = append(x.vars, u)
		}
		b.WriteString(v)
	}
	b.WriteString(s[last:])
	return b.String(), x
}

// expand resolves ${VAR} in values only (never in keys or structure), after
// YAML parsing, so an env value cannot inject YAML. It returns, by YAML
// path, where base_url and each key came from.
func (r *Routes) expand(lookup func(string) (string, bool)) map[string]expansion {
	from := map[string]expansion{}
	for i := range r.Providers {
		p := &r.Providers[i]
		path := fmt.Sprintf("providers[%d]", i)
		p.BaseURL, from[path+".base_url"] = expandString(p.BaseURL, lookup)
		for k, key := range p.APIKeys {
			var v string
			v, from[fmt.Sprintf("%s.api_keys[%d]", path, k)] = expandString(key.Reveal(), lookup)
			p.APIKeys[k] = secret.New(v)
		}
		for k, v := range p.Headers {
			p.Headers[k], _ = expandString(v, lookup)
		}
		for k, v := range p.Query {
			p.Query[k], _ = expandString(v, lookup)
		}
	}
	return from
}

// ErrInvalid marks every validation failure of the routes file.
var ErrInvalid = errors.New("invalid routes")

var headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// validator checks decoded routes and words each error with the YAML path
// and, from lines, the line it was written on.
type validator struct {
	lines lineIndex
	exp   map[string]expansion
	keys  []string // every configured key, longest first, to redact from shown values
}

// minRedactedKey: shorter "keys" (test placeholders) would turn any shown
// value into noise if redacted wherever they occur.
const minRedactedKey = 4

func (v *validator) collectKeys(r *Routes) {
	for _, p := range r.Providers {
		for _, k := range p.APIKeys {
			if s := strings.TrimSpace(k.Reveal()); len(s) >= minRedactedKey {
				v.keys = append(v.keys, s)
			}
		}
	}
	slices.SortFunc(v.keys, func(a, b string) int { return len(b) - len(a) })
}

// fail reports a problem at path; msg continues the sentence that starts
// with the path (": ..." or " is ...").
func (v *validator) fail(path, format string, args ...any) error {
	return &FieldError{Path: path, Line: v.lines.line(path), Msg: path + fmt.Sprintf(format, args...)}
}

func (v *validator) validate(r *Routes) error {
	if len(r.Providers) == 0 {
		return v.fail("providers", ": at least one provider is required")
	}
	providers := map[string]int{}
	var names []string
	for i := range r.Providers {
		if err := v.provider(&r.Providers[i], fmt.Sprintf("providers[%d]", i), providers); err != nil {
			return err
		}
		providers[r.Providers[i].Name] = i
		names = append(names, r.Providers[i].Name)
	}
	if len(r.Models) == 0 {
		return v.fail("models", ": at least one model is required")
	}
	models := map[string]int{}
	for i := range r.Models {
		m := &r.Models[i]
		path := fmt.Sprintf("models[%d]", i)
		if m.Name == "" {
			return v.fail(path+".name", " is required")
		}
		if first, dup := models[m.Name]; dup {
			return v.fail(path+".name", ": %s is already used by models[%d]", quoteShort(m.Name), first)
		}
		models[m.Name] = i
		switch m.Strategy {
		case "":
			m.Strategy = StrategyWeighted
		case StrategyWeighted, StrategyLeastLatency:
		default:
			return v.fail(path+".strategy", ": %s is unknown (known: weighted, least_latency)", quoteShort(m.Strategy))
		}
		if _, written := v.lines[path+".hedge"]; written {
			if err := v.hedge(&m.Hedge, path+".hedge"); err != nil {
				return err
			}
		}
		if _, written := v.lines[path+".deadline"]; written && m.Deadline <= 0 {
			return v.fail(path+".deadline", " must be a positive duration, got %s", time.Duration(m.Deadline))
		}
		if len(m.Candidates) == 0 {
			return v.fail(path+".candidates", " must list at least one entry")
		}
		for j := range m.Candidates {
			e := &m.Candidates[j]
			ep := fmt.Sprintf("%s.candidates[%d]", path, j)
			if e.Provider == "" {
				return v.fail(ep+".provider", " is required")
			}
			if _, ok := providers[e.Provider]; !ok {
				hint := suggest(e.Provider, names)
				if hint == "" {
					hint = " (configured: " + strings.Join(names, ", ") + ")"
				}
				return v.fail(ep+".provider", ": %s is not a configured provider%s", quoteShort(e.Provider), hint)
			}
			if e.Model == "" {
				e.Model = m.Name
			}
			if e.Priority < 0 {
				return v.fail(ep+".priority", " must not be negative, got %d", e.Priority)
			}
			if e.Weight == 0 {
				e.Weight = 1
			}
			if e.Weight < 1 {
				return v.fail(ep+".weight", " must be at least 1, got %d", e.Weight)
			}
		}
	}
	clients := map[string]int{}
	hashes := map[string]int{}
	for i := range r.Clients {
		c := &r.Clients[i]
		path := fmt.Sprintf("clients[%d]", i)
		if c.Name == "" {
			return v.fail(path+".name", " is required")
		}
		if first, dup := clients[c.Name]; dup {
			return v.fail(path+".name", ": %s is already used by clients[%d]", quoteShort(c.Name), first)
		}
		clients[c.Name] = i
		c.KeySHA256 = strings.ToLower(strings.TrimSpace(c.KeySHA256))
		if len(c.KeySHA256) != 64 || strings.Trim(c.KeySHA256, "0123456789abcdef") != "" {
			// Never shown: a token pasted here instead of its hash is a secret.
			return v.fail(path+".key_sha256", " must be 64 hex characters: the SHA-256 of the client's token, not the token")
		}
		if first, dup := hashes[c.KeySHA256]; dup {
			return v.fail(path+".key_sha256", " is the same as clients[%d]'s", first)
		}
		hashes[c.KeySHA256] = i
		if c.Priority == "" {
			c.Priority = "interactive"
		}
		if _, err := admission.ParsePriority(c.Priority); err != nil {
			return v.fail(path+".priority", ": %v", err)
		}
		for _, lim := range []struct {
			field string
			v     int
		}{{"max_concurrency", c.MaxConcurrency}, {"requests_per_minute", c.RequestsPerMinute}, {"tokens_per_minute", c.TokensPerMinute}} {
			if _, written := v.lines[path+"."+lim.field]; written && lim.v <= 0 {
				return v.fail(path+"."+lim.field, " must be a positive whole number, got %d (leave it out for no limit)", lim.v)
			}
		}
	}
	return nil
}

// provider validates one provider; seen maps the names before it to their index.
func (v *validator) provider(p *ProviderConfig, path string, seen map[string]int) error {
	if p.Name == "" {
		return v.fail(path+".name", " is required")
	}
	if first, dup := seen[p.Name]; dup {
		return v.fail(path+".name", ": %s is already used by providers[%d]", quoteShort(p.Name), first)
	}
	if p.Format == "" {
		p.Format = "openai"
	}
	if !knownFormats[p.Format] {
		return v.fail(path+".format", ": %s is unknown (known: openai, anthropic)", quoteShort(p.Format))
	}
	if err := v.baseURL(p.BaseURL, path+".base_url"); err != nil {
		return err
	}
	if err := v.auth(p, path); err != nil {
		return err
	}
	if _, written := v.lines[path+".default_max_tokens"]; written {
		if p.Format != upstream.FormatAnthropic {
			return v.fail(path+".default_max_tokens", " applies only to format anthropic (this provider is %s)", p.Format)
		}
		if p.DefaultMaxTokens < 1 {
			return v.fail(path+".default_max_tokens", " must be a positive whole number, got %d", p.DefaultMaxTokens)
		}
	}
	if p.StreamUsage != nil && p.Format != upstream.FormatOpenAI {
		return v.fail(path+".stream_usage", " applies only to format openai (this provider is %s)", p.Format)
	}
	if p.Auth.Style == AuthNone {
		if len(p.APIKeys) > 0 {
			return v.fail(path+".api_keys", ": auth none sends no key; remove api_keys (the provider gets one target)")
		}
	} else if len(p.APIKeys) == 0 {
		return v.fail(path+".api_keys", " must list at least one key (or set auth: none for a server without keys)")
	}
	for k, key := range p.APIKeys {
		kp := fmt.Sprintf("%s.api_keys[%d]", path, k)
		if strings.TrimSpace(key.Reveal()) == "" {
			return v.fail(kp, " is empty%s", v.exp[kp].origin())
		}
	}
	if p.MaxConcurrency <= 0 {
		if _, written := v.lines[path+".max_concurrency"]; !written {
			return v.fail(path+".max_concurrency", " is required: how many requests one key may run at once")
		}
		return v.fail(path+".max_concurrency", " must be positive, got %d", p.MaxConcurrency)
	}
	for _, k := range slices.Sorted(maps.Keys(p.Headers)) {
		hp := childPath(path+".headers", k)
		if !headerName.MatchString(k) {
			return v.fail(hp, " is not a valid header name")
		}
		if strings.ContainsAny(p.Headers[k], "\r\n\x00") {
			return v.fail(hp, " contains CR, LF or NUL")
		}
	}
	for i, k := range p.ForwardHeaders {
		fp := fmt.Sprintf("%s.forward_headers[%d]", path, i)
		switch {
		case !headerName.MatchString(k):
			return v.fail(fp, ": %s is not a valid header name", quoteShort(k))
		case upstream.NeverForwarded(k) || p.Auth.Style == AuthHeader && strings.EqualFold(k, p.Auth.Header):
			return v.fail(fp, ": %s is never forwarded (credentials, hop-by-hop and the gateway's own headers)", quoteShort(k))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(p.Query)) {
		qp := childPath(path+".query", k)
		if strings.ContainsAny(k+p.Query[k], "\r\n\x00") {
			return v.fail(qp, " contains CR, LF or NUL")
		}
	}
	if _, written := v.lines[path+".stream_commit.events"]; written && p.StreamCommit.Events < 1 {
		return v.fail(path+".stream_commit.events", " must be at least 1, got %d", p.StreamCommit.Events)
	}
	if p.StreamCommit.Events == 0 {
		p.StreamCommit.Events = 1
	}
	return v.health(&p.Health, path+".health")
}

// auth validates a provider's auth and fills in its format's default.
func (v *validator) auth(p *ProviderConfig, path string) error {
	a := &p.Auth
	switch a.Style {
	case "":
		if _, written := v.lines[path+".auth"]; written {
			return v.fail(path+".auth", " is empty (known: bearer, x-api-key, none, or {header: NAME})")
		}
		a.Style = AuthBearer
		if p.Format == upstream.FormatAnthropic {
			a.Style = AuthXAPIKey
		}
	case AuthBearer, AuthXAPIKey, AuthNone:
	case AuthHeader:
		if a.Header == "" {
			return v.fail(path+".auth.header", " is required: the header that carries the key, like api-key")
		}
		if !headerName.MatchString(a.Header) {
			return v.fail(path+".auth.header", ": %s is not a valid header name", quoteShort(a.Header))
		}
	default:
		return v.fail(path+".auth", ": %s is unknown (known: bearer, x-api-key, none, or {header: NAME})%s",
			quoteShort(a.Style), suggest(a.Style, []string{AuthBearer, AuthXAPIKey, AuthNone}))
	}
	return nil
}

// hedge validates a route's hedge block.
func (v *validator) hedge(h *HedgeConfig, path string) error {
	a := strings.TrimSpace(h.After)
	switch {
	case a == "":
		return v.fail(path+".after", " is required: a duration like 800ms, or a percentile like p95")
	case a[0] == 'p' || a[0] == 'P':
		q, err := strconv.ParseFloat(a[1:], 64)
		if err != nil || q <= 0 || q >= 100 {
			return v.fail(path+".after", ": %s is not a percentile between p1 and p99.9", quoteShort(a))
		}
		h.quantile = q / 100
	default:
		d, err := time.ParseDuration(a)
		if err != nil || d <= 0 {
			return v.fail(path+".after", ": %s is neither a positive duration (800ms) nor a percentile (p95)", quoteShort(a))
		}
		h.after = d
	}
	if _, written := v.lines[path+".max"]; written && h.Max < 1 {
		return v.fail(path+".max", " must be at least 1, got %d", h.Max)
	}
	if h.Max == 0 {
		h.Max = 1
	}
	return nil
}

// health validates a provider's health block and fills in its defaults. A
// value written as zero is refused rather than defaulted: "cooldown: 0s"
// reads as "never cool down", which the gateway does not offer.
func (v *validator) health(h *HealthConfig, path string) error {
	if _, written := v.lines[path+".failures"]; written && h.Failures < 1 {
		return v.fail(path+".failures", " must be at least 1, got %d", h.Failures)
	}
	for _, d := range []struct {
		name string
		val  *Duration
		def  Duration
	}{
		{"cooldown", &h.Cooldown, DefaultHealth.Cooldown},
		{"max_cooldown", &h.MaxCooldown, DefaultHealth.MaxCooldown},
		{"auth_cooldown", &h.AuthCooldown, DefaultHealth.AuthCooldown},
	} {
		if _, written := v.lines[path+"."+d.name]; written && *d.val <= 0 {
			return v.fail(path+"."+d.name, " must be a positive duration, got %s", time.Duration(*d.val))
		}
		if *d.val == 0 {
			*d.val = d.def
		}
	}
	if h.Failures == 0 {
		h.Failures = DefaultHealth.Failures
	}
	if h.MaxCooldown < h.Cooldown {
		return v.fail(path+".max_cooldown", " (%s) must not be shorter than cooldown (%s)",
			time.Duration(h.MaxCooldown), time.Duration(h.Cooldown))
	}
	return nil
}

// baseURL checks a provider's base_url. The value is shown, with anything
// that may be a credential redacted, because "" or a missing scheme is the
// usual mistake and is hard to see without it.
func (v *validator) baseURL(raw, path string) error {
	// Cut after redacting, so a key across the cut cannot escape it.
	shown := quoteCut(RedactURL(raw, v.keys), 200)
	origin := v.exp[path].origin()
	u, err := url.Parse(raw)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "":
		hint := ""
		if raw != "" && !strings.Contains(raw, "://") {
			hint = "; it needs a scheme, like https://"
		}
		return v.fail(path, ": %s is not an absolute http(s) URL%s%s", shown, origin, hint)
	case u.User != nil:
		return v.fail(path, ": %s has credentials in it%s; put keys in api_keys", shown, origin)
	case u.RawQuery != "":
		return v.fail(path, ": %s has a query%s; put parameters in query", shown, origin)
	case u.Fragment != "":
		return v.fail(path, ": %s has a fragment%s", shown, origin)
	}
	return nil
}
