package candidates

import (
	"sort"

	"github.com/llmgw/gateway/internal/pricing"
	"github.com/llmgw/gateway/internal/report"
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
	case upstream.FormatGemini, upstream.FormatVertex:
		return "gemini" // Vertex bills Gemini's models at the Gemini API's prices
	case upstream.FormatBedrock:
		return "bedrock" // Bedrock's own ids and prices ("anthropic.claude-…-v1:0")
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
	usd       float64
	unknown   bool // an attempt the provider billed has no price or no usage
	estimated bool // some attempt's usage is an estimate (usage_estimated)
}

// add counts one billed attempt's cost: usd when known.
func (s *spent) add(usd float64, known, estimated bool) {
	s.usd += usd
	s.unknown = s.unknown || !known
	s.estimated = s.estimated || estimated
}

// bill puts the usage of an attempt the provider billed on its row and,
// when the candidate's price is known, the attempt's cost. known is false
// when the cost is not: no usage (has false) or no price. It touches the row
// and the metrics only, so a hedge loser bills its own row's copy on its
// own goroutine (hedging.lost).
func (r *Runner) bill(row *report.Candidate, c *Candidate, team string, u upstream.Usage, has, estimated bool) (usd float64, known bool) {
	if !has {
		return 0, false
	}
	row.HasUsage, row.UsageEstimated = true, estimated
	row.PromptTokens, row.CompletionTokens = u.PromptTokens, u.CompletionTokens
	row.CachedTokens, row.CacheWriteTokens, row.ReasoningTokens = u.CachedTokens, u.CacheWriteTokens, u.ReasoningTokens
	if c.Price == nil {
		if r.Observe != nil {
			r.Observe.Billed(c, team, u, 0, false)
		}
		return 0, false
	}
	row.HasCost, row.CostUSD = true, c.Price.Cost(pricedUsage(u))
	if r.Observe != nil {
		r.Observe.Billed(c, team, u, row.CostUSD, true)
	}
	return row.CostUSD, true
}

// costRow bills the attempt on candidate i from its usage (has false: the
// provider billed it but its usage is unknown, and so is the request's
// cost) and adds it to the request's cost.
func (w *walk) costRow(i int, u upstream.Usage, has, estimated bool) {
	usd, known := w.r.bill(&w.rows[i], &w.req.Candidates[i], w.req.Team, u, has, estimated)
	w.spent.add(usd, known, estimated && has)
}

// costCut bills attempt a, which ended without answering the request: cut
// after its commit point (committed), or failed over or lost to a hedge
// after the provider had started answering (billedUsage). An attempt the
// provider did not bill costs nothing.
func (w *walk) costCut(a *Attempt, committed bool) {
	u, has, estimated, billed := a.billedUsage()
	if !billed {
		if !committed {
			return
		}
		// A body relayed in part and cut: the prompt's estimate.
		u, has, estimated = a.estimate(upstream.Usage{}, false), true, true
	}
	w.costRow(a.i, u, has, estimated)
}

// billedUsage is what the provider billed attempt a, which did not answer
// the request, as far as the gateway can tell (docs/cost.md, "Which attempts
// count"): a stream that sent the client bytes of at least one event (the
// provider was generating), from the usage it sent, else estimated; a body
// read whole, from its usage. Anything else (an error status, a timeout or
// a failure before the first event, a body that broke) is not billed. Call
// it before close: a body's usage is read from the pooled buffer.
func (a *Attempt) billedUsage() (u upstream.Usage, has, estimated, billed bool) {
	if a.resp == nil || a.resp.StatusCode/100 != 2 || a.rd == nil {
		return u, false, false, false
	}
	if a.events == nil {
		if a.state != stDrained && !a.tailRead {
			return u, false, false, false
		}
		u, has = a.UsageSoFar()
		return u, has, false, true
	}
	if a.outEvents == 0 {
		return u, false, false, false
	}
	u, ok := a.rd.Usage() // this part's, for a resumed stream
	if ok && u.CompletionTokens >= int64(a.outEvents) {
		return u, true, false, true // its final usage (OpenAI's comes last)
	}
	// No usage yet, or only the opening count (Anthropic's message_start
	// has the input and one output token): the events stand in for the rest.
	return a.estimate(u, ok), true, true, true
}

// estimate is the usage of an attempt cut before its final usage: the
// input the provider reported (ok), else the request body's bytes / 4; at
// least one output token per event relayed (a chat chunk carries about one).
func (a *Attempt) estimate(seen upstream.Usage, ok bool) upstream.Usage {
	est := seen
	if !ok || est.PromptTokens == 0 {
		est.PromptTokens = int64(a.promptBytes / 4)
	}
	est.CompletionTokens = max(est.CompletionTokens, int64(a.outEvents))
	est.TotalTokens = est.PromptTokens + est.CompletionTokens
	return est
}

// spentUSD is the request's cost so far; ok is false when some attempt's
// cost is unknown (settler). A hedged request's losers, cancelled when it
// was settled, are counted once each has billed its row: they end as soon
// as their upstream reads see the cancellation.
func (w *walk) spentUSD() (usd float64, ok bool) {
	s := w.spent
	if h := w.hedge; h != nil {
		h.losing.Wait()
		h.mu.Lock()
		s.add(h.lostSpent.usd, !h.lostSpent.unknown, h.lostSpent.estimated)
		h.mu.Unlock()
	}
	return s.usd, !s.unknown
}

// usageEstimated reports whether some attempt's usage is an estimate.
func (w *walk) usageEstimated() bool {
	if h := w.hedge; h != nil {
		h.losing.Wait()
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.lostSpent.estimated {
			return true
		}
	}
	return w.spent.estimated
}

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
