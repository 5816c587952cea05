// Package pricing owns model prices and the arithmetic of cost
// (docs/cost.md): the price table (the one built in, dated, or a file that
// replaces it), the lookup of a vendor's model with its date suffix
// dropped, and what a usage costs at a price. Prices are public facts read
// from the vendors' pages on a date; every entry says when and where.
//
// It does not know providers, routes or requests: internal/candidates
// resolves each candidate's price (the routes file's prices first) and
// costs its attempts.
package pricing

import (
	"math"
)

// Bounds that keep a hostile or careless number from making a cost
// negative, infinite or overflowing.
const (
	MaxPrice   = 10000         // USD per million tokens
	MaxRequest = 100           // USD per request
	MaxTokens  = 1_000_000_000 // tokens in one count
)

// Price is one model's prices in USD per million tokens, plus a fee per
// request.
type Price struct {
	Input, Output, CachedInput, CacheWrite float64 // USD per 1M tokens
	Request                                float64 // USD per request
	AsOf, Source                           string  // when and where the price was read
}

// Usage is what one attempt consumed. Input is the whole prompt (cached and
// cache-write tokens included, as OpenAI counts prompt_tokens); Output
// includes Reasoning, which is never billed twice.
type Usage struct {
	Input, Output, CachedInput, CacheWrite, Reasoning int64
}

// Cost is what u costs at p in USD: the uncached input at the input price,
// cache reads and writes at theirs, the output (reasoning inside it) at the
// output price, and the request fee. Negative counts count 0, counts are
// clamped to MaxTokens and cache counts to the input, prices to
// [0, MaxPrice]: the result is finite and never negative.
func (p Price) Cost(u Usage) float64 {
	in, out := tokens(u.Input), tokens(u.Output)
	cached := min(tokens(u.CachedInput), in)
	write := min(tokens(u.CacheWrite), in-cached)
	plain := in - cached - write
	usd := (plain*price(p.Input, MaxPrice) + cached*price(p.CachedInput, MaxPrice) +
		write*price(p.CacheWrite, MaxPrice) + out*price(p.Output, MaxPrice)) / 1e6
	return usd + price(p.Request, MaxRequest)
}

func tokens(n int64) float64 {
	if n <= 0 {
		return 0
	}
	return float64(min(n, MaxTokens))
}

func price(v, limit float64) float64 {
	if math.IsNaN(v) || v <= 0 {
		return 0
	}
	return math.Min(v, limit)
}

// Micros is usd in integer micro-dollars, rounded up, so that a budget
// counts at least what was spent; NaN and negatives are 0.
func Micros(usd float64) int64 {
	if math.IsNaN(usd) || usd <= 0 {
		return 0
	}
	m := math.Ceil(usd*1e6 - 1e-6) // a float just above a whole micro-dollar stays on it
	if m >= math.MaxInt64/2 {
		return math.MaxInt64 / 2
	}
	return int64(m)
}
