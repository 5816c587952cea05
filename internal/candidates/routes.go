package candidates

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/secret"
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
	Query          map[string]string `yaml:"query"`
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
	Name       string        `yaml:"name"`
	Candidates []EntryConfig `yaml:"candidates"`
}

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
}

// Duration is a time.Duration written in Go syntax in YAML.
type Duration time.Duration

// UnmarshalYAML accepts "250ms", "30s", ...
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	v, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	if v < 0 {
		return fmt.Errorf("line %d: duration %q is negative", n.Line, s)
	}
	*d = Duration(v)
	return nil
}

// Known wire formats. Anthropic joins later; accepting it now would be a
// promise the upstream package cannot keep.
var knownFormats = map[string]bool{"openai": true}

// LoadRoutes reads and validates the routes file at path.
func LoadRoutes(path string) (*Routes, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("routes file: %w", err)
	}
	r, err := ParseRoutes(b, os.LookupEnv)
	if err != nil {
		return nil, fmt.Errorf("routes file %s: %w", path, err)
	}
	return r, nil
}

// ParseRoutes decodes and validates a routes file. lookup resolves ${VAR}
// references; it is a parameter so tests need not touch the process env.
func ParseRoutes(b []byte, lookup func(string) (string, bool)) (*Routes, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var r Routes
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if err := r.expand(lookup); err != nil {
		return nil, err
	}
	if err := r.validate(); err != nil {
		return nil, err
	}
	return &r, nil
}

var varRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandString replaces ${VAR}; a missing variable expands to "" and is
// reported so the caller can decide whether empty is acceptable.
func expandString(s string, lookup func(string) (string, bool)) (out string, missing []string) {
	out = varRef.ReplaceAllStringFunc(s, func(m string) string {
		name := m[2 : len(m)-1]
		v, ok := lookup(name)
		if !ok {
			missing = append(missing, name)
		}
		return v
	})
	return out, missing
}

// expand resolves ${VAR} in values only (never in keys or structure), after
// YAML parsing, so an env value cannot inject YAML.
func (r *Routes) expand(lookup func(string) (string, bool)) error {
	for i := range r.Providers {
		p := &r.Providers[i]
		p.BaseURL, _ = expandString(p.BaseURL, lookup)
		for k, key := range p.APIKeys {
			v, missing := expandString(key.Reveal(), lookup)
			if strings.TrimSpace(v) == "" {
				hint := ""
				if len(missing) > 0 {
					hint = fmt.Sprintf(" (is %s set?)", strings.Join(missing, ", "))
				}
				return fmt.Errorf("providers[%d] %q: api_keys[%d] is empty%s", i, p.Name, k, hint)
			}
			p.APIKeys[k] = secret.New(v)
		}
		for k, v := range p.Headers {
			p.Headers[k], _ = expandString(v, lookup)
		}
		for k, v := range p.Query {
			p.Query[k], _ = expandString(v, lookup)
		}
	}
	return nil
}

// ErrInvalidRoutes marks every validation failure of the routes file.
var ErrInvalidRoutes = errors.New("invalid routes")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidRoutes}, args...)...)
}

var headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

func (r *Routes) validate() error {
	if len(r.Providers) == 0 {
		return invalid("providers: at least one provider is required")
	}
	providers := map[string]*ProviderConfig{}
	for i := range r.Providers {
		p := &r.Providers[i]
		where := fmt.Sprintf("providers[%d]", i)
		if p.Name == "" {
			return invalid("%s.name is required", where)
		}
		where = fmt.Sprintf("providers[%d] %q", i, p.Name)
		if providers[p.Name] != nil {
			return invalid("%s: duplicate provider name", where)
		}
		providers[p.Name] = p
		if p.Format == "" {
			p.Format = "openai"
		}
		if !knownFormats[p.Format] {
			return invalid("%s.format %q is unknown (known: openai)", where, p.Format)
		}
		u, err := url.Parse(p.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			// The URL itself is not echoed: it may carry credentials.
			return invalid("%s.base_url must be an absolute http(s) URL without credentials, query or fragment", where)
		}
		if len(p.APIKeys) == 0 {
			return invalid("%s.api_keys must list at least one key", where)
		}
		if p.MaxConcurrency <= 0 {
			return invalid("%s.max_concurrency must be positive, got %d", where, p.MaxConcurrency)
		}
		for k, v := range p.Headers {
			if !headerName.MatchString(k) {
				return invalid("%s.headers: %q is not a valid header name", where, k)
			}
			if strings.ContainsAny(v, "\r\n\x00") {
				return invalid("%s.headers[%s] contains CR, LF or NUL", where, k)
			}
		}
		for k, v := range p.Query {
			if strings.ContainsAny(k+v, "\r\n\x00") {
				return invalid("%s.query[%s] contains CR, LF or NUL", where, k)
			}
		}
	}
	if len(r.Models) == 0 {
		return invalid("models: at least one model is required")
	}
	models := map[string]bool{}
	for i := range r.Models {
		m := &r.Models[i]
		where := fmt.Sprintf("models[%d]", i)
		if m.Name == "" {
			return invalid("%s.name is required", where)
		}
		where = fmt.Sprintf("models[%d] %q", i, m.Name)
		if models[m.Name] {
			return invalid("%s: duplicate model name", where)
		}
		models[m.Name] = true
		if len(m.Candidates) == 0 {
			return invalid("%s.candidates must list at least one entry", where)
		}
		for j := range m.Candidates {
			e := &m.Candidates[j]
			ew := fmt.Sprintf("%s.candidates[%d]", where, j)
			if providers[e.Provider] == nil {
				return invalid("%s.provider %q is not a configured provider", ew, e.Provider)
			}
			if e.Model == "" {
				e.Model = m.Name
			}
			if e.Priority < 0 {
				return invalid("%s.priority must not be negative, got %d", ew, e.Priority)
			}
			if e.Weight == 0 {
				e.Weight = 1
			}
			if e.Weight < 1 {
				return invalid("%s.weight must be at least 1, got %d", ew, e.Weight)
			}
		}
	}
	clients := map[string]bool{}
	hashes := map[string]bool{}
	for i := range r.Clients {
		c := &r.Clients[i]
		where := fmt.Sprintf("clients[%d]", i)
		if c.Name == "" {
			return invalid("%s.name is required", where)
		}
		where = fmt.Sprintf("clients[%d] %q", i, c.Name)
		if clients[c.Name] {
			return invalid("%s: duplicate client name", where)
		}
		clients[c.Name] = true
		c.KeySHA256 = strings.ToLower(strings.TrimSpace(c.KeySHA256))
		if len(c.KeySHA256) != 64 || strings.Trim(c.KeySHA256, "0123456789abcdef") != "" {
			return invalid("%s.key_sha256 must be 64 hex characters", where)
		}
		if hashes[c.KeySHA256] {
			return invalid("%s.key_sha256 duplicates another client's", where)
		}
		hashes[c.KeySHA256] = true
		if c.Priority == "" {
			c.Priority = "interactive"
		}
		if _, err := admission.ParsePriority(c.Priority); err != nil {
			return invalid("%s.priority: %v", where, err)
		}
	}
	return nil
}
