package routes

import (
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/upstream"
)

// Known wire formats: the upstream package has an adapter for each.
var knownFormats = map[string]bool{upstream.FormatOpenAI: true, upstream.FormatAnthropic: true, upstream.FormatGemini: true,
	upstream.FormatVertex: true, upstream.FormatBedrock: true}

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
		if a := m.Resume.Attempts; a < 0 || a > MaxResumeAttempts {
			return v.fail(path+".resume.attempts", " must be between 0 and %d, got %d", MaxResumeAttempts, a)
		}
		if _, written := v.lines[path+".deadline"]; written && m.Deadline <= 0 {
			return v.fail(path+".deadline", " must be a positive duration, got %s", time.Duration(m.Deadline))
		}
		if err := v.maxTokensEstimate(m, path+".max_tokens_estimate"); err != nil {
			return err
		}
		if m.Cache != nil {
			if err := v.cache(m.Cache, path+".cache"); err != nil {
				return err
			}
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
	teams, err := v.teams(r)
	if err != nil {
		return err
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
		if err := v.clientCost(c, path, teams); err != nil {
			return err
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
		return v.fail(path+".format", ": %s is unknown (known: openai, anthropic, gemini, vertex, bedrock)", quoteShort(p.Format))
	}
	if err := v.vertexBlock(p, path); err != nil {
		return err
	}
	if err := v.bedrockBlock(p, path); err != nil {
		return err
	}
	if err := v.baseURL(p.BaseURL, path+".base_url"); err != nil {
		return err
	}
	if err := v.azureBlock(p, path); err != nil {
		return err
	}
	if err := v.auth(p, path); err != nil {
		return err
	}
	if err := v.credentials(p, path); err != nil {
		return err
	}
	if _, written := v.lines[path+".default_max_tokens"]; written {
		if p.Format != upstream.FormatAnthropic && !upstream.GeminiBodies(p.Format) && p.Format != upstream.FormatBedrock {
			return v.fail(path+".default_max_tokens", " applies only to formats anthropic, gemini, vertex and bedrock (this provider is %s)", p.Format)
		}
		if p.DefaultMaxTokens < 1 {
			return v.fail(path+".default_max_tokens", " must be a positive whole number, got %d", p.DefaultMaxTokens)
		}
	}
	if p.Prefill && p.Format != upstream.FormatOpenAI {
		return v.fail(path+".prefill", " applies only to format openai (an anthropic provider takes a prefill natively)")
	}
	if p.StreamUsage != nil && p.Format != upstream.FormatOpenAI {
		return v.fail(path+".stream_usage", " applies only to format openai (this provider is %s)", p.Format)
	}
	if p.Auth.Style == AuthNone || p.Auth.Style == AuthGoogleServiceAccount || p.Auth.Style == AuthAWSSigV4 {
		if len(p.APIKeys) > 0 {
			return v.fail(path+".api_keys", ": auth %s sends no key; remove api_keys (the provider gets one target)", p.Auth.Style)
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
	if err := v.retry(&p.Retry, path+".retry"); err != nil {
		return err
	}
	if err := v.prices(p, path); err != nil {
		return err
	}
	return v.health(&p.Health, path+".health")
}

// auth validates a provider's auth and fills in its format's default.
func (v *validator) auth(p *ProviderConfig, path string) error {
	a := &p.Auth
	switch a.Style {
	case "":
		if _, written := v.lines[path+".auth"]; written {
			return v.fail(path+".auth", " is empty (known: bearer, x-api-key, none, google_service_account, aws_sigv4, or {header: NAME})")
		}
		a.Style = AuthBearer
		if p.Azure != nil {
			// Azure's keys travel in api-key (Entra ID tokens would be
			// bearer: auth bearer says so).
			a.Style, a.Header = AuthHeader, AzureKeyHeader
		}
		switch p.Format {
		case upstream.FormatAnthropic:
			a.Style = AuthXAPIKey
		case upstream.FormatGemini:
			// Gemini's header, never its ?key= query: a URL's query is
			// kept by proxies and access logs.
			a.Style, a.Header = AuthHeader, upstream.GeminiKeyHeader
		case upstream.FormatVertex:
			// Vertex takes no API key: a service account's tokens.
			a.Style = AuthGoogleServiceAccount
		case upstream.FormatBedrock:
			// Bedrock takes no API key: requests signed with AWS
			// credentials.
			a.Style = AuthAWSSigV4
		}
	case AuthBearer, AuthXAPIKey, AuthNone, AuthGoogleServiceAccount, AuthAWSSigV4:
	case AuthHeader:
		if a.Header == "" {
			return v.fail(path+".auth.header", " is required: the header that carries the key, like api-key")
		}
		if !headerName.MatchString(a.Header) {
			return v.fail(path+".auth.header", ": %s is not a valid header name", quoteShort(a.Header))
		}
	default:
		return v.fail(path+".auth", ": %s is unknown (known: bearer, x-api-key, none, google_service_account, aws_sigv4, or {header: NAME})%s",
			quoteShort(a.Style), suggest(a.Style, []string{AuthBearer, AuthXAPIKey, AuthNone, AuthGoogleServiceAccount, AuthAWSSigV4}))
	}
	if (a.Style == AuthAWSSigV4) != (p.Format == upstream.FormatBedrock) {
		if p.Format == upstream.FormatBedrock {
			return v.fail(path+".auth", ": format bedrock takes auth aws_sigv4 (or leave auth out): credentials go in aws")
		}
		return v.fail(path+".auth", ": aws_sigv4 applies only to format bedrock (this provider is %s)", p.Format)
	}
	if (a.Style == AuthGoogleServiceAccount) != (p.Format == upstream.FormatVertex) {
		// Each needs the other: Vertex authenticates only with Google
		// tokens, and no other format is sent them.
		if p.Format == upstream.FormatVertex {
			return v.fail(path+".auth", ": format vertex takes auth google_service_account (or leave auth out)")
		}
		return v.fail(path+".auth", ": google_service_account applies only to format vertex (this provider is %s)", p.Format)
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
	if _, written := v.lines[path+".max_cooldown"]; !written && h.MaxCooldown < h.Cooldown {
		// A cooldown longer than the default cap, with no cap written, is
		// its own cap: the doubling then stays at the cooldown.
		h.MaxCooldown = h.Cooldown
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
