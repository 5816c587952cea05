package routes

// The routes file's part of cost and budgets (DESIGN 11.1): per provider
// prices, teams, and the budgets of teams and clients. Computing a cost,
// the default price table and enforcing a budget belong to other packages;
// this file holds the values and their defaults.

// PriceConfig is what one upstream model costs on one provider, in USD per
// million tokens (Request: USD per request). It overrides the default price
// table for that provider and model. Input and Output are required, so
// after Parse they are never nil; the others are nil when left out.
type PriceConfig struct {
	Input  *float64 `yaml:"input"`
	Output *float64 `yaml:"output"`
	// CachedInput prices the input tokens read from the provider's cache
	// (billed at this rate, not also at Input); default Input.
	CachedInput *float64 `yaml:"cached_input"`
	// CacheWrite prices the input tokens written to the cache; default Input.
	CacheWrite *float64 `yaml:"cache_write"`
	// Request is a fixed price per request; default 0.
	Request *float64 `yaml:"request"`
}

// Values returns the prices with the defaults applied: cached_input and
// cache_write take input, request takes 0.
func (p PriceConfig) Values() (input, output, cachedInput, cacheWrite, request float64) {
	get := func(v *float64, def float64) float64 {
		if v == nil {
			return def
		}
		return *v
	}
	input = get(p.Input, 0)
	return input, get(p.Output, 0), get(p.CachedInput, input), get(p.CacheWrite, input), get(p.Request, 0)
}

// Bounds of the prices. They are far above any real price: a bound only
// catches a slip (a price per token written as per million, a stray
// digit) that would otherwise exhaust every budget on the first request.
const (
	MaxTokenPriceUSD   = 10000 // per million tokens
	MaxRequestPriceUSD = 100   // per request
)

// TeamConfig is a team: a name clients join with their team field, and an
// optional budget shared by all of them.
type TeamConfig struct {
	Name   string        `yaml:"name"`
	Budget *BudgetConfig `yaml:"budget"` // nil: no budget
}

// BudgetConfig is a spending limit: USD per window. Windows are UTC
// calendar ones (a week starts on Monday); total never resets.
type BudgetConfig struct {
	USD float64 `yaml:"usd"`
	Per string  `yaml:"per"`
}

// Budget windows.
const (
	BudgetPerDay   = "day"
	BudgetPerWeek  = "week"
	BudgetPerMonth = "month"
	BudgetPerTotal = "total"
)

// budgetWindows lists the windows in the order errors name them.
var budgetWindows = []string{BudgetPerDay, BudgetPerWeek, BudgetPerMonth, BudgetPerTotal}

// MaxBudgetUSD bounds a budget's usd, which is kept in integer
// micro-dollars (with Redis, shared by replicas): 1e9 USD is 1e15, well
// inside int64 and exactly representable in a float64.
const MaxBudgetUSD = 1e9

// Bounds of models[].max_tokens_estimate.
const (
	// DefaultMaxTokensEstimate is the output tokens a request without
	// max_tokens is assumed to produce when its cost is reserved against
	// a budget.
	DefaultMaxTokensEstimate = 1024
	MaxMaxTokensEstimate     = 10_000_000
)

// TokensEstimate is the output tokens the route reserves budget for when
// the client sets no max_tokens: max_tokens_estimate, or
// DefaultMaxTokensEstimate when it is left out.
func (m ModelConfig) TokensEstimate() int {
	if m.MaxTokensEstimate == 0 {
		return DefaultMaxTokensEstimate
	}
	return m.MaxTokensEstimate
}
