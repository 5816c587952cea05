package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/candidates"
	"github.com/llmgw/gateway/internal/health"
	"github.com/llmgw/gateway/internal/report"
	"github.com/llmgw/gateway/internal/routes"
	"github.com/llmgw/gateway/internal/secret"
	"github.com/llmgw/gateway/internal/tracing"
	"github.com/llmgw/gateway/internal/upstream"
)

// AdmissionStats is the admission view served at /admin/admission.
type AdmissionStats interface {
	Stats() admission.Snapshot
}

// QuotaState is the state of the limits shared through Redis.
type QuotaState interface {
	Degraded() bool
}

// HealthStats is the target health view served at /admin/health.
type HealthStats interface {
	Snapshot() []health.TargetStatus
}

// Observer receives the API's own measurements (implemented by the metrics
// package); the attempt loop reports through candidates.Observer. Calls must
// not block.
type Observer interface {
	Planned(d time.Duration)           // time to plan a request's candidates
	Rejected(route string, status int) // a request refused before planning, by client route
	Panic()                            // a recovered panic
	BudgetRefused(budget string)       // a request refused by a budget ("client:NAME", "team:NAME")
	// CacheResult counts a request of a cached route by client route and
	// result (hit, miss, bypass); CacheSaved a hit's saving by team ("" for
	// none); CacheStoreError a store call (get, set) that failed or timed
	// out, and was taken as a miss.
	CacheResult(route, result string)
	CacheSaved(team string, usd float64)
	CacheStoreError(op string)
}

type nopObserver struct{}

func (nopObserver) Planned(time.Duration) {}
func (nopObserver) Rejected(string, int)  {}
func (nopObserver) Panic()                {}
func (nopObserver) BudgetRefused(string)  {}

func (nopObserver) CacheResult(string, string) {}
func (nopObserver) CacheSaved(string, float64) {}
func (nopObserver) CacheStoreError(string)     {}

// ReportStore is the record store as the API reads it; nil when records are off.
type ReportStore interface {
	State() string
	Timeline(ctx context.Context, id uuid.UUID) (report.Timeline, error)
}

// Options wires a Server.
type Options struct {
	Planner            *candidates.Planner
	Runner             *candidates.Runner
	Admission          AdmissionStats
	Health             HealthStats    // nil: /admin/health answers an empty list
	Reports            ReportStore    // nil: records off
	Clients            *ClientKeys    // nil: the API is open
	Keys               KeySource      // API keys issued at run time; nil: none
	KeyStore           KeyStore       // /admin/keys; nil: those routes answer 404
	KeySync            KeySync        // the key set's state for /readyz; nil: "disabled"
	Rates              RateCounter    // counts clients' rate limits; nil: none are enforced
	Quota              QuotaState     // shared limits' state for /readyz; nil: limits are local
	Routes             *routes.Routes // the routes file Planner and Clients came from; optional
	CacheStore         CacheStore     // cached routes' answers; nil: in process, DefaultCacheMaxBytes
	Config             ConfigSource   // GET /admin/config; nil: 404
	MaxRequestBytes    int64
	StreamWriteTimeout time.Duration // bounds one write of an answer, stream or body; 0: none
	AdminToken         secret.String
	AdminReadToken     secret.String // may GET /admin/*, 403 on writes; empty: none
	// Redactor holds the secrets the gateway knows. A provider's 400, 413
	// or 422 body relayed to the client, and every /admin answer (records
	// written before redaction by value existed included), are cleaned of
	// them. Nil: sent as they are.
	Redactor        *secret.Redactor
	PProf           bool
	Metrics         http.Handler // nil: no /metrics
	Logger          *slog.Logger
	Observe         Observer      // the API's measurements; optional
	Budgets         BudgetKeeper  // client and team budgets; nil: none
	ReadBodyTimeout time.Duration // bounds reading a request body; 0 = none
	AccessLog       bool          // one info line per API request (GATEWAY_ACCESS_LOG)
	// Tracer makes each API request's server span; nil: tracing off,
	// and no middleware is installed for it.
	Tracer *tracing.Tracer
	// TraceURL is the console's link to a trace, {trace_id} replaced;
	// "": no link (GATEWAY_TRACE_URL).
	TraceURL string
	// TestHook, when set, is called at named points of an attempt
	// ("attempt" before the provider call, through the Runner; "committed"
	// once the relay owns the attempt Run handed out; "streaming" after the
	// first event reached the client). Fault tests use it to inject panics.
	TestHook func(point string)
}

