package candidates

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmgw/gateway/internal/health"
	"github.com/llmgw/gateway/internal/pricing"
	"github.com/llmgw/gateway/internal/routes"
	"github.com/llmgw/gateway/internal/secret"
	"github.com/llmgw/gateway/internal/upstream"
)

// ErrModelNotFound is returned by Plan for a model no route names.
var ErrModelNotFound = errors.New("model not found")

// ErrRouteNotServed is returned by PlanRoute for a model none of whose
// providers can serve the client route (embeddings or responses on a model
// whose candidates are all anthropic).
var ErrRouteNotServed = errors.New("no provider of the model serves this route")

// Provider is a provider of the routes file with its settings resolved.
type Provider struct {
	Name   string
	Format string
	// PropagateTrace: attempts carry the trace context (routes'
	// propagate_trace).
	PropagateTrace bool
	Origin         string // scheme://host[:port], never a path or credential
	ChatURL        string // where chat requests go: base_url + /chat/completions (or /messages) + query
	Headers        http.Header
	// Endpoint addresses the provider for every client route its format
	// serves (URLs, auth, headers); the request's Exchange reads it.
	Endpoint       *upstream.Endpoint
	MaxConcurrency int
	QueueBudget    time.Duration
	ConnectTimeout time.Duration
	FirstByte      time.Duration
	Idle           time.Duration
	Total          time.Duration
	Health         health.Settings
	CommitEvents   int           // stream events held before the commit point (at least 1)
	CommitWithin   time.Duration // hold no longer than this after the first event; 0: no bound
	Retry          Retry         // the last-resort retry of the same candidate (retry.go); zero: off
	Targets        []*Target
	// Sender sends the provider's attempts. The gateway sets it before the
	// planner serves, so a plan carries its own clients: a request planned
	// before a routes reload finishes its plan, failover included, even on
	// a provider the reload removed. Nil: Runner.Upstreams by name.
	Sender Sender
	// Generation orders the planners of one process: each NewPlanner gets
	// a larger one. Admission lets a gate's limit be changed only by a
	// request planned from the newest routes it has seen, so a request
	// planned before a reload that fails over after it cannot set an old
	// max_concurrency back.
	Generation uint64
}

// generations numbers planners (Provider.Generation).
var generations atomic.Uint64

// Target is one (provider, origin, key) tuple; it owns one target gate.
type Target struct {
	ID       string // digest of the tuple; safe to show
	Provider *Provider
	KeyID    string // non-secret label: key index and short fingerprint
	Key      secret.String
}

// Candidate is one planned attempt: a target and the upstream model.
type Candidate struct {
	Index  int
	ID     string // provider/key_id/model, stable across requests
	Route  string // the model name the client asked for
	Target *Target
	Model  string
	// Health is the (target, model)'s: providers fail and rate-limit per
	// model, so each model of a key cools on its own.
	Health *health.Entry
	// Price is the provider's price of Model (cost.go); nil: unpriced.
	Price *pricing.Price
}

// Provider returns the candidate's provider.
func (c *Candidate) Provider() *Provider { return c.Target.Provider }

// entry is a route entry with its provider resolved.
type entry struct {
	provider *Provider
	model    string
	weight   int
	ids      []string        // candidate ID per key index
	health   []*health.Entry // the (target, model)'s health per key index
	rotation atomic.Uint64   // which key goes first; advances per request
	price    *pricing.Price  // nil: unpriced
}

type route struct {
	name string
	// per client route, the entries whose format serves it, in tiers of
	// ascending priority, and how many candidates a plan holds
	tiers        [upstream.NumRoutes][][]*entry
	size         [upstream.NumRoutes]int
	leastLatency bool // order each tier by first-byte EWMA
	deadline     time.Duration
	hedge        Hedge
	resume       int // continuations a cut stream may start (Request.Resume)
	tokens       int // max_tokens_estimate (Policy.TokensEstimate)
	cache        *routes.CacheConfig
}

