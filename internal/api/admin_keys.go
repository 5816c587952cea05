package api

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/budget"
	"github.com/llmgw/gateway/internal/keys"
	"github.com/llmgw/gateway/internal/quota"
)

// KeyStore is the API keys' store as the admin routes use it
// (implemented by *keys.Store). Every write appends its audit row and
// announces the change to every replica; ErrUnavailable means nothing
// was changed.
type KeyStore interface {
	Create(ctx context.Context, actor string, c keys.Change) (keys.Key, string, error)
	Get(ctx context.Context, id string) (keys.Key, error)
	List(ctx context.Context, f keys.Filter) ([]keys.Key, error)
	Update(ctx context.Context, actor, id string, c keys.Change) (keys.Key, error)
	Rotate(ctx context.Context, actor, id string, grace time.Duration) (keys.Key, string, error)
	Revoke(ctx context.Context, actor, id string) (keys.Key, error)
	Audit(ctx context.Context, limit int) ([]keys.AuditEntry, error)
}

// Audit list bounds (GET /admin/audit?limit=).
const (
	defaultAuditLimit = 100
	maxAuditLimit     = 1000
)

// mountKeys adds the /admin/keys routes (DESIGN 11.2, docs/keys.md).
func (s *Server) mountKeys(r chi.Router) {
	r.Post("/admin/keys", s.keysCreate)
	r.Get("/admin/keys", s.keysList)
	r.Get("/admin/keys/{id}", s.keysGet)
	r.Patch("/admin/keys/{id}", s.keysPatch)
	r.Post("/admin/keys/{id}/rotate", s.keysRotate)
	r.Delete("/admin/keys/{id}", s.keysRevoke)
	r.Get("/admin/audit", s.adminAudit)
}

// actor is the audit's name for the admin token: a prefix of its SHA-256,
// enough to tell two tokens apart across a rotation of GATEWAY_ADMIN_TOKEN
// and useless to anyone guessing it. Only the admin token writes.
func (s *Server) actor() string {
	sum := sha256.Sum256([]byte(s.opts.AdminToken.Reveal()))
	return "admin:" + hex.EncodeToString(sum[:6])
}

// keyStore is the store, or answers 404 itself when keys are off.
func (s *Server) keyStore(w http.ResponseWriter, r *http.Request) KeyStore {
	if s.opts.KeyStore == nil {
		writeError(w, r, http.StatusNotFound, typeInvalidRequest, codeNotFound, "",
			"API keys need a database (GATEWAY_DATABASE_URL)")
	}
	return s.opts.KeyStore
}

// readAdminBody reads an admin write's body, bounded.
func readAdminBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
	if err != nil {
		writeError(w, r, http.StatusBadRequest, typeInvalidRequest, codeInvalidRequest, "", "the body could not be read or is larger than 64 KiB")
		return nil, false
	}
	return b, true
}

// keyError answers a store or body error.
func (s *Server) keyError(w http.ResponseWriter, r *http.Request, err error) {
	var fe *keys.FieldError
	switch {
	case errors.As(err, &fe):
		writeError(w, r, http.StatusBadRequest, typeInvalidRequest, codeInvalidRequest, fe.Field, fe.Error())
	case errors.Is(err, keys.ErrNotFound):
		writeError(w, r, http.StatusNotFound, typeInvalidRequest, codeNotFound, "id", "no such key")
	case errors.Is(err, keys.ErrRevoked):
		writeError(w, r, http.StatusConflict, typeInvalidRequest, "key_revoked", "id", "the key is revoked; issue a new one")
	case errors.Is(err, keys.ErrNameTaken):
		writeError(w, r, http.StatusConflict, typeInvalidRequest, "name_taken", "name", "a live key already has this name")
	case errors.Is(err, keys.ErrUnavailable):
		s.opts.Logger.Warn("admin keys: store unavailable", "err", err)
		writeError(w, r, http.StatusServiceUnavailable, typeServer, codeStoreUnavailable, "",
			"the key store (Postgres) is unavailable; nothing was changed")
	default:
		s.opts.Logger.Error("admin keys: store error", "err", err)
		writeError(w, r, http.StatusInternalServerError, typeServer, codeInternal, "", "the key store failed")
	}
}