// Routing is everything a routes reload replaces, as one value: the
// planner, the client keys and the pre-encoded /v1/models body, with the
// routes they were built from. A request loads it once, so it is planned
// and authenticated against one routes file even while a reload swaps the
// next one in; the swap is a single atomic store, with no lock on the
// request path.
type Routing struct {
	Routes  *routes.Routes // nil when the server was built without them
	Planner *candidates.Planner
	Clients *ClientKeys // nil: the API is open
	models  []byte      // pre-encoded /v1/models body
}

// NewRouting bundles a planner and the client keys of one routes file.
func NewRouting(routes *routes.Routes, planner *candidates.Planner, clients *ClientKeys) *Routing {
	return &Routing{Routes: routes, Planner: planner, Clients: clients, models: encodeModels(planner.Models())}
}

// SetRouting makes requests planned from now on use rt; requests already
// planned finish on the routing they loaded.
func (s *Server) SetRouting(rt *Routing) { s.routing.Store(rt) }

// Routing is the routing new requests are planned with.
func (s *Server) Routing() *Routing { return s.routing.Load() }

// Server is the HTTP handler of the gateway.
type Server struct {
	opts     Options
	router   chi.Router
	routing  atomic.Pointer[Routing] // what a routes reload swaps; read once per request
	notReady atomic.Bool             // /readyz fails (shutdown began)
	draining atomic.Bool             // new chat requests get 503
	hardStop context.Context         // parent of every request context; cancelled with candidates.ErrShutdown when the grace ends
	stopAll  context.CancelCauseFunc
	access   *accessLog // nil when off
	cache    responseCache
}

// New builds the router.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Observe == nil {
		opts.Observe = nopObserver{}
	}
	s := &Server{opts: opts}
	s.hardStop, s.stopAll = context.WithCancelCause(context.Background())
	s.routing.Store(NewRouting(opts.Routes, opts.Planner, opts.Clients))
	if opts.AccessLog {
		s.access = newAccessLog(opts.Logger)
	}

	r := chi.NewRouter()
	r.Use(withRequestID)
	if opts.Tracer != nil {
		r.Use(traced(opts.Tracer)) // outside the recoverer: it sees the 500 a panic gets
	}
	r.Use(recoverer(opts.Logger, opts.Observe.Panic))
	// Under /v1/messages the clients are Anthropic SDKs: they read only
	// Anthropic-shaped errors.
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeRouteError(w, r, pathRoute(r.URL.Path), http.StatusNotFound, typeInvalidRequest, codeNotFound, "", "no route for "+r.Method+" "+r.URL.Path)
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeRouteError(w, r, pathRoute(r.URL.Path), http.StatusMethodNotAllowed, typeInvalidRequest, codeMethodNotAllowed, "", "method "+r.Method+" not allowed on "+r.URL.Path)
	})
	r.Post(countTokensPath, s.messagesCountTokens)
	for rt := range upstream.NumRoutes {
		r.Method(http.MethodPost, apiPaths[rt], apiHandler{s, rt})
	}
	r.Get("/v1/models", s.listModels)
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.Get("/readyz", s.readyz)
	if opts.Metrics != nil {
		r.Method(http.MethodGet, "/metrics", opts.Metrics)
	}
	if !opts.AdminToken.Empty() {
		// The console is a static page; it signs in with the admin token
		// itself and sends it on every /admin call, so the files are public.
		s.mountConsole(r)
		r.Group(func(r chi.Router) {
			r.Use(s.requireAdmin)
			r.Get("/admin/admission", s.adminAdmission)
			r.Get("/admin/health", s.adminHealth)
			r.Get("/admin/requests", s.adminRequests)
			r.Get("/admin/requests/{id}", s.adminRequest)
			r.Get("/admin/stats/providers", s.adminProviderStats)
			r.Get("/admin/config", s.adminConfig)
			r.Get("/admin/spend", s.adminSpend)
			r.Get("/admin/budgets", s.adminBudgets)
			r.Get("/admin/whoami", s.adminWhoami)
			s.mountKeys(r)
			if opts.PProf {
				r.HandleFunc("/debug/pprof/*", pprof.Index)
				r.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
				r.HandleFunc("/debug/pprof/profile", pprof.Profile)
				r.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
				r.HandleFunc("/debug/pprof/trace", pprof.Trace)
			}
		})
	}
	s.router = r
	return s
}

// SetTestHook installs Options.TestHook; call it before serving traffic.
func (s *Server) SetTestHook(f func(point string)) {
	s.opts.TestHook = f
	s.opts.Runner.TestHook = f
}

// ServeHTTP implements http.Handler. Every answer, on any route and chi's
// own 404 and 405 included, is marked nosniff and closes a chunked
// request's connection (nosniff, closeChunked), so both are set here, before
// routing, rather than in each route's middlewares.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	nosniff(w.Header())
	closeChunked(w, r)
	s.router.ServeHTTP(w, r)
}

