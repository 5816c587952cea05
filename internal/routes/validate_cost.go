package routes

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// prices validates a provider's prices. The model names are not checked
// against the routes: a price may wait for a route added later.
func (v *validator) prices(p *ProviderConfig, path string) error {
	for _, model := range slices.Sorted(maps.Keys(p.Prices)) {
		pp := childPath(path+".prices", model)
		if strings.TrimSpace(model) == "" {
			return v.fail(pp, ": the model name is empty")
		}
		pc := p.Prices[model]
		for _, f := range []struct {
			name     string
			val      *float64
			required bool
			max      float64
			unit     string
		}{
			{"input", pc.Input, true, MaxTokenPriceUSD, "USD per million tokens"},
			{"output", pc.Output, true, MaxTokenPriceUSD, "USD per million tokens"},
			{"cached_input", pc.CachedInput, false, MaxTokenPriceUSD, "USD per million tokens"},
			{"cache_write", pc.CacheWrite, false, MaxTokenPriceUSD, "USD per million tokens"},
			{"request", pc.Request, false, MaxRequestPriceUSD, "USD per request"},
		} {
			fp := pp + "." + f.name
			if f.val == nil {
				if f.required {
					return v.fail(fp, " is required (%s)", f.unit)
				}
				continue
			}
			// NaN fails both comparisons' negation, so it is caught too.
			if x := *f.val; !(x >= 0 && x <= f.max) {
				return v.fail(fp, " must be a number from 0 to %s (%s), got %s", formatUSD(f.max), f.unit, formatUSD(x))
			}
		}
	}
	return nil
}

// teams validates the teams and returns their names, in file order.
func (v *validator) teams(r *Routes) ([]string, error) {
	seen := map[string]int{}
	var names []string
	for i := range r.Teams {
		t := &r.Teams[i]
		path := fmt.Sprintf("teams[%d]", i)
		// The same rules as a client's name: a team is named in metric
		// labels (team:NAME) and records as written.
		if t.Name == "" {
			return nil, v.fail(path+".name", " is required")
		}
		if first, dup := seen[t.Name]; dup {
			return nil, v.fail(path+".name", ": %s is already used by teams[%d]", quoteShort(t.Name), first)
		}
		seen[t.Name] = i
		names = append(names, t.Name)
		if err := v.budget(t.Budget, path+".budget"); err != nil {
			return nil, err
		}
	}
	return names, nil
}

// clientCost validates a client's team and budget; teams are the names of
// the file's teams.
func (v *validator) clientCost(c *ClientConfig, path string, teams []string) error {
	if _, written := v.lines[path+".team"]; written && c.Team == "" {
		return v.fail(path+".team", " is empty (leave it out for no team)")
	}
	if c.Team != "" && !slices.Contains(teams, c.Team) {
		hint := suggest(c.Team, teams)
		switch {
		case hint != "":
		case len(teams) == 0:
			hint = " (the file configures no teams)"
		default:
			hint = " (configured: " + strings.Join(teams, ", ") + ")"
		}
		return v.fail(path+".team", ": %s is not a configured team%s", quoteShort(c.Team), hint)
	}
	return v.budget(c.Budget, path+".budget")
}

// budget validates a budget block; nil (absent) is no budget.
func (v *validator) budget(b *BudgetConfig, path string) error {
	if b == nil {
		return nil
	}
	if _, written := v.lines[path+".usd"]; !written {
		return v.fail(path+".usd", " is required: the limit in USD")
	}
	if !(b.USD > 0 && b.USD <= MaxBudgetUSD) {
		return v.fail(path+".usd", " must be a number above 0 and at most %s (USD), got %s", formatUSD(MaxBudgetUSD), formatUSD(b.USD))
	}
	switch b.Per {
	case BudgetPerDay, BudgetPerWeek, BudgetPerMonth, BudgetPerTotal:
		return nil
	case "":
		return v.fail(path+".per", " is required (known: %s)", strings.Join(budgetWindows, ", "))
	}
	return v.fail(path+".per", ": %s is unknown (known: %s)%s",
		quoteShort(b.Per), strings.Join(budgetWindows, ", "), suggest(b.Per, budgetWindows))
}

// maxTokensEstimate validates a route's max_tokens_estimate. Written as 0
// it is refused rather than defaulted, as default_max_tokens is.
func (v *validator) maxTokensEstimate(m *ModelConfig, path string) error {
	if _, written := v.lines[path]; written && (m.MaxTokensEstimate < 1 || m.MaxTokensEstimate > MaxMaxTokensEstimate) {
		return v.fail(path, " must be between 1 and %d, got %d", MaxMaxTokensEstimate, m.MaxTokensEstimate)
	}
	return nil
}

// formatUSD writes an amount as a user would: 10000, 0.15, NaN, -Inf.
func formatUSD(x float64) string {
	if math.Abs(x) >= 1e21 || math.IsNaN(x) || math.IsInf(x, 0) {
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	return strconv.FormatFloat(x, 'f', -1, 64)
}