// routesClientNamed refuses a key name that a routes-file client has: the
// two would share one client's records, rates and budget.
func (s *Server) routesClientNamed(w http.ResponseWriter, r *http.Request, name *string) bool {
	rt := s.routing.Load()
	if name == nil || rt.Routes == nil {
		return false
	}
	for _, c := range rt.Routes.Clients {
		if c.Name == *name {
			writeError(w, r, http.StatusConflict, typeInvalidRequest, "name_taken", "name", "a client of the routes file has this name")
			return true
		}
	}
	return false
}

// issued is the answer to a create or a rotation: the record and the
// secret, shown this once.
type issued struct {
	keys.Key
	Secret string `json:"key"`
}

// writeIssued answers with the secret: never cached, and not through
// writeAdmin's redaction (the redactor does not know the secret, and it
// is the one answer meant to carry it).
func writeIssued(w http.ResponseWriter, status int, k keys.Key, secret string) {
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, status, issued{Key: k, Secret: secret})
}

func (s *Server) keysCreate(w http.ResponseWriter, r *http.Request) {
	st := s.keyStore(w, r)
	if st == nil {
		return
	}
	body, ok := readAdminBody(w, r)
	if !ok {
		return
	}
	c, err := keys.ParseCreate(body, time.Now())
	if err != nil {
		s.keyError(w, r, err)
		return
	}
	if s.routesClientNamed(w, r, c.Name) {
		return
	}
	k, secret, err := st.Create(r.Context(), s.actor(), c)
	if err != nil {
		s.keyError(w, r, err)
		return
	}
	writeIssued(w, http.StatusCreated, k, secret)
}

func (s *Server) keysList(w http.ResponseWriter, r *http.Request) {
	st := s.keyStore(w, r)
	if st == nil {
		return
	}
	q := r.URL.Query()
	var f keys.Filter
	if v, ok := single(w, r, q, "team"); !ok {
		return
	} else if _, set := q["team"]; set {
		f.Team = &v
	}
	if v, ok := single(w, r, q, "revoked"); !ok {
		return
	} else if v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			badParam(w, r, "revoked", "revoked must be true or false")
			return
		}
		f.Revoked = &b
	}
	if v, ok := single(w, r, q, "limit"); !ok {
		return
	} else if v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > keys.MaxListLimit {
			badParam(w, r, "limit", "limit must be an integer from 1 to "+strconv.Itoa(keys.MaxListLimit))
			return
		}
		f.Limit = n
	}
	before, ok := single(w, r, q, "before")
	if !ok {
		return
	}
	f.Before = before
	list, err := st.List(r.Context(), f)
	if err != nil {
		s.keyError(w, r, err)
		return
	}
	// next_before pages on: set when the page is full, so more may follow.
	var next *string
	if limit := cmp.Or(f.Limit, keys.DefaultListLimit); len(list) == limit {
		next = &list[len(list)-1].ID
	}
	s.writeAdmin(w, map[string]any{"keys": list, "next_before": next})
}

// keyDetail is GET /admin/keys/{id}: the record and its budgets' current
// windows (its own and its team's), as /admin/budgets shows them.
type keyDetail struct {
	keys.Key
	Budgets []budget.Status `json:"budgets"`
	// Concurrency is the key's client gate on this replica (limit, in
	// flight, queued); null when it has no max_concurrency or no attempt
	// ran since the gate was last idle and discarded.
	Concurrency *keyConcurrency `json:"concurrency"`
	// Rates is the key's current minute of requests and tokens (as its
	// x-ratelimit-* headers would say, without counting a request); null
	// when it has neither rate.
	Rates *keyRates `json:"rates"`
}

// keyRates is a key's standing in its rate windows.
type keyRates struct {
	RequestsPerMinute *rateUse `json:"requests_per_minute,omitempty"`
	TokensPerMinute   *rateUse `json:"tokens_per_minute,omitempty"`
}

// rateUse is one window: its limit, what is used of it, and when it ends.
type rateUse struct {
	Limit     int   `json:"limit"`
	Used      int   `json:"used"`
	ResetInMS int64 `json:"reset_in_ms"`
}

// RatePeeker reads a client's rate windows without counting (quota.Rates).
type RatePeeker interface {
	Peek(ctx context.Context, client string, l quota.Limits) quota.RateState
}

