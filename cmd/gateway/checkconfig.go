package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"strings"

	"github.com/llmgw/gateway/internal/candidates"
	"github.com/llmgw/gateway/internal/config"
	"github.com/llmgw/gateway/internal/pricing"
	"github.com/llmgw/gateway/internal/routes"
	"github.com/llmgw/gateway/internal/server"
	"github.com/llmgw/gateway/internal/upstream"
	"github.com/llmgw/gateway/internal/upstream/anthropic"
)

const checkConfigUsage = "usage: gateway check-config [routes-file]   (default: $GATEWAY_CONFIG, else gateway.yaml)"

// checkConfigCommand runs `gateway check-config [file]` and returns the exit
// code: 0 when the file loads, 1 when it does not, 2 for a usage mistake.
// The file argument wins over GATEWAY_CONFIG so that any file can be checked
// before it is deployed, without changing the environment.
func checkConfigCommand(cfg config.Config, args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprintln(stdout, checkConfigUsage)
		return 0
	}
	if len(args) > 1 || (len(args) == 1 && strings.HasPrefix(args[0], "-")) {
		fmt.Fprintln(stderr, checkConfigUsage)
		return 2
	}
	fromArg := len(args) == 1
	if fromArg {
		cfg.RoutesFile = args[0]
	}
	if err := checkConfig(cfg, stdout); err != nil {
		fmt.Fprintln(stderr, "gateway:", err)
		if !fromArg && errors.Is(err, fs.ErrNotExist) {
			if _, set := os.LookupEnv("GATEWAY_CONFIG"); !set {
				fmt.Fprintf(stderr, "gateway: %s is the default; pass the file (gateway check-config FILE) or set GATEWAY_CONFIG\n", cfg.RoutesFile)
			}
		}
		return 1
	}
	return 0
}

// checkConfig loads the routes file and prints each provider's settings,
// health included, after defaults (what the gateway will actually use), and
// per model its strategy and the candidates a request would be planned into
// (one draw; weights and latency make later plans differ). A provider's
// stream commit point and a model's deadline and hedging are printed only
// when they differ from the default, so the common file stays short and an
// unusual setting stands out.
//
// It validates with server.LoadRoutesFile, the very function a reload of a
// running gateway uses, so a file that passes here reloads.
func checkConfig(cfg config.Config, out io.Writer) error {
	rf, err := server.LoadRoutesFile(cfg)
	if err != nil {
		return err
	}
	file, planner := rf.Routes, rf.Planner
	fmt.Fprintf(out, "routes file %s: %s, %s, %s\n", cfg.RoutesFile,
		plural(len(file.Providers), "provider"), plural(len(file.Models), "model"), plural(len(file.Clients), "client"))
	var keys []string // to redact from the URLs shown
	for _, pc := range file.Providers {
		for _, k := range pc.APIKeys {
			if s := strings.TrimSpace(k.Reveal()); len(s) >= 4 {
				keys = append(keys, s)
			}
		}
	}
	for _, p := range planner.Providers() {
		idle := "off"
		if p.Idle > 0 {
			idle = p.Idle.String()
		}
		fmt.Fprintf(out, "provider %s: %s keys=%d max_concurrency=%d queue_budget=%s first_byte=%s idle=%s total=%s\n",
			p.Name, p.Origin, len(p.Targets), p.MaxConcurrency, p.QueueBudget, p.FirstByte, idle, p.Total)
		if u := p.Endpoint.URLs[upstream.RouteChat]; unusualPath(u) {
			// A deployment path or a query (Azure's) is part of where
			// requests go; the line above shows only the origin.
			fmt.Fprintf(out, "  url: %s\n", routes.RedactURL(u, keys))
		}
		if ep := p.Endpoint; ep.Format != upstream.FormatOpenAI || ep.Auth.Style != upstream.AuthBearer {
			// Only an unusual wire format or auth gets a line.
			fmt.Fprintf(out, "  format: %s auth: %s", ep.Format, ep.Auth)
			if ep.Format == upstream.FormatAnthropic {
				mt := ep.DefaultMaxTokens
				if mt == 0 {
					mt = anthropic.DefaultMaxTokens
				}
				fmt.Fprintf(out, " default_max_tokens=%d", mt)
			} else if (upstream.GeminiBodies(ep.Format) || ep.Format == upstream.FormatBedrock) && ep.DefaultMaxTokens > 0 {
				// Gemini needs none: shown only when set (maxOutputTokens).
				fmt.Fprintf(out, " default_max_tokens=%d", ep.DefaultMaxTokens)
			}
			if sa := serviceAccountOf(file, p.Name); sa != nil {
				// Which account, and where its tokens come from: a key
				// for the wrong project is the usual mistake. Never the key.
				fmt.Fprintf(out, " service_account=%s token_uri=%s", sa.ClientEmail, sa.TokenURI)
			}
			if s := ep.Auth.AWS; s != nil {
				// Where the signing credentials come from, never which.
				src := "chain"
				if s.Static {
					src = "static"
				}
				fmt.Fprintf(out, " region=%s credentials=%s", s.Region, src)
			}
			fmt.Fprintln(out)
		}
		h := p.Health
		fmt.Fprintf(out, "  health: failures=%d cooldown=%s max_cooldown=%s auth_cooldown=%s\n",
			h.Failures, h.Cooldown, h.MaxCooldown, h.AuthCooldown)
		if r := p.Retry; r.Attempts > 0 {
			fmt.Fprintf(out, "  retry: attempts=%d backoff=%s max_wait=%s\n", r.Attempts, r.Backoff, r.MaxWait)
		} else {
			fmt.Fprintln(out, "  retry: off")
		}
		if p.CommitEvents != 1 || p.CommitWithin != 0 {
			fmt.Fprintf(out, "  stream_commit: events=%d", p.CommitEvents)
			if p.CommitWithin > 0 {
				fmt.Fprintf(out, " within=%s", p.CommitWithin)
			}
			fmt.Fprintln(out)
		}
	}
	models := map[string]*routes.ModelConfig{}
	for i := range file.Models {
		models[file.Models[i].Name] = &file.Models[i]
	}
	for _, m := range planner.Models() {
		policy, plan, _ := planner.PlanPolicy(m)
		// Validation filled in the default strategy.
		fmt.Fprintf(out, "model %s: strategy %s%s\n", m, models[m].Strategy, routePolicy(policy, models[m].Hedge.After, cfg))
		for _, c := range plan {
			fmt.Fprintf(out, "  %d. %s (provider %s, target %s, upstream model %s%s)\n",
				c.Index, c.ID, c.Provider().Name, c.Target.ID, c.Model, priceLine(c.Price))
		}
	}
	if len(file.Clients) == 0 {
		fmt.Fprintln(out, "clients: none, so the API accepts requests without a key")
	}
	if u := planner.Unpriced(); len(u) > 0 {
		fmt.Fprintf(out, "unpriced: %s (they run; their cost is unknown)\n", strings.Join(u, ", "))
	}
	fmt.Fprintf(out, "hold mode: %s\n", cfg.HoldMode)
	return nil
}