// Planner turns a model name into ordered candidates. It is safe for
// concurrent use.
type Planner struct {
	providers []*Provider
	byName    map[string]*Provider
	routes    map[string]*route
	models    []string

	mu  sync.Mutex // guards rnd when seeded
	rnd *rand.Rand // nil: the lock-free global source

	health *health.Tracker
}

// PlannerOptions tune a Planner.
type PlannerOptions struct {
	// DefaultFirstByte applies to providers without timeouts.first_byte.
	DefaultFirstByte time.Duration
	// DefaultQueueBudget applies to providers without queue_budget.
	DefaultQueueBudget time.Duration
	// Seed makes the weighted draw deterministic (tests).
	Seed *uint64
	// Health tracks every target's health; nil gives the planner a
	// tracker of its own on the process clock.
	Health *health.Tracker
	// Prices is the price table (GATEWAY_PRICES_FILE); nil is the one
	// built in. Providers' prices in the routes file come first.
	Prices *pricing.Table
}

// NewPlanner resolves validated routes into a Planner.
func NewPlanner(r *routes.Routes, opts PlannerOptions) (*Planner, error) {
	p := &Planner{byName: map[string]*Provider{}, routes: map[string]*route{}}
	if opts.Health == nil {
		opts.Health = health.NewTracker(health.SystemClock{}, nil)
	}
	p.health = opts.Health
	if opts.Seed != nil {
		p.rnd = rand.New(rand.NewPCG(*opts.Seed, *opts.Seed^0x9e3779b97f4a7c15))
	}
	if opts.Prices == nil {
		opts.Prices = pricing.Default()
	}
	gen := generations.Add(1)
	configs := map[string]*routes.ProviderConfig{}
	for i := range r.Providers {
		pc := &r.Providers[i]
		configs[pc.Name] = pc
		prov, err := resolveProvider(pc, opts)
		if err != nil {
			return nil, err
		}
		prov.Generation = gen
		p.providers = append(p.providers, prov)
		p.byName[prov.Name] = prov
	}
	for i := range r.Models {
		mc := &r.Models[i]
		rt := &route{name: mc.Name, leastLatency: mc.Strategy == routes.StrategyLeastLatency, deadline: time.Duration(mc.Deadline),
			resume: mc.Resume.Attempts, tokens: mc.TokensEstimate(), cache: mc.Cache}
		if h := mc.Hedge; h.Max > 0 {
			after, quantile := h.Delay()
			rt.hedge = Hedge{After: after, Quantile: quantile, Max: h.Max}
		}
		byPrio := map[int][]*entry{}
		var prios []int
		for _, ec := range mc.Candidates {
			prov := p.byName[ec.Provider]
			e := &entry{provider: prov, model: ec.Model, weight: ec.Weight, price: priceOf(configs[ec.Provider], ec.Model, opts.Prices)}
			for _, t := range prov.Targets {
				e.ids = append(e.ids, prov.Name+"/"+t.KeyID+"/"+ec.Model)
				e.health = append(e.health, p.health.Add(prov.Name, t.ID, t.KeyID, ec.Model, prov.Health))
			}
			if _, ok := byPrio[ec.Priority]; !ok {
				prios = append(prios, ec.Priority)
			}
			byPrio[ec.Priority] = append(byPrio[ec.Priority], e)
		}
		sort.Ints(prios)
		for cr := range upstream.NumRoutes {
			for _, pr := range prios {
				var tier []*entry
				for _, e := range byPrio[pr] {
					if e.provider.Endpoint.Serves(cr) {
						tier = append(tier, e)
						rt.size[cr] += len(e.provider.Targets)
					}
				}
				if len(tier) > 0 {
					rt.tiers[cr] = append(rt.tiers[cr], tier)
				}
			}
		}
		p.routes[mc.Name] = rt
		p.models = append(p.models, mc.Name)
	}
	return p, nil
}