// rateUseOf is k's rate windows, or nil without rate limits (or a counter
// that cannot be read).
func (s *Server) rateUseOf(ctx context.Context, k *keys.Key) *keyRates {
	l := quota.Limits{RequestsPerMinute: k.RequestsPerMinute, TokensPerMinute: k.TokensPerMinute}
	rp, ok := s.opts.Rates.(RatePeeker)
	if !l.Any() || !ok {
		return nil
	}
	st := rp.Peek(ctx, k.Name, l)
	out := &keyRates{}
	if l.RequestsPerMinute > 0 {
		out.RequestsPerMinute = &rateUse{Limit: st.Requests, Used: st.Requests - st.RemainingRequests, ResetInMS: st.ResetRequests.Milliseconds()}
	}
	if l.TokensPerMinute > 0 {
		out.TokensPerMinute = &rateUse{Limit: st.Tokens, Used: st.Tokens - st.RemainingTokens, ResetInMS: st.ResetTokens.Milliseconds()}
	}
	return out
}

type keyConcurrency struct {
	Limit   int `json:"limit"`
	Active  int `json:"active"`
	Pending int `json:"pending"`
}

func (s *Server) keysGet(w http.ResponseWriter, r *http.Request) {
	st := s.keyStore(w, r)
	if st == nil {
		return
	}
	k, err := st.Get(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		s.keyError(w, r, err)
		return
	}
	d := keyDetail{Key: k, Budgets: []budget.Status{}}
	if br, ok := s.opts.Budgets.(BudgetReader); ok && k.RevokedAt == nil {
		for _, b := range br.Snapshot(r.Context()) {
			if (b.Owner.Kind == budget.Client && b.Owner.Name == k.Name) ||
				(k.Team != "" && b.Owner.Kind == budget.Team && b.Owner.Name == k.Team) {
				d.Budgets = append(d.Budgets, b)
			}
		}
	}
	if k.MaxConcurrency > 0 && k.RevokedAt == nil && s.opts.Admission != nil {
		for _, g := range s.opts.Admission.Stats().Targets {
			if g.Gate == admission.ClientGate && g.ID == k.Name {
				d.Concurrency = &keyConcurrency{Limit: g.Limit, Active: g.Active, Pending: g.Pending}
			}
		}
	}
	if k.RevokedAt == nil {
		d.Rates = s.rateUseOf(r.Context(), &k)
	}
	s.writeAdmin(w, d)
}

func (s *Server) keysPatch(w http.ResponseWriter, r *http.Request) {
	st := s.keyStore(w, r)
	if st == nil {
		return
	}
	body, ok := readAdminBody(w, r)
	if !ok {
		return
	}
	c, err := keys.ParsePatch(body, time.Now())
	if err != nil {
		s.keyError(w, r, err)
		return
	}
	if s.routesClientNamed(w, r, c.Name) {
		return
	}
	k, err := st.Update(r.Context(), s.actor(), chi.URLParam(r, "id"), c)
	if err != nil {
		s.keyError(w, r, err)
		return
	}
	s.writeAdmin(w, k)
}

func (s *Server) keysRotate(w http.ResponseWriter, r *http.Request) {
	st := s.keyStore(w, r)
	if st == nil {
		return
	}
	body, ok := readAdminBody(w, r)
	if !ok {
		return
	}
	grace, err := keys.ParseRotate(body)
	if err != nil {
		s.keyError(w, r, err)
		return
	}
	k, secret, err := st.Rotate(r.Context(), s.actor(), chi.URLParam(r, "id"), grace)
	if err != nil {
		s.keyError(w, r, err)
		return
	}
	writeIssued(w, http.StatusOK, k, secret)
}

func (s *Server) keysRevoke(w http.ResponseWriter, r *http.Request) {
	st := s.keyStore(w, r)
	if st == nil {
		return
	}
	k, err := st.Revoke(r.Context(), s.actor(), chi.URLParam(r, "id"))
	if err != nil {
		s.keyError(w, r, err)
		return
	}
	s.writeAdmin(w, k)
}

// adminAudit serves GET /admin/audit?limit=: the admin writes, newest first.
func (s *Server) adminAudit(w http.ResponseWriter, r *http.Request) {
	st := s.keyStore(w, r)
	if st == nil {
		return
	}
	limit := defaultAuditLimit
	if v, ok := single(w, r, r.URL.Query(), "limit"); !ok {
		return
	} else if v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxAuditLimit {
			badParam(w, r, "limit", "limit must be an integer from 1 to "+strconv.Itoa(maxAuditLimit))
			return
		}
		limit = n
	}
	list, err := st.Audit(r.Context(), limit)
	if err != nil {
		s.keyError(w, r, err)
		return
	}
	s.writeAdmin(w, map[string]any{"entries": list})
}
