package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/llmgw/gateway/internal/pricing"
	"github.com/llmgw/gateway/internal/routes"
	"github.com/llmgw/gateway/internal/server"
)

// issue 30, done-when 5: a malformed price or budget names its field at load
// and at reload, and a refused reload leaves the routes in service serving,
// at their prices.

const reloadCostToken = "sk-reload-cost-SENTINEL"

// pricedLine is the served model's price in pricedRoutes; the edits below
// replace it or the lines after it.
const pricedLine = "up-primary-mini: { input: 2, output: 8 }"

// pricedRoutes prices the served model at 2 in, 8 out per million tokens,
// with a team and a client of it. %[1]s is the primary mock's URL.
var pricedRoutes = `
providers:
  - name: primary
    base_url: "%[1]s/v1"
    api_keys: ["${PRIMARY_KEY}"]
    max_concurrency: 8
    timeouts: { first_byte: 2s }
    prices:
      ` + pricedLine + `
models:
  - { name: gpt-4o-mini, candidates: [{ provider: primary, model: up-primary-mini }] }
teams:
  - { name: search }
clients:
  - { name: web, key_sha256: "` + sha(reloadCostToken) + `", team: search }
`

// costedPost sends a chat request as the client and returns the cost header
// and the cost the answer's usage makes at in and out USD per million.
func costedPost(t *testing.T, g *gateway, in, out float64) (header string, want float64) {
	t.Helper()
	resp, body := g.post(t, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`,
		"Authorization", "Bearer "+reloadCostToken)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("request: %d %s", resp.StatusCode, body)
	}
	var v struct {
		Usage struct {
			Prompt     int64 `json:"prompt_tokens"`
			Completion int64 `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &v); err != nil || v.Usage.Prompt == 0 || v.Usage.Completion == 0 {
		t.Fatalf("usage of %s: %v", body, err)
	}
	return resp.Header.Get("X-Gateway-Cost-Usd"), (float64(v.Usage.Prompt)*in + float64(v.Usage.Completion)*out) / 1e6
}

// assertCost checks that a request is answered and costed at in and out.
func assertCost(t *testing.T, g *gateway, in, out float64, what string) {
	t.Helper()
	h, want := costedPost(t, g, in, out)
	got, err := strconv.ParseFloat(h, 64)
	if err != nil || math.Abs(got-want) > 1e-12 {
		t.Fatalf("%s: x-gateway-cost-usd %q, want %v (at %v in, %v out per million)", what, h, want, in, out)
	}
}

