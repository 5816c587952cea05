package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"strings"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/budget"
	"github.com/llmgw/gateway/internal/quota"
	"github.com/llmgw/gateway/internal/routes"
)

// ClientKeys authenticates client bearer tokens against the SHA-256 digests
// of the routes file; the tokens themselves are never stored.
type ClientKeys struct {
	clients []clientKey
	limits  map[string]clientLimits // by client name; only clients with a limit
}

type clientKey struct {
	name     string
	digest   [sha256.Size]byte
	priority admission.Priority
}

// limitsOf is the limits of the client named name (none when absent).
func (ck *ClientKeys) limitsOf(name string) clientLimits {
	if ck == nil {
		return clientLimits{}
	}
	return ck.limits[name]
}

// NewClientKeys returns nil when no clients are configured (the API is open).
func NewClientKeys(cfg []routes.ClientConfig) *ClientKeys {
	if len(cfg) == 0 {
		return nil
	}
	ck := &ClientKeys{}
	for _, c := range cfg {
		var k clientKey
		k.name = c.Name
		raw, _ := hex.DecodeString(c.KeySHA256) // validated at load
		copy(k.digest[:], raw)
		k.priority, _ = admission.ParsePriority(c.Priority)
		ck.clients = append(ck.clients, k)
		lim := clientLimits{concurrency: c.MaxConcurrency,
			rates: quota.Limits{RequestsPerMinute: c.RequestsPerMinute, TokensPerMinute: c.TokensPerMinute},
			team:  c.Team, costInUsage: c.CostInUsage}
		if c.Budget != nil || c.Team != "" {
			lim.owners = append(lim.owners, budget.Owner{Kind: budget.Client, Name: c.Name})
			if c.Team != "" {
				lim.owners = append(lim.owners, budget.Owner{Kind: budget.Team, Name: c.Team})
			}
		}
		if lim.concurrency > 0 || lim.rates.Any() || lim.team != "" || lim.costInUsage || c.Budget != nil {
			if ck.limits == nil {
				ck.limits = map[string]clientLimits{}
			}
			ck.limits[c.Name] = lim
		}
	}
	return ck
}

// bearer is the token of an Authorization header, trimmed; false when
// there is none.
func bearer(authorization string) (string, bool) {
	token, found := strings.CutPrefix(authorization, "Bearer ")
	token = strings.TrimSpace(token)
	return token, found && token != ""
}

// match finds the client whose digest is sum. Every configured digest is
// compared in constant time, so the time taken does not say which client
// came close.
func (ck *ClientKeys) match(sum *[sha256.Size]byte) (name string, ceiling admission.Priority, ok bool) {
	match := -1
	for i := range ck.clients {
		if subtle.ConstantTimeCompare(sum[:], ck.clients[i].digest[:]) == 1 {
			match = i
		}
	}
	if match < 0 {
		return "", 0, false
	}
	return ck.clients[match].name, ck.clients[match].priority, true
}