func resolveProvider(pc *routes.ProviderConfig, opts PlannerOptions) (*Provider, error) {
	u, err := url.Parse(pc.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("provider %q: base_url: %w", pc.Name, err)
	}
	origin := u.Scheme + "://" + u.Host
	base := pc.BaseURL
	if pc.Format == upstream.FormatVertex {
		base = upstream.VertexBase(base, pc.Vertex.Project, pc.Vertex.Location)
	}
	ep, err := upstream.NewEndpoint(pc.Format, base, pc.Query, authOf(pc.Auth), pc.Headers, int64(pc.DefaultMaxTokens))
	if err != nil {
		return nil, fmt.Errorf("provider %q: %w", pc.Name, err)
	}
	if pc.Azure != nil && pc.Azure.Deployment != "" {
		// Azure has no Responses API under a deployment (only at
		// /openai/v1/responses): such candidates do not serve it.
		ep.URLs[upstream.RouteResponses] = ""
	}
	if ep.Auth.Style == upstream.AuthGoogle {
		if pc.Credentials == nil {
			return nil, fmt.Errorf("provider %q: credentials_file was not read", pc.Name)
		}
		// Once per routes load: the provider's attempts share its cached
		// token, and a reload with another key gets a source of its own.
		ts, err := upstream.NewGoogleTokens(pc.Credentials.JSON, orDefault(time.Duration(pc.Timeouts.Connect), routes.DefaultConnectTimeout))
		if err != nil {
			return nil, fmt.Errorf("provider %q: credentials_file: %w", pc.Name, err)
		}
		ep.Auth.Tokens = ts
	}
	if ep.Auth.Style == upstream.AuthAWS {
		// Once per routes load, like a token source: the provider's
		// attempts share the chain's cached credentials.
		a := pc.AWS
		ep.Auth.AWS = upstream.NewAWSSigner(pc.Bedrock.Region, a.AccessKeyID.Reveal(), a.SecretAccessKey.Reveal(), a.SessionToken.Reveal())
	}
	ep.Forward.Allow(pc.ForwardHeaders)
	ep.StreamUsage = pc.StreamUsage == nil || *pc.StreamUsage
	ep.Prefill = pc.Prefill || pc.Format == upstream.FormatAnthropic
	prov := &Provider{
		Endpoint:       ep,
		Name:           pc.Name,
		Format:         pc.Format,
		PropagateTrace: pc.PropagateTrace,
		Origin:         origin,
		ChatURL:        ep.URLs[upstream.RouteChat],
		Headers:        ep.Extra,
		MaxConcurrency: pc.MaxConcurrency,
		QueueBudget:    orDefault(time.Duration(pc.QueueBudget), opts.DefaultQueueBudget),
		ConnectTimeout: orDefault(time.Duration(pc.Timeouts.Connect), routes.DefaultConnectTimeout),
		FirstByte:      orDefault(time.Duration(pc.Timeouts.FirstByte), opts.DefaultFirstByte),
		Idle:           pc.Timeouts.IdleTimeout(),
		Total:          orDefault(time.Duration(pc.Timeouts.Total), routes.DefaultTotalTimeout),
		CommitEvents:   max(pc.StreamCommit.Events, 1),
		CommitWithin:   time.Duration(pc.StreamCommit.Within),
		Retry:          Retry{Attempts: pc.Retry.Attempts, Backoff: time.Duration(pc.Retry.Backoff), MaxWait: time.Duration(pc.Retry.MaxWait)},
		Health: health.Settings{
			Failures:     pc.Health.Failures,
			Cooldown:     time.Duration(pc.Health.Cooldown),
			MaxCooldown:  time.Duration(pc.Health.MaxCooldown),
			AuthCooldown: time.Duration(pc.Health.AuthCooldown),
		},
	}
	// A probe is resolved at the attempt's first byte sent or its failure;
	// only a bug loses one. Its lease outlasts the longest legitimate
	// attempt (a non-streaming answer may take the whole total timeout).
	prov.Health.ProbeLease = prov.QueueBudget + prov.ConnectTimeout + max(prov.FirstByte, prov.Total) + 5*time.Second
	keys := pc.APIKeys
	switch ep.Auth.Style {
	case upstream.AuthNone:
		keys = []secret.String{secret.New("")} // one target, no key
	case upstream.AuthGoogle:
		// One target, the service account: its id (a digest of the
		// "key") follows the account, never the private key itself.
		keys = []secret.String{secret.New("sa:" + pc.Credentials.ClientEmail)}
	case upstream.AuthAWS:
		// One target, the AWS identity: its id is a digest of the access
		// key id (or of the chain), never of the secret key.
		keys = []secret.String{secret.New("aws:" + pc.AWS.AccessKeyID.Reveal())}
	}
	for i, k := range keys {
		fp := sha256.Sum256([]byte(k.Reveal()))
		keyID := fmt.Sprintf("key%d-%s", i, hex.EncodeToString(fp[:4]))
		switch ep.Auth.Style {
		case upstream.AuthNone:
			keyID = "nokey"
		case upstream.AuthGoogle:
			keyID = "sa-" + hex.EncodeToString(fp[:4])
		case upstream.AuthAWS:
			keyID = "aws-" + hex.EncodeToString(fp[:4])
		}
		id := sha256.Sum256([]byte(prov.Name + "\x00" + origin + "\x00" + hex.EncodeToString(fp[:])))
		t := &Target{ID: hex.EncodeToString(id[:8]), Provider: prov, KeyID: keyID, Key: k}
		prov.Targets = append(prov.Targets, t)
	}
	return prov, nil
}

