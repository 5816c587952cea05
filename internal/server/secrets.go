package server

import (
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/llmgw/gateway/internal/config"
	"github.com/llmgw/gateway/internal/routes"
)

// secretName reports whether a provider header or query parameter named
// name holds a credential or an account identifier: its value is then
// redacted wherever it, its head or its tail appears. Other values (a
// version, a beta flag, an HTTP-Referer, a title) are settings: redacting
// the 8-byte head of "https://myapp.example" would blank every URL out of
// the logs and records.
func secretName(name string) bool {
	n := strings.ToLower(name)
	switch n {
	case "openai-organization", "openai-project", "cookie", "sig":
		return true
	}
	for _, w := range []string{"key", "token", "secret", "password", "auth", "signature", "credential"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// secretsOf lists every secret value cfg and routes hold: each provider's
// API keys, its header and query values (an OpenAI-Organization, a ?key=),
// the admin token and the passwords of the database and Redis URLs. The
// Redactor removes them from records, relayed provider errors, admin
// answers and logs.
func secretsOf(cfg config.Config, routes *routes.Routes) []string {
	out := []string{cfg.AdminToken.Reveal(), cfg.AdminReadToken.Reveal(), dsnPassword(cfg.DatabaseURL.Reveal()), urlPassword(cfg.RedisURL.Reveal())}
	if routes != nil {
		for _, p := range routes.Providers {
			for _, k := range p.APIKeys {
				out = append(out, k.Reveal())
			}
			if sa := p.Credentials; sa != nil {
				// A service account's private key, as the file holds it and
				// as JSON escapes its line breaks, should any text ever
				// quote it.
				out = append(out, sa.PrivateKey, strings.ReplaceAll(sa.PrivateKey, "\n", `\n`))
			}
			// A bedrock provider's static AWS credentials; the access key
			// id too, an account's identifier.
			out = append(out, p.AWS.AccessKeyID.Reveal(), p.AWS.SecretAccessKey.Reveal(), p.AWS.SessionToken.Reveal())
			for name, v := range p.Headers {
				if secretName(name) {
					out = append(out, v)
				}
			}
			for name, v := range p.Query {
				if secretName(name) {
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
func (g *Gateway) learnSecrets(routes *routes.Routes) {
	if g.reload.known == nil {
		g.reload.known = map[string]bool{}
	}
	for _, v := range secretsOf(g.Config, routes) {
		if v != "" && !g.reload.known[v] {
			g.reload.known[v] = true
			g.reload.secrets = append(g.reload.secrets, v)
		}
	}
	g.Redactor.Set(g.reload.secrets...)
}
