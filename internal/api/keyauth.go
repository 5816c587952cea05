package api

import (
	"crypto/sha256"
	"net/http"
	"time"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/budget"
	"github.com/llmgw/gateway/internal/keys"
	"github.com/llmgw/gateway/internal/quota"
)

// KeySource is the set of API keys issued through /admin/keys, in memory
// (implemented by *keys.Cache): the request path never asks Postgres.
type KeySource interface {
	Current() *keys.Set
}

// KeySync is where the key set comes from, for /readyz (implemented by
// *keys.Syncer): "loading", "snapshot", "ok" or "stale".
type KeySync interface {
	State() string
}

// keyClient is an API key as the request path uses it: the same model as
// a routes-file client (name, team, priority, limits, budget,
// cost_in_usage) plus the key's model allowlist. Built at the key's first
// request in each loaded set (CompileKey), so later lookups allocate nothing.
type keyClient struct {
	ceiling admission.Priority
	limits  clientLimits
}

// CompileKey is the keys.Compile of the request path: the view of k that
// authenticate hands out.
func CompileKey(k *keys.Key) any {
	kc := &keyClient{}
	kc.ceiling, _ = admission.ParsePriority(k.Priority) // validated when written
	kc.limits = clientLimits{concurrency: k.MaxConcurrency,
		rates: quota.Limits{RequestsPerMinute: k.RequestsPerMinute, TokensPerMinute: k.TokensPerMinute},
		team:  k.Team, costInUsage: k.CostInUsage}
	if k.Budget != nil || k.Team != "" {
		kc.limits.owners = append(kc.limits.owners, budget.Owner{Kind: budget.Client, Name: k.Name})
		if k.Team != "" {
			kc.limits.owners = append(kc.limits.owners, budget.Owner{Kind: budget.Team, Name: k.Team})
		}
	}
	return kc
}

// caller is who sent a request, once authenticated.
type caller struct {
	name    string // "" when the API is open
	ceiling admission.Priority
	limits  clientLimits
	models  []string // the key's allowlist; nil: every model
}

// Messages of the 401s. Neither says which part of a key matched: an
// unknown key and a malformed one get the same answer.
const (
	msgInvalidKey = "invalid or missing API key"
	msgRevokedKey = "this API key has been revoked"
	msgExpiredKey = "this API key has expired"
)

// authenticate finds the client of a request: a routes-file client first,
// then an API key. The API is open (every request is the anonymous
// caller) only while neither kind has a single key, revoked API keys
// counted: revoking the last key must not open the API. msg is the 401's
// message when ok is false.
func (s *Server) authenticate(rt *Routing, h http.Header) (c caller, ok bool, msg string) {
	var set *keys.Set
	if s.opts.Keys != nil {
		set = s.opts.Keys.Current()
	}
	if rt.Clients == nil && set.Len() == 0 {
		return caller{ceiling: admission.Interactive}, true, ""
	}
	token, found := bearer(clientToken(h))
	if !found {
		return c, false, msgInvalidKey
	}
	sum := sha256.Sum256([]byte(token))
	if rt.Clients != nil {
		if name, ceiling, ok := rt.Clients.match(&sum); ok {
			return caller{name: name, ceiling: ceiling, limits: rt.Clients.limitsOf(name)}, true, ""
		}
	}
	m := set.Lookup(&sum, time.Now())
	switch m.Status {
	case keys.Valid:
		kc := m.View.(*keyClient)
		return caller{name: m.Name(), ceiling: kc.ceiling, limits: kc.limits, models: m.Models()}, true, ""
	case keys.Revoked:
		return c, false, msgRevokedKey
	case keys.Expired:
		return c, false, msgExpiredKey
	}
	return c, false, msgInvalidKey
}

// allows reports whether the caller may use model (its key's allowlist).
func (c *caller) allows(model string) bool { return keys.AllowedBy(c.models, model) }