// authOf resolves the routes file's auth (validated, default filled in).
func authOf(a routes.AuthConfig) upstream.Auth {
	switch a.Style {
	case routes.AuthXAPIKey:
		return upstream.Auth{Style: upstream.AuthXAPIKey}
	case routes.AuthNone:
		return upstream.Auth{Style: upstream.AuthNone}
	case routes.AuthGoogleServiceAccount:
		return upstream.Auth{Style: upstream.AuthGoogle} // Tokens set by resolveProvider
	case routes.AuthAWSSigV4:
		return upstream.Auth{Style: upstream.AuthAWS} // AWS set by resolveProvider
	case routes.AuthHeader:
		return upstream.Auth{Style: upstream.AuthHeader, Header: a.Header}
	}
	return upstream.Auth{Style: upstream.AuthBearer}
}

func orDefault(v, def time.Duration) time.Duration {
	if v > 0 {
		return v
	}
	return def
}

// HealthKeys is the set of the health entries the planner plans, by
// health.Entry.Key: what a reload keeps of the health it shares.
func (p *Planner) HealthKeys() map[string]bool {
	keys := map[string]bool{}
	for _, rt := range p.routes {
		for _, tiers := range rt.tiers {
			for _, tier := range tiers {
				for _, e := range tier {
					for _, h := range e.health {
						keys[h.Key()] = true
					}
				}
			}
		}
	}
	return keys
}

// Models lists the configured model names in file order.
func (p *Planner) Models() []string { return p.models }

// Providers lists the resolved providers in file order.
func (p *Planner) Providers() []*Provider { return p.providers }

// Policy is what a model route sets for a request as a whole.
type Policy struct {
	Deadline time.Duration // 0: none
	Hedge    Hedge
	Resume   int // continuations a cut stream may start; 0: off
	// TokensEstimate is the output a request without max_tokens is
	// expected to produce: its budget reservation (max_tokens_estimate).
	TokensEstimate int
	// Cache is the route's response cache (docs/cache.md); nil: off.
	Cache *routes.CacheConfig
}

// Hedge is a route's hedging: start the next candidate too once the running
// attempt has not committed after After, or after the Quantile of its
// target's first-byte latency; at most Max extra attempts at once. The zero
// value is off.
type Hedge struct {
	After    time.Duration
	Quantile float64
	Max      int
}

