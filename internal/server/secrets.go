package server

import (
	"net/textproto"
	"net/url"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/llmgw/gateway/internal/candidates"
	"github.com/llmgw/gateway/internal/config"
)

// publicHeaders are provider headers whose values are protocol settings,
// not credentials: redacting "2023-06-01" wherever it appears would only
// blank dates out of logs and records.
var publicHeaders = map[string]bool{
	"Anthropic-Version": true, "Anthropic-Beta": true, "Content-Type": true,
	"Accept": true, "User-Agent": true,
}

// publicQuery are query parameters whose values are not credentials
// (Azure's api-version); others, like Google's key=, may well be.
var publicQuery = map[string]bool{"api-version": true}

// secretsOf lists every secret value cfg and routes hold: each provider's
// API keys, its header and query values (an OpenAI-Organization, a ?key=),
// the admin token and the passwords of the database and Redis URLs. The
// Redactor removes them from records, relayed provider errors, admin
// answers and logs.
func secretsOf(cfg config.Config, routes *candidates.Routes) []string {
	out := []string{cfg.AdminToken.Reveal(), dsnPassword(cfg.DatabaseURL.Reveal()), urlPassword(cfg.RedisURL.Reveal())}
	if routes != nil {
		for _, p := range routes.Providers {
			for _, k := range p.APIKeys {
				out = append(out, k.Reveal())
			}
			for name, v := range p.Headers {
				if !publicHeaders[textproto.CanonicalMIMEHeaderKey(name)] {
					out = append(out, v)
				}
			}
			for name, v := range p.Query {
				if !publicQuery[strings.ToLower(name)] {
					out = append(out, v)
				}
			}
		}
	}
	return out
}

// dsnPassword is the password of a Postgres DSN, URL or keyword form, as
// the report writer's driver reads it; "" when it has none.
func dsnPassword(dsn string) string {
	if dsn == "" {
		return ""
	}
	if c, err := pgconn.ParseConfig(dsn); err == nil {
		return c.Password
	}
	return urlPassword(dsn)
}

func urlPassword(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return ""
	}
	p, _ := u.User.Password()
	return p
}

// learnSecrets adds the secrets of cfg and routes to those the Redactor
// knows and swaps the new set in. Values are only added, never dropped: a
// key removed from the routes file by a reload may still be valid at its
// provider, and requests planned before the reload still use it. Called by
// New and, under reload.mu, by Reload before the new routes serve.
func (g *Gateway) learnSecrets(routes *candidates.Routes) {
	for _, v := range secretsOf(g.Config, routes) {
		if v != "" && !slices.Contains(g.reload.secrets, v) {
			g.reload.secrets = append(g.reload.secrets, v)
		}
	}
	g.Redactor.Set(g.reload.secrets...)
}
