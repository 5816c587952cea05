package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmgw/gateway/internal/budget"
	"github.com/llmgw/gateway/internal/candidates"
	"github.com/llmgw/gateway/internal/upstream"
)

// The cost families (docs/cost.md). Labels are bounded by the routes
// file: provider and upstream model names of its routes, its team names
// ("" for a client without a team). Never a key, never a client.

// costFamilies are the counters of what attempts cost.
type costFamilies struct {
	usd      *prometheus.CounterVec
	tokens   *prometheus.CounterVec
	unpriced *prometheus.CounterVec
	refusals *prometheus.CounterVec
}

// Token kinds of gateway_tokens_total.
const (
	TokensInput       = "input"
	TokensOutput      = "output"
	TokensCachedInput = "cached_input"
	TokensCacheWrite  = "cache_write"
	TokensReasoning   = "reasoning"
)

func newCostFamilies() costFamilies {
	return costFamilies{
		usd: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_cost_usd_total",
			Help: "What the attempts the providers billed cost in USD, from their usage and prices, by provider, upstream model and the client's team (\"\" for none). Unpriced models add nothing here.",
		}, []string{"provider", "model", "team"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_tokens_total",
			Help: "Tokens of the attempts the providers billed, by provider, upstream model, team and kind: input (the whole prompt), output (reasoning included), cached_input, cache_write, reasoning.",
		}, []string{"provider", "model", "team", "kind"}),
		unpriced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_cost_unpriced_total",
			Help: "Billed attempts whose model has no price (their cost is unknown), by provider and upstream model.",
		}, []string{"provider", "model"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_budget_refusals_total",
			Help: "Requests refused before any attempt because a budget was used up, by budget: client:NAME or team:NAME.",
		}, []string{"budget"}),
	}
}

func (f costFamilies) collectors() []prometheus.Collector {
	return []prometheus.Collector{f.usd, f.tokens, f.unpriced, f.refusals}
}

// Billed implements candidates.Observer: an attempt the provider billed,
// with its usage and, when priced, its cost.
func (m *Metrics) Billed(c *candidates.Candidate, team string, u upstream.Usage, usd float64, priced bool) {
	prov := c.Target.Provider.Name
	f := m.cost
	for _, t := range [...]struct {
		kind string
		n    int64
	}{{TokensInput, u.PromptTokens}, {TokensOutput, u.CompletionTokens}, {TokensCachedInput, u.CachedTokens},
		{TokensCacheWrite, u.CacheWriteTokens}, {TokensReasoning, u.ReasoningTokens}} {
		if t.n > 0 {
			f.tokens.WithLabelValues(prov, c.Model, team, t.kind).Add(float64(t.n))
		}
	}
	if !priced {
		f.unpriced.WithLabelValues(prov, c.Model).Inc()
		return
	}
	if usd > 0 {
		f.usd.WithLabelValues(prov, c.Model, team).Add(usd)
	}
}

// BudgetRefused implements api.Observer: a request a budget refused, by
// budget ("client:NAME", "team:NAME"; configured budgets only).
func (m *Metrics) BudgetRefused(budget string) { m.cost.refusals.WithLabelValues(budget).Inc() }

// BudgetSource is what the budget gauge reads at scrape time
// (implemented by *budget.Budgets).
type BudgetSource interface {
	Snapshot(ctx context.Context) []budget.Status
}

// budgetCollector exports gateway_budget_remaining_usd{budget} from the
// budgets' snapshot at scrape time: the smallest remaining is what refuses.
type budgetCollector struct {
	src  BudgetSource
	desc *prometheus.Desc
}

func newBudgetCollector(src BudgetSource) *budgetCollector {
	return &budgetCollector{src: src, desc: prometheus.NewDesc("gateway_budget_remaining_usd",
		"What is left of each configured budget in its current window, in USD (reservations of requests in flight counted as spent), by budget: client:NAME or team:NAME.",
		[]string{"budget"}, nil)}
}

func (c *budgetCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *budgetCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	least := map[string]float64{}
	for _, s := range c.src.Snapshot(ctx) {
		l := s.Owner.Label()
		if v, ok := least[l]; !ok || s.RemainingUSD < v {
			least[l] = s.RemainingUSD
		}
	}
	for l, v := range least {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, l)
	}
}

// SetBudgets exports the budgets' remaining amounts; labels for refusals
// of each configured budget start at zero.
func (m *Metrics) SetBudgets(src BudgetSource) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, s := range src.Snapshot(ctx) {
		m.cost.refusals.WithLabelValues(s.Owner.Label())
	}
	m.Registry.MustRegister(newBudgetCollector(src))
}