// apiPaths are the client routes' paths.
var apiPaths = [upstream.NumRoutes]string{
	upstream.RouteChat: "/v1/chat/completions", upstream.RouteMessages: "/v1/messages",
	upstream.RouteEmbeddings: "/v1/embeddings", upstream.RouteResponses: "/v1/responses",
}

// pathRoute is the client route whose error shape a path's errors take:
// messages for /v1/messages and everything under it, chat otherwise.
func pathRoute(path string) upstream.Route {
	if path == apiPaths[upstream.RouteMessages] || strings.HasPrefix(path, apiPaths[upstream.RouteMessages]+"/") {
		return upstream.RouteMessages
	}
	return upstream.RouteChat
}

// MarkNotReady makes /readyz fail so load balancers stop sending traffic;
// requests are still served (GATEWAY_SHUTDOWN_DELAY).
func (s *Server) MarkNotReady() { s.notReady.Store(true) }

// StartDrain makes new chat requests get 503 shutting_down while requests in
// flight continue.
func (s *Server) StartDrain() {
	s.notReady.Store(true)
	s.draining.Store(true)
}

// BaseContext is the http.Server BaseContext to serve this handler with:
// request contexts descend from it, so HardStop cancels them all with the
// shutdown cause.
func (s *Server) BaseContext(net.Listener) context.Context { return s.hardStop }

// Close stops what New started (the access log's writer, after it wrote
// the lines already queued). Call it once the HTTP server has stopped.
func (s *Server) Close() { s.access.close() }

// HardStop cuts the requests still in flight: streams end with the error
// event and are recorded with gateway_shutdown. Called when the grace ends.
func (s *Server) HardStop() { s.stopAll(candidates.ErrShutdown) }

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	store := "disabled"
	if s.opts.Reports != nil {
		store = s.opts.Reports.State()
	}
	quota := "local"
	if s.opts.Quota != nil {
		quota = "shared"
		if s.opts.Quota.Degraded() {
			// Still ready: every replica enforces its share (DESIGN 10.4).
			quota = "degraded"
		}
	}
	keyState := "disabled"
	if s.opts.KeySync != nil {
		keyState = s.opts.KeySync.State()
	}
	if s.notReady.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "draining", "report": store, "quota": quota, "keys": keyState})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready", "report": store, "quota": quota, "keys": keyState})
}

// listModels serves GET /v1/models: every routed model, or, to an API key
// with a model allowlist, the routed models the key may use. A request
// without a valid key gets the whole list, as before keys existed.
func (s *Server) listModels(w http.ResponseWriter, r *http.Request) {
	rt := s.routing.Load()
	body := rt.models
	if who, ok, _ := s.authenticate(rt, r.Header); ok && who.models != nil && len(who.models) > 0 {
		var names []string
		for _, m := range rt.Planner.Models() {
			if who.allows(m) {
				names = append(names, m)
			}
		}
		body = encodeModels(names)
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

func encodeModels(names []string) []byte {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for _, n := range names {
		list.Data = append(list.Data, model{ID: n, Object: "model", OwnedBy: "gateway"})
	}
	b, _ := json.Marshal(list)
	return b
}

// requireAdmin guards /admin/* and /debug/pprof/* with the admin token,
// or the read token (GATEWAY_ADMIN_READ_TOKEN) for reads. A missing token
// and a wrong one get different messages, so an operator knows whether
// the console sent nothing or sent the wrong thing; neither says anything
// of the token. The comparison is of SHA-256 digests in constant time:
// comparing the raw strings would return early on a length mismatch and
// so time the token's length. A token in the query string is refused
// even when right: URLs end up in access logs, proxies' logs and browser
// history.
func (s *Server) requireAdmin(next http.Handler) http.Handler {
	want := sha256.Sum256([]byte("Bearer " + s.opts.AdminToken.Reveal()))
	var read [sha256.Size]byte
	hasRead := !s.opts.AdminReadToken.Empty()
	if hasRead {
		read = sha256.Sum256([]byte("Bearer " + s.opts.AdminReadToken.Reveal()))
	}
	isToken := func(sum *[sha256.Size]byte) (admin, reader bool) {
		admin = subtle.ConstantTimeCompare(sum[:], want[:]) == 1
		reader = hasRead && subtle.ConstantTimeCompare(sum[:], read[:]) == 1
		return admin, reader
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tokenInQuery(r, isToken) {
			writeError(w, r, http.StatusUnauthorized, typeAuthentication, codeInvalidAPIKey, "",
				"tokens are not accepted in the query string: send Authorization: Bearer <token>")
			return
		}
		got := r.Header.Get("Authorization")
		if strings.TrimSpace(got) == "" || strings.TrimSpace(got) == "Bearer" {
			writeError(w, r, http.StatusUnauthorized, typeAuthentication, codeInvalidAPIKey, "",
				"admin token required: send Authorization: Bearer <GATEWAY_ADMIN_TOKEN>")
			return
		}
		sum := sha256.Sum256([]byte(got))
		admin, reader := isToken(&sum)
		if !admin && !reader {
			writeError(w, r, http.StatusUnauthorized, typeAuthentication, codeInvalidAPIKey, "",
				"admin token is not valid")
			return
		}
		if !admin && strings.HasPrefix(r.URL.Path, "/debug/") {
			// Profiles (goroutine dumps with arguments, traces) are the
			// operator's, not a read-only dashboard's.
			writeError(w, r, http.StatusForbidden, typePermission, codeReadOnlyToken, "",
				"the read token (GATEWAY_ADMIN_READ_TOKEN) may not profile: use GATEWAY_ADMIN_TOKEN")
			return
		}
		if !admin && r.Method != http.MethodGet && r.Method != http.MethodHead {
			writeError(w, r, http.StatusForbidden, typePermission, codeReadOnlyToken, "",
				"the read token (GATEWAY_ADMIN_READ_TOKEN) may not write: use GATEWAY_ADMIN_TOKEN")
			return
		}
		role := roleAdmin
		if !admin {
			role = roleRead
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), adminRoleKey{}, role)))
	})
}