// TestReloadRefusesMalformedPriceOrBudget: each malformed price (negative,
// a NaN, a quoted "NaN", an unknown field, a list) and budget (negative
// usd, an unknown per, a team no teams: entry defines) is refused by the
// check every start and check-config runs (server.LoadRoutesFile) and by a
// reload, with a *routes.FieldError naming its path and line; the reload
// leaves /admin/config's digest and keeps serving at the old prices, though
// each bad file also changed the served model's price to 5 and 20. A good
// file then brings the new prices in, which is what the cost check tells
// apart.
func TestReloadRefusesMalformedPriceOrBudget(t *testing.T) {
	g, write := startReloadable(t, setup{routes: pricedRoutes})
	write(pricedRoutes)
	if err := g.Reload(server.TriggerSignal); err != nil {
		t.Fatal(err)
	}
	served := g.ConfigStatus().Digest
	assertCost(t, g, 2, 8, "before any reload")

	newPrice := func(price string) func(string) string {
		return func(s string) string { return strings.Replace(s, pricedLine, "up-primary-mini: "+price, 1) }
	}
	repriced := newPrice("{ input: 5, output: 20 }")
	client := `team: search }`
	for _, tc := range []struct {
		name, path string
		edit       func(string) string
	}{
		{"negative price", "providers[0].prices.up-primary-mini.input", newPrice("{ input: -5, output: 20 }")},
		{"NaN price", "providers[0].prices.up-primary-mini.input", newPrice("{ input: .nan, output: 20 }")},
		{"quoted NaN price", "providers[0].prices.up-primary-mini.input", newPrice(`{ input: "NaN", output: 20 }`)},
		{"infinite price", "providers[0].prices.up-primary-mini.output", newPrice("{ input: 5, output: .inf }")},
		{"unknown price field", "providers[0].prices.up-primary-mini", newPrice("{ input: 5, output: 20, cached: 1 }")},
		{"price of the wrong type", "providers[0].prices.up-primary-mini.output", newPrice("{ input: 5, output: [20] }")},
		{"prices of the wrong type", "providers[0].prices", func(s string) string {
			return strings.Replace(s, "prices:\n      "+pricedLine, "prices: 5", 1)
		}},
		{"negative budget", "clients[0].budget.usd", func(s string) string {
			return strings.Replace(repriced(s), client, `team: search, budget: { usd: -5, per: day } }`, 1)
		}},
		{"unknown budget window", "teams[0].budget.per", func(s string) string {
			return strings.Replace(repriced(s), "{ name: search }", "{ name: search, budget: { usd: 10, per: fortnight } }", 1)
		}},
		{"budget usd of the wrong type", "teams[0].budget.usd", func(s string) string {
			return strings.Replace(repriced(s), "{ name: search }", `{ name: search, budget: { usd: "ten", per: day } }`, 1)
		}},
		{"team not defined", "clients[0].team", func(s string) string {
			return strings.Replace(repriced(s), client, `team: billing }`, 1)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := tc.edit(pricedRoutes)
			if bad == pricedRoutes {
				t.Fatal("the edit did not apply")
			}
			write(bad)
			err := g.Reload(server.TriggerSignal)
			var fe *routes.FieldError
			if !errors.As(err, &fe) || fe.Path != tc.path || fe.Line == 0 || !strings.Contains(err.Error(), tc.path) {
				t.Fatalf("reload: %v, want a FieldError at %s with its line", err, tc.path)
			}
			// The start and check-config read the same file the same way.
			if _, checkErr := server.LoadRoutesFile(g.Config); checkErr == nil || checkErr.Error() != err.Error() {
				t.Fatalf("start/check-config: %v\nreload: %v", checkErr, err)
			}
			cs := g.ConfigStatus()
			if cs.Digest != served || cs.LastError == nil || cs.LastError.Message != err.Error() {
				t.Fatalf("/admin/config digest %s (served %s), last_error %+v", cs.Digest, served, cs.LastError)
			}
			code, b := g.get(t, "/admin/config", true)
			if code != http.StatusOK || !strings.Contains(string(b), tc.path) {
				t.Fatalf("/admin/config %d does not name %s: %s", code, tc.path, b)
			}
			assertCost(t, g, 2, 8, "after the refused reload")
		})
	}
	write(repriced(pricedRoutes))
	if err := g.Reload(server.TriggerSignal); err != nil {
		t.Fatal(err)
	}
	assertCost(t, g, 5, 20, "after the good reload")
}

// pricesRoutes leaves the model's price to the price table.
var pricesRoutes = `
providers:
  - name: primary
    base_url: "%[1]s/v1"
    api_keys: ["${PRIMARY_KEY}"]
    max_concurrency: 8
models:
  - { name: gpt-4o-mini, candidates: [{ provider: primary, model: up-primary-mini }] }
clients:
  - { name: web, key_sha256: "` + sha(reloadCostToken) + `" }
`

