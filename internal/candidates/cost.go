package candidates

import (
	"sort"

	"github.com/llmgw/gateway/internal/pricing"
	"github.com/llmgw/gateway/internal/routes"
	"github.com/llmgw/gateway/internal/upstream"
)

// What each attempt cost (docs/cost.md): every planned candidate carries
// the price of its provider and upstream model, resolved once per routes
// load; the walk costs each attempt the provider billed from the usage it
// reported and sums them into the request's cost.

// priceOf resolves the price of model on the provider configured by pc:
// the provider's own prices first, then the table under the vendor of the
// provider's format, by exact model and then without a date suffix. A
// model the format's vendor does not list is looked up under the other
// vendors too, when exactly one lists it: an OpenAI-compatible endpoint
// serving a Gemini model is billed at Gemini's price. nil: unpriced.
func priceOf(pc *routes.ProviderConfig, model string, table *pricing.Table) *pricing.Price {
	for _, m := range []string{model, pricing.BaseModel(model)} {
		if cfg, ok := pc.Prices[m]; ok {
			in, out, cached, write, req := cfg.Values()
			return &pricing.Price{Input: in, Output: out, CachedInput: cached, CacheWrite: write, Request: req,
				Source: "routes file, provider " + pc.Name}
		}
	}
	if table == nil {
		return nil
	}
	if p, ok := table.Lookup(vendorOf(pc.Format), model); ok {
		return &p
	}
	var found *pricing.Price
	for _, v := range table.Vendors() {
		if v == vendorOf(pc.Format) {
			continue
		}
		if p, ok := table.Lookup(v, model); ok {
			if found != nil {
				return nil // listed twice: not ours to guess
			}
			found = &p
		}
	}
	return found
}

// vendorOf names the price table's vendor for a provider format.
func vendorOf(format string) string {
	switch format {
	case upstream.FormatAnthropic:
		return "anthropic"
	default:
		return "openai"
	}
}

// pricedUsage is an upstream usage as the price table counts it.
func pricedUsage(u upstream.Usage) pricing.Usage {
	return pricing.Usage{Input: u.PromptTokens, Output: u.CompletionTokens, CachedInput: u.CachedTokens,
		CacheWrite: u.CacheWriteTokens, Reasoning: u.ReasoningTokens}
}

// spent is what a request's attempts cost so far.
type spent struct {
	usd     float64
	unknown bool // an attempt the provider billed has no price or no usage
}

// costRow puts the usage of the attempt on candidate i on its row and, when
// its price is known, the attempt's cost, which it adds to the request's.
// has false means the provider billed the attempt but its usage is
// unknown: the request's cost is unknown too.
func (w *walk) costRow(i int, u upstream.Usage, has, estimated bool) {
	row := &w.rows[i]
	if !has {
		w.spent.unknown = true
		return
	}
	row.HasUsage, row.UsageEstimated = true, estimated
	row.PromptTokens, row.CompletionTokens = u.PromptTokens, u.CompletionTokens
	row.CachedTokens, row.CacheWriteTokens, row.ReasoningTokens = u.CachedTokens, u.CacheWriteTokens, u.ReasoningTokens
	c := &w.req.Candidates[i]
	if c.Price == nil {
		w.spent.unknown = true
		if w.r.Observe != nil {
			w.r.Observe.Billed(c, w.req.Team, u, 0, false)
		}
		return
	}
	row.HasCost, row.CostUSD = true, c.Price.Cost(pricedUsage(u))
	if w.r.Observe != nil {
		w.r.Observe.Billed(c, w.req.Team, u, row.CostUSD, true)
	}
	w.spent.usd += row.CostUSD
	if estimated {
		w.estimated = true
	}
}

// costCut costs candidate i's attempt a, cut after its commit point: from
// the usage the provider sent before the cut, else from an estimate
// flagged usage_estimated: the request body's bytes / 4 for the prompt,
// one token per event relayed for the output (a chat chunk carries about
// one token).
func (w *walk) costCut(a *Attempt) {
	if a.rd != nil && a.events != nil {
		if u, ok := a.rd.Usage(); ok {
			w.costRow(a.i, u, true, false)
			return
		}
	}
	est := upstream.Usage{PromptTokens: int64(a.promptBytes / 4), CompletionTokens: int64(a.outEvents)}
	est.TotalTokens = est.PromptTokens + est.CompletionTokens
	w.costRow(a.i, est, true, true)
}

// spentUSD is the request's cost so far; ok is false when some attempt's
// cost is unknown (settler).
func (w *walk) spentUSD() (usd float64, ok bool) { return w.spent.usd, !w.spent.unknown }

// Unpriced lists the provider/model pairs the planner routes to without a
// price, sorted: check-config and the load log name them.
func (p *Planner) Unpriced() []string {
	seen := map[string]bool{}
	for _, rt := range p.routes {
		for _, tiers := range rt.tiers {
			for _, tier := range tiers {
				for _, e := range tier {
					if e.price == nil {
						seen[e.provider.Name+"/"+e.model] = true
					}
				}
			}
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Cost is what a non-stream answer read whole before the commit point
// cost: the relay sends it as x-gateway-cost-usd. ok is false for
// streams, bodies too large to hold, answers without usage and unpriced
// models.
func (a *Attempt) Cost() (usd float64, ok bool) {
	if a.events != nil || a.state != stDrained {
		return 0, false
	}
	return a.CostSoFar()
}

// CostSoFar is the request's cost with the committed attempt's usage read
// so far: a stream's once its usage event went by (the relay puts it in
// that event for a client with cost_in_usage). It includes what the
// request's earlier attempts cost, as its record does.
func (a *Attempt) CostSoFar() (usd float64, ok bool) {
	if a.rd == nil {
		return 0, false
	}
	price := a.req.Candidates[a.i].Price
	if price == nil {
		return 0, false
	}
	u, has := a.UsageSoFar()
	if a.st != nil {
		u, has = a.rd.Usage() // this part's: a cut part's cost is in spentUSD already
	}
	if !has {
		return 0, false
	}
	prior, known := a.s.spentUSD()
	if !known {
		return 0, false
	}
	return prior + price.Cost(pricedUsage(u)), true
}