// The roles GET /admin/whoami answers: the admin token writes, the read
// token only reads.
const (
	roleAdmin = "admin"
	roleRead  = "read"
)

// adminRoleKey is the context key under which requireAdmin leaves the
// caller's role.
type adminRoleKey struct{}

// adminWhoami serves GET /admin/whoami: {"role":"admin"|"read"}, so the
// console can leave out the writes a read token would be refused.
func (s *Server) adminWhoami(w http.ResponseWriter, r *http.Request) {
	role, _ := r.Context().Value(adminRoleKey{}).(string)
	writeJSON(w, http.StatusOK, map[string]string{"role": role})
}

// queryTokenNames are query parameters that carry a credential by
// convention; a request naming one is refused whatever its value.
var queryTokenNames = []string{"token", "access_token", "admin_token", "api_key", "apikey", "key", "authorization", "bearer"}

// tokenInQuery reports whether r's query string carries a credential: a
// parameter of queryTokenNames, or a value that is one of the tokens.
func tokenInQuery(r *http.Request, isToken func(*[sha256.Size]byte) (bool, bool)) bool {
	if r.URL.RawQuery == "" {
		return false
	}
	for name, vals := range r.URL.Query() {
		for _, n := range queryTokenNames {
			if strings.EqualFold(name, n) {
				return true
			}
		}
		for _, v := range vals {
			sum := sha256.Sum256([]byte("Bearer " + strings.TrimPrefix(v, "Bearer ")))
			if a, rd := isToken(&sum); a || rd {
				return true
			}
		}
	}
	return false
}

func (s *Server) adminAdmission(w http.ResponseWriter, _ *http.Request) {
	s.writeAdmin(w, s.opts.Admission.Stats())
}

func (s *Server) adminHealth(w http.ResponseWriter, _ *http.Request) {
	targets := []health.TargetStatus{}
	if s.opts.Health != nil {
		targets = s.opts.Health.Snapshot()
	}
	s.writeAdmin(w, targets) // one object per target
}

func (s *Server) adminRequest(w http.ResponseWriter, r *http.Request) {
	if s.opts.Reports == nil {
		writeError(w, r, http.StatusNotFound, typeInvalidRequest, codeNotFound, "", "records are disabled (no GATEWAY_DATABASE_URL)")
		return
	}
	id, err := uuid.Parse(chi.URLParam(r, "id"))
	if err != nil {
		writeError(w, r, http.StatusBadRequest, typeInvalidRequest, codeInvalidRequest, "id", "request id must be a UUID")
		return
	}
	tl, err := s.opts.Reports.Timeline(r.Context(), id)
	if errors.Is(err, report.ErrNotFound) {
		writeError(w, r, http.StatusNotFound, typeInvalidRequest, codeNotFound, "id", "no such request")
		return
	}
	if err != nil {
		s.opts.Logger.Warn("admin request read failed", "err", err)
		writeError(w, r, http.StatusServiceUnavailable, typeServer, codeInternal, "", "the record store is unavailable")
		return
	}
	s.writeAdmin(w, timelineAnswer{Timeline: tl, TraceURL: s.traceURL(tl.Request.TraceID)})
}

// writeAdmin answers an /admin read with v as JSON, without the known
// secrets: the ledger's error messages and the last reload error are
// provider or operator text.
func (s *Server) writeAdmin(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	b = s.opts.Redactor.RedactBytes(b)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(b, '\n'))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