// TestPricesFileRefused: GATEWAY_PRICES_FILE malformed (a field named by
// vendor.model.field and line) or over its 4 MiB bound refuses the start
// (server.New, and LoadRoutesFile that serve and check-config run) and a
// reload, which leaves the table in service pricing the answers, though the
// refused file also repriced the served model.
func TestPricesFileRefused(t *testing.T) {
	dir := t.TempDir()
	prices := filepath.Join(dir, "prices.yaml")
	writePrices := func(b []byte) {
		t.Helper()
		if err := os.WriteFile(prices+".tmp", b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(prices+".tmp", prices); err != nil {
			t.Fatal(err)
		}
	}
	writePrices([]byte("openai:\n  up-primary-mini: { input: 2, output: 8 }\n"))
	g, write := startReloadable(t, setup{routes: pricesRoutes, env: map[string]string{"GATEWAY_PRICES_FILE": prices}})
	write(pricesRoutes)
	if err := g.Reload(server.TriggerSignal); err != nil {
		t.Fatal(err)
	}
	assertCost(t, g, 2, 8, "at start")

	bigComment := append([]byte("openai:\n  up-primary-mini: { input: 5, output: 20 }\n# "), bytes.Repeat([]byte("x"), pricing.MaxFileBytes)...)
	for i, tc := range []struct {
		name  string
		file  []byte
		check func(error) bool
		want  string // in the error
	}{
		{"a malformed price", []byte("openai:\n  up-primary-mini: { input: 5, output: 20 }\n  other: { input: 1, output: \"NaN\" }\n"),
			func(err error) bool {
				var fe *pricing.FieldError
				return errors.As(err, &fe) && fe.Path == "openai.other.output" && fe.Line == 3
			}, `line 3: openai.other.output: "NaN" is not a number`},
		{"a negative price", []byte("openai:\n  up-primary-mini: { input: -5, output: 20 }\n"),
			func(err error) bool {
				var fe *pricing.FieldError
				return errors.As(err, &fe) && fe.Path == "openai.up-primary-mini.input"
			}, "openai.up-primary-mini.input: must be a number from 0 to 10000, got -5"},
		{"an unknown field", []byte("openai:\n  up-primary-mini: { input: 5, output: 20, cache_read: 1 }\n"),
			func(err error) bool {
				var fe *pricing.FieldError
				return errors.As(err, &fe) && fe.Path == "openai.up-primary-mini.cache_read"
			}, "openai.up-primary-mini.cache_read: is not a price field"},
		{"a file over 4 MiB", bigComment, func(err error) bool { return errors.Is(err, pricing.ErrTooLarge) }, "larger than 4 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			writePrices(tc.file)
			// The routes file must change too: a reload of the same
			// routes bytes reads nothing again.
			write(pricesRoutes + strings.Repeat("#\n", i+1))
			err := g.Reload(server.TriggerSignal)
			if err == nil || !tc.check(err) || !strings.Contains(err.Error(), "GATEWAY_PRICES_FILE "+prices) ||
				!strings.Contains(err.Error(), tc.want) {
				t.Fatalf("reload: %v, want it to name %q", err, tc.want)
			}
			if _, checkErr := server.LoadRoutesFile(g.Config); checkErr == nil || !tc.check(checkErr) {
				t.Fatalf("check-config: %v", checkErr)
			}
			rt, perr := routes.Parse([]byte(strings.ReplaceAll(pricesRoutes, "%[1]s", g.PrimaryURL)), os.LookupEnv)
			if perr != nil {
				t.Fatal(perr)
			}
			if gw, err := server.New(context.Background(), g.Config, rt, slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil || !tc.check(err) {
				if gw != nil {
					gw.Close(context.Background())
				}
				t.Fatalf("start with the file: %v", err)
			}
			if cs := g.ConfigStatus(); cs.LastError == nil || cs.LastError.Message != err.Error() {
				t.Fatalf("last_error %+v", cs.LastError)
			}
			assertCost(t, g, 2, 8, "after the refused reload")
		})
	}
	// The routes file back to the one in service, the prices file fixed:
	// SIGHUP reads the prices again (before, the unchanged routes file
	// made it a no-op, and a prices file fixed alone was never read).
	writePrices([]byte("openai:\n  up-primary-mini: { input: 5, output: 20 }\n"))
	write(pricesRoutes)
	if err := g.Reload(server.TriggerSignal); err != nil {
		t.Fatal(err)
	}
	assertCost(t, g, 5, 20, "after the good reload")
}
