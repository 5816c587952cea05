package routes

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// costRoutes sets every field of DESIGN 11.1 the routes file holds.
const costRoutes = `
providers:
  - name: primary
    base_url: http://127.0.0.1:9001/v1
    api_keys: ["sk-one"]
    max_concurrency: 8
    prices:
      up-mini: { input: 0.15, output: 0.6, cached_input: 0.075, cache_write: 0.3, request: 0.001 }
      "gpt-3.5-turbo": { input: 3, output: 6 }   # whole numbers are numbers; no route uses this model yet
models:
  - name: gpt-4o-mini
    max_tokens_estimate: 4096
    candidates: [{ provider: primary, model: up-mini }]
  - name: other
    candidates: [{ provider: primary }]
teams:
  - { name: search, budget: { usd: 500, per: month } }
  - { name: ops }
clients:
  - { name: search-web, key_sha256: "` + "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" + `", team: search, budget: { usd: 20.5, per: day }, cost_in_usage: true }
  - { name: plain, key_sha256: "` + "ab0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855e" + `" }
`

// TestParseCostFields: prices, teams, budgets, cost_in_usage and
// max_tokens_estimate load with the values written, and the accessors
// give the defaults of what is left out (cached_input and cache_write at
// input, request 0, an estimate of 1024 tokens).
func TestParseCostFields(t *testing.T) {
	r, err := Parse([]byte(costRoutes), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	type prices struct{ in, out, cached, write, req float64 }
	values := func(p PriceConfig) prices {
		var v prices
		v.in, v.out, v.cached, v.write, v.req = p.Values()
		return v
	}
	for _, tt := range []struct {
		model string
		want  prices
	}{
		{"up-mini", prices{0.15, 0.6, 0.075, 0.3, 0.001}},
		{"gpt-3.5-turbo", prices{3, 6, 3, 3, 0}},
	} {
		p, ok := r.Providers[0].Prices[tt.model]
		if !ok {
			t.Fatalf("no price for %s: %+v", tt.model, r.Providers[0].Prices)
		}
		if got := values(p); got != tt.want {
			t.Errorf("%s: Values() = %+v, want %+v", tt.model, got, tt.want)
		}
	}
	if got := values(PriceConfig{}); got != (prices{}) {
		t.Errorf("zero PriceConfig.Values() = %+v, want zeros", got)
	}
	if got, want := r.Models[0].TokensEstimate(), 4096; got != want {
		t.Errorf("models[0].TokensEstimate() = %d, want %d", got, want)
	}
	if got, want := r.Models[1].TokensEstimate(), DefaultMaxTokensEstimate; got != want || r.Models[1].MaxTokensEstimate != 0 {
		t.Errorf("models[1].TokensEstimate() = %d (field %d), want %d (field 0)", got, r.Models[1].MaxTokensEstimate, want)
	}
	if len(r.Teams) != 2 || r.Teams[0].Name != "search" || r.Teams[0].Budget == nil ||
		*r.Teams[0].Budget != (BudgetConfig{USD: 500, Per: BudgetPerMonth}) || r.Teams[1].Name != "ops" || r.Teams[1].Budget != nil {
		t.Errorf("teams = %+v", r.Teams)
	}
	c := r.Clients[0]
	if c.Team != "search" || c.Budget == nil || *c.Budget != (BudgetConfig{USD: 20.5, Per: BudgetPerDay}) || !c.CostInUsage {
		t.Errorf("clients[0] = %+v (budget %+v)", c, c.Budget)
	}
	if c := r.Clients[1]; c.Team != "" || c.Budget != nil || c.CostInUsage {
		t.Errorf("clients[1] = %+v, want no team, budget or cost_in_usage", c)
	}
}

// TestParseCostFieldErrors: a mistake in a price, a team or a budget is
// reported like every other: the YAML path (the upstream model's name in
// it), the line, the value where it is no secret, and what is allowed.
func TestParseCostFieldErrors(t *testing.T) {
	const (
		prices  = "    max_concurrency: 4\n" // the backup provider's last line (14)
		client  = `B855" }`                  // the end of clients[0] (line 21)
		model   = "  - name: gpt-4o-mini\n"  // models[0] (line 16)
		teamEnd = "\nteams:\n  - { name: search, budget: { usd: 500, per: month } }\n"
	)
	type edit struct{ from, to string } // applied to errorsBase
	price := func(entry string) edit { return edit{prices, prices + "    prices:\n      " + entry + "\n"} }
	budget := func(b string) edit { return edit{client, `B855", budget: ` + b + ` }`} }
	team := func(t string) edit { return edit{client, client + "\nteams:\n  - " + t} }
	tests := []struct {
		name string
		edit edit
		path string
		want string
	}{
		// Prices (line 16 is the model's entry).
		{name: "price quoted", edit: price(`gpt-4o: { input: "2.5", output: 10 }`), path: "providers[1].prices.gpt-4o.input",
			want: `line 16: providers[1].prices.gpt-4o.input: "2.5" is not a number (write it without quotes)`},
		{name: "price a word", edit: price(`gpt-4o: { input: cheap, output: 10 }`), path: "providers[1].prices.gpt-4o.input",
			want: `line 16: providers[1].prices.gpt-4o.input: "cheap" is not a number`},
		{name: "price a list", edit: price(`gpt-4o: { input: 1, output: [10] }`), path: "providers[1].prices.gpt-4o.output",
			want: `line 16: providers[1].prices.gpt-4o.output: expected a number, got a list`},
		{name: "price negative", edit: price(`gpt-4o: { input: -1, output: 10 }`), path: "providers[1].prices.gpt-4o.input",
			want: `line 16: providers[1].prices.gpt-4o.input must be a number from 0 to 10000 (USD per million tokens), got -1`},
		{name: "price NaN", edit: price(`gpt-4o: { input: .nan, output: 10 }`), path: "providers[1].prices.gpt-4o.input",
			want: `line 16: providers[1].prices.gpt-4o.input must be a number from 0 to 10000 (USD per million tokens), got NaN`},
		{name: "price infinite", edit: price(`gpt-4o: { input: 1, output: 10, cached_input: .inf }`), path: "providers[1].prices.gpt-4o.cached_input",
			want: `line 16: providers[1].prices.gpt-4o.cached_input must be a number from 0 to 10000 (USD per million tokens), got +Inf`},
		{name: "price too large", edit: price(`gpt-4o: { input: 1, output: 10, cache_write: 10000.5 }`), path: "providers[1].prices.gpt-4o.cache_write",
			want: `line 16: providers[1].prices.gpt-4o.cache_write must be a number from 0 to 10000 (USD per million tokens), got 10000.5`},
		{name: "request price too large", edit: price(`gpt-4o: { input: 1, output: 10, request: 101 }`), path: "providers[1].prices.gpt-4o.request",
			want: `line 16: providers[1].prices.gpt-4o.request must be a number from 0 to 100 (USD per request), got 101`},
		{name: "price output missing", edit: price(`gpt-4o: { input: 2.5 }`), path: "providers[1].prices.gpt-4o.output",
			want: `line 16: providers[1].prices.gpt-4o.output is required (USD per million tokens)`},
		{name: "price input missing", edit: price(`gpt-4o: { output: 2.5, cached_input: 1 }`), path: "providers[1].prices.gpt-4o.input",
			want: `line 16: providers[1].prices.gpt-4o.input is required (USD per million tokens)`},
		{name: "price unknown field", edit: price(`gpt-4o: { input: 2.5, output: 10, cached: 1 }`), path: "providers[1].prices.gpt-4o",
			want: `line 16: providers[1].prices.gpt-4o: unknown field "cached" (did you mean "cached_input"?)`},
		{name: "price of a quoted model", edit: price(`"gpt-3.5-turbo": { input: -0.5, output: 1 }`), path: `providers[1].prices["gpt-3.5-turbo"].input`,
			want: `line 16: providers[1].prices["gpt-3.5-turbo"].input must be a number from 0 to 10000 (USD per million tokens), got -0.5`},
		{name: "price of an empty model name", edit: price(`"": { input: 1, output: 1 }`), path: `providers[1].prices[""]`,
			want: `line 16: providers[1].prices[""]: the model name is empty`},
		{name: "prices a list", edit: edit{prices, prices + "    prices: [1]\n"}, path: "providers[1].prices",
			want: `line 15: providers[1].prices: expected a mapping (key: value lines or { ... }), got a list`},

		// Budgets of clients (line 21) and teams (line 23).
		{name: "client budget per bogus", edit: budget(`{ usd: 20, per: fortnight }`), path: "clients[0].budget.per",
			want: `line 21: clients[0].budget.per: "fortnight" is unknown (known: day, week, month, total)`},
		{name: "client budget per misspelt", edit: budget(`{ usd: 20, per: monht }`), path: "clients[0].budget.per",
			want: `line 21: clients[0].budget.per: "monht" is unknown (known: day, week, month, total) (did you mean "month"?)`},
		{name: "client budget per missing", edit: budget(`{ usd: 20 }`), path: "clients[0].budget.per",
			want: `line 21: clients[0].budget.per is required (known: day, week, month, total)`},
		{name: "client budget usd negative", edit: budget(`{ usd: -5, per: day }`), path: "clients[0].budget.usd",
			want: `line 21: clients[0].budget.usd must be a number above 0 and at most 1000000000 (USD), got -5`},
		{name: "client budget usd missing", edit: budget(`{ per: day }`), path: "clients[0].budget.usd",
			want: `line 21: clients[0].budget.usd is required: the limit in USD`},
		{name: "client budget a number", edit: budget(`20`), path: "clients[0].budget",
			want: `line 21: clients[0].budget: expected a mapping (key: value lines or { ... }), got a number`},
		{name: "client budget unknown field", edit: budget(`{ usd: 1, per: day, window: x }`), path: "clients[0].budget",
			want: `line 21: clients[0].budget: unknown field "window"`},
		{name: "team budget usd 0", edit: team(`{ name: search, budget: { usd: 0, per: month } }`), path: "teams[0].budget.usd",
			want: `line 23: teams[0].budget.usd must be a number above 0 and at most 1000000000 (USD), got 0`},
		{name: "team budget usd too large", edit: team(`{ name: search, budget: { usd: 1e10, per: month } }`), path: "teams[0].budget.usd",
			want: `line 23: teams[0].budget.usd must be a number above 0 and at most 1000000000 (USD), got 10000000000`},
		{name: "team budget usd quoted", edit: team(`{ name: search, budget: { usd: "500", per: month } }`), path: "teams[0].budget.usd",
			want: `line 23: teams[0].budget.usd: "500" is not a number (write it without quotes)`},
		{name: "team budget usd NaN", edit: team(`{ name: search, budget: { usd: .NaN, per: month } }`), path: "teams[0].budget.usd",
			want: `line 23: teams[0].budget.usd must be a number above 0 and at most 1000000000 (USD), got NaN`},
		{name: "team budget per bogus", edit: team(`{ name: search, budget: { usd: 500, per: year } }`), path: "teams[0].budget.per",
			want: `line 23: teams[0].budget.per: "year" is unknown (known: day, week, month, total)`},

		// Teams.
		{name: "duplicate team", edit: team("{ name: search }\n  - { name: search, budget: { usd: 1, per: total } }"), path: "teams[1].name",
			want: `line 24: teams[1].name: "search" is already used by teams[0]`},
		{name: "team without a name", edit: team(`{ budget: { usd: 1, per: total } }`), path: "teams[0].name",
			want: `line 23: teams[0].name is required`},
		{name: "teams a mapping", edit: edit{client, client + "\nteams: { search: {} }"}, path: "teams",
			want: `line 22: teams: expected a list (- item lines or [ ... ]), got a mapping`},
		{name: "unknown team, near miss", edit: edit{client, `B855", team: serch }` + teamEnd}, path: "clients[0].team",
			want: `line 21: clients[0].team: "serch" is not a configured team (did you mean "search"?)`},
		{name: "unknown team", edit: edit{client, `B855", team: billing }` + teamEnd}, path: "clients[0].team",
			want: `line 21: clients[0].team: "billing" is not a configured team (configured: search)`},
		{name: "unknown team without teams", edit: edit{client, `B855", team: search }`}, path: "clients[0].team",
			want: `line 21: clients[0].team: "search" is not a configured team (the file configures no teams)`},
		{name: "empty team", edit: edit{client, `B855", team: "" }`}, path: "clients[0].team",
			want: `line 21: clients[0].team is empty (leave it out for no team)`},
		{name: "cost_in_usage not a bool", edit: edit{client, `B855", cost_in_usage: yes }`}, path: "clients[0].cost_in_usage",
			want: `line 21: clients[0].cost_in_usage: "yes" is not true or false`},

		// max_tokens_estimate (line 17).
		{name: "max_tokens_estimate 0", edit: edit{model, model + "    max_tokens_estimate: 0\n"}, path: "models[0].max_tokens_estimate",
			want: `line 17: models[0].max_tokens_estimate must be between 1 and 10000000, got 0`},
		{name: "max_tokens_estimate negative", edit: edit{model, model + "    max_tokens_estimate: -1\n"}, path: "models[0].max_tokens_estimate",
			want: `line 17: models[0].max_tokens_estimate must be between 1 and 10000000, got -1`},
		{name: "max_tokens_estimate too large", edit: edit{model, model + "    max_tokens_estimate: 10000001\n"}, path: "models[0].max_tokens_estimate",
			want: `line 17: models[0].max_tokens_estimate must be between 1 and 10000000, got 10000001`},
		{name: "max_tokens_estimate fractional", edit: edit{model, model + "    max_tokens_estimate: 1.5\n"}, path: "models[0].max_tokens_estimate",
			want: `line 17: models[0].max_tokens_estimate: "1.5" is not a whole number`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := strings.Replace(errorsBase, tt.edit.from, tt.edit.to, 1)
			if src == errorsBase {
				t.Fatalf("test edit %q did not apply", tt.edit.from)
			}
			_, err := Parse([]byte(src), env(errorsEnv()))
			if err == nil {
				t.Fatalf("no error for:\n%s", src)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("error\n got: %s\nwant: %s", got, tt.want)
			}
			var fe *FieldError
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &fe) {
				t.Fatalf("error %T %v is not a *FieldError matching ErrInvalid", err, err)
			}
			if fe.Path != tt.path {
				t.Errorf("Path = %q, want %q", fe.Path, tt.path)
			}
		})
	}
}