// priceLine shows a candidate's price per million tokens; nothing for an
// unpriced one (the "unpriced:" line names those).
func priceLine(p *pricing.Price) string {
	if p == nil {
		return ""
	}
	s := fmt.Sprintf(", $%g in / $%g out", p.Input, p.Output)
	if p.CachedInput != p.Input {
		s += fmt.Sprintf(" / $%g cached", p.CachedInput)
	}
	if p.AsOf != "" {
		s += " as of " + p.AsOf
	}
	return s + " per 1M tokens"
}

// unusualPath reports whether a provider's chat URL is other than the
// conventional {origin}/v1/chat/completions (or /v1/messages) without a
// query, so check-config prints it whole.
func unusualPath(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return true
	}
	return u.RawQuery != "" || (u.Path != "/v1/chat/completions" && u.Path != "/v1/messages")
}

// routePolicy describes a route's deadline and hedging, when set. A
// percentile hedge is shown as written, with the floor the gateway puts
// under it (GATEWAY_HEDGE_MIN_DELAY).
func routePolicy(p candidates.Policy, hedgeAfter string, cfg config.Config) string {
	var b strings.Builder
	if p.Deadline > 0 {
		fmt.Fprintf(&b, ", deadline %s", p.Deadline)
	}
	if h := p.Hedge; h.On() {
		if h.Quantile > 0 {
			fmt.Fprintf(&b, ", hedge after %s (at least %s) max %d",
				strings.ToLower(strings.TrimSpace(hedgeAfter)), cfg.HedgeMinDelay, h.Max)
		} else {
			fmt.Fprintf(&b, ", hedge after %s max %d", h.After, h.Max)
		}
	}
	return b.String()
}

func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// serviceAccountOf is the service-account key read for provider name; nil
// for a provider without one.
func serviceAccountOf(file *routes.Routes, name string) *routes.ServiceAccount {
	for i := range file.Providers {
		if file.Providers[i].Name == name {
			return file.Providers[i].Credentials
		}
	}
	return nil
}