// On reports whether hedging is configured.
func (h Hedge) On() bool { return h.Max > 0 }

// Plan orders the candidates for one request of model.
func (p *Planner) Plan(model string) ([]Candidate, error) {
	_, cs, err := p.PlanPolicy(model)
	return cs, err
}

// PlanPolicy is Plan that also returns the route's policy.
func (p *Planner) PlanPolicy(model string) (Policy, []Candidate, error) {
	return p.PlanRoute(model, upstream.RouteChat)
}

// PlanRoute plans a request of the client route cr: only the candidates
// whose provider format can serve it (ErrRouteNotServed when none can).
func (p *Planner) PlanRoute(model string, cr upstream.Route) (Policy, []Candidate, error) {
	rt := p.routes[model]
	if rt == nil {
		return Policy{}, nil, ErrModelNotFound
	}
	if rt.size[cr] == 0 {
		return Policy{}, nil, ErrRouteNotServed
	}
	return Policy{Deadline: rt.deadline, Hedge: rt.hedge, Resume: rt.resume, TokensEstimate: rt.tokens, Cache: rt.cache}, p.plan(rt, cr), nil
}

func (p *Planner) plan(rt *route, cr upstream.Route) []Candidate {
	out := make([]Candidate, 0, rt.size[cr])
	var order [8]*entry // most tiers are small; avoids an allocation
	for _, tier := range rt.tiers[cr] {
		drawn := append(order[:0], tier...)
		p.shuffleWeighted(drawn)
		first := len(out)
		for _, e := range drawn {
			n := len(e.provider.Targets)
			start := int((e.rotation.Add(1) - 1) % uint64(n))
			for k := 0; k < n; k++ {
				ki := (start + k) % n
				out = append(out, Candidate{
					Index:  len(out),
					ID:     e.ids[ki],
					Route:  rt.name,
					Target: e.provider.Targets[ki],
					Model:  e.model,
					Health: e.health[ki],
					Price:  e.price,
				})
			}
		}
		if rt.leastLatency {
			byLatency(out[first:])
			for i := first; i < len(out); i++ {
				out[i].Index = i
			}
		}
	}
	return out
}

// byLatency orders one tier's candidates by their (target, model)'s first-byte
// EWMA: targets without recent samples first (so every target gets
// measured, and one passed over is measured again), then the fastest. The sort is stable over the weighted draw, so weight
// breaks ties. Tiers are a handful of candidates: insertion sort, no
// allocation.
func byLatency(cs []Candidate) {
	type key struct {
		d  time.Duration
		ok bool
	}
	var buf [16]key
	keys := buf[:0]
	for i := range cs {
		d, ok := cs[i].Health.CurrentEWMA()
		keys = append(keys, key{d, ok})
	}
	less := func(a, b key) bool { return !a.ok && b.ok || a.ok && b.ok && a.d < b.d }
	for i := 1; i < len(cs); i++ {
		for j := i; j > 0 && less(keys[j], keys[j-1]); j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
			cs[j], cs[j-1] = cs[j-1], cs[j]
		}
	}
}

// shuffleWeighted orders es by a weighted random draw without replacement:
// each position is drawn among the remaining entries with probability
// proportional to weight.
func (p *Planner) shuffleWeighted(es []*entry) {
	if len(es) < 2 {
		return
	}
	total := 0
	for _, e := range es {
		total += e.weight
	}
	for i := 0; i < len(es)-1; i++ {
		r := p.intN(total)
		j := i
		for ; j < len(es)-1; j++ {
			r -= es[j].weight
			if r < 0 {
				break
			}
		}
		es[i], es[j] = es[j], es[i]
		total -= es[i].weight
	}
}

func (p *Planner) intN(n int) int {
	if p.rnd == nil {
		return rand.IntN(n)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rnd.IntN(n)
}