// TestPriceBounds: the bounds themselves are accepted (0 is a free model,
// and a whole number is a number), so a bound is a limit, not a gap.
func TestPriceBounds(t *testing.T) {
	src := strings.Replace(errorsBase, "    max_concurrency: 4\n", "    max_concurrency: 4\n    prices:\n"+
		"      free: { input: 0, output: 0, request: 0 }\n"+
		"      dear: { input: 10000, output: 10000, cached_input: 10000, cache_write: 10000, request: 100 }\n", 1)
	src += "teams: [{ name: t, budget: { usd: 1000000000, per: week } }, { name: u, budget: { usd: 0.000001, per: total } }]\n"
	r, err := Parse([]byte(src), env(errorsEnv()))
	if err != nil {
		t.Fatal(err)
	}
	in, out, cached, write, req := r.Providers[1].Prices["dear"].Values()
	if in != MaxTokenPriceUSD || out != MaxTokenPriceUSD || cached != MaxTokenPriceUSD || write != MaxTokenPriceUSD || req != MaxRequestPriceUSD {
		t.Errorf("dear = %v %v %v %v %v", in, out, cached, write, req)
	}
	if got := r.Teams[0].Budget.USD; got != MaxBudgetUSD || math.IsNaN(got) {
		t.Errorf("teams[0].budget.usd = %v", got)
	}
}
