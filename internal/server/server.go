// Package server assembles a gateway process from its configuration: it
// builds the planner, the provider clients, the admission scheduler, the
// report writer, the metrics and the HTTP API, serves them on listeners and
// runs the graceful drain. cmd/gateway and the integration tests both use it,
// so tests exercise exactly the wiring that production runs.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/api"
	"github.com/llmgw/gateway/internal/budget"
	"github.com/llmgw/gateway/internal/candidates"
	"github.com/llmgw/gateway/internal/config"
	"github.com/llmgw/gateway/internal/health"
	"github.com/llmgw/gateway/internal/metrics"
	"github.com/llmgw/gateway/internal/quota"
	"github.com/llmgw/gateway/internal/report"
	"github.com/llmgw/gateway/internal/routes"
	"github.com/llmgw/gateway/internal/secret"
	"github.com/llmgw/gateway/internal/tracing"
	"github.com/llmgw/gateway/internal/upstream"
)

// Gateway is one assembled gateway.
type Gateway struct {
	Config config.Config
	// Planner is the planner New built; after a routes reload the one in
	// service is API.Routing().Planner.
	Planner   *candidates.Planner
	Scheduler *admission.Scheduler
	Reports   *report.Writer // nil when records are off
	API       *api.Server
	Upstreams map[string]*upstream.Client // in service, by provider name; replaced by a reload
	Metrics   *metrics.Metrics
	Tracer    *tracing.Tracer // nil: tracing off
	Health    *health.Tracker
	Quota     *quota.Store // shared limits in Redis; nil without GATEWAY_REDIS_URL
	// Budgets are the routes file's client and team budgets (budget.go).
	Budgets *budget.Budgets
	// Log is the logger New was given, behind a secret.LogHandler: no
	// line of the gateway's holds a secret it knows.
	Log *slog.Logger
	// Redactor holds every secret of the configuration and the routes
	// (secretsOf), for the records, the relayed provider errors, the admin
	// answers and the logs; reloads add the new routes' secrets.
	Redactor *secret.Redactor

	// SkipDelay, once closed, ends GATEWAY_SHUTDOWN_DELAY early so the drain
	// starts at once: cmd/gateway closes it on a second SIGTERM or SIGINT, for
	// an operator who does not want to wait for load balancers. Nil never skips.
	SkipDelay <-chan struct{}

	reload reloadState // routes reloads (reload.go)
	keys   apiKeys     // keys issued through /admin/keys (keys.go)
	runner *candidates.Runner
}

// The metrics receive the API's measurements through api.Observer, as they
// receive the attempt loop's through candidates.Observer.
var _ api.Observer = (*metrics.Metrics)(nil)

// nopRecorder is the recorder when no database is configured: records are
// off by the operator's choice, announced at start and in /readyz.
type nopRecorder struct{}

func (nopRecorder) RecordRequest(report.Request)     {}
func (nopRecorder) RecordCandidate(report.Candidate) {}

// New builds a gateway. It starts the report writer's goroutines (which
// tolerate a Postgres that is down); Run serves and Close releases the rest.
func New(ctx context.Context, cfg config.Config, routes *routes.Routes, log *slog.Logger) (*Gateway, error) {
	g := &Gateway{Config: cfg, Redactor: secret.NewRedactor()}
	g.learnSecrets(routes)
	log = slog.New(secret.NewLogHandler(log.Handler(), g.Redactor))
	g.Log = log
	g.reload.file, g.reload.loadedAt = cfg.RoutesFile, time.Now()
	g.Health = health.NewTracker(health.SystemClock{}, g.healthChanged)
	g.reload.prices = pricesDigest(cfg.PricesFile) // before the read: a change between them reloads
	opts, err := PlannerOptions(cfg)               // as a reload builds it
	if err != nil {
		return nil, err
	}
	opts.Health = g.Health
	planner, err := candidates.NewPlanner(routes, opts)
	if err != nil {
		return nil, err
	}
	g.Planner = planner
	logUnpriced(log, planner)
	g.attachClients(planner) // each provider sends through its own client
	rates, err := g.openQuota()
	if err != nil {
		return nil, err
	}
	g.Scheduler = admission.New(admission.Config{
		GlobalLimit: cfg.ExecutionGateLimit, MaxPending: cfg.MaxPending, AgingInterval: cfg.AgingInterval,
		Shared: g.sharedSlots(), SharedRetry: cfg.RedisWake,
	})

	var rec candidates.Recorder = nopRecorder{}
	var store api.ReportStore
	if cfg.DatabaseURL.Empty() {
		log.Warn("GATEWAY_DATABASE_URL is not set: request records are disabled")
	} else {
		w, err := report.NewWriter(report.Options{
			DatabaseURL: cfg.DatabaseURL, SpoolDir: cfg.SpoolDir, AutoMigrate: bool(cfg.AutoMigrate),
			Retention: cfg.ReportRetention, Replica: cfg.ReplicaID, Logger: log, Redactor: g.Redactor,
		})
		if err != nil {
			return nil, fmt.Errorf("report writer: %w", err)
		}
		w.Start(ctx)
		g.Reports, rec, store = w, w, w
	}
	if len(routes.Clients) == 0 && cfg.DatabaseURL.Empty() {
		log.Warn("no clients in the routes file: the API is open to anyone who can reach it")
	} else if len(routes.Clients) == 0 {
		log.Warn("no clients in the routes file: the API is open to anyone who can reach it until a key is issued through /admin/keys")
	}
	src := metrics.Sources{Planner: planner, Admission: g.Scheduler, Health: g.Health, HoldMode: cfg.HoldMode.String(),
		NativeHistograms: bool(cfg.NativeHistograms)}
	if g.Reports != nil {
		src.Reports = g.Reports
	}
	g.Metrics = metrics.New(src)
	g.startQuota()
	if err := g.openKeys(ctx, api.CompileKey); err != nil {
		return nil, err
	}
	if err := g.openBudgets(ctx, routes); err != nil {
		return nil, err
	}
	g.startBudgetFollow(ctx)
	g.Metrics.SetBudgets(g.Budgets)
	// Last before the runner: nothing after it can fail and leave its
	// export goroutine running.
	tracer, err := tracing.Setup(cfg.Trace, g.Metrics.TraceSpansDropped)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	g.Tracer = tracer
	runner := &candidates.Runner{Admit: g.Scheduler, Record: rec, Observe: g.Metrics,
		HoldMode:      cfg.HoldMode,
		Budget:        candidates.NewRetryBudget(cfg.RetryBudgetPercent, cfg.RetryBudgetMinPerSecond),
		HedgeMinDelay: cfg.HedgeMinDelay, Redact: g.Redactor, Log: log}
	if tracer != nil { // a nil *Tracer in the interface would not be nil
		runner.Trace = tracer
	}
	g.runner = runner
	apiOpts := api.Options{
		Planner: planner, Runner: runner, Admission: g.Scheduler, Reports: store,
		Clients: api.NewClientKeys(routes.Clients), Routes: routes, Config: g, Health: g.Health, Rates: rates, Quota: g.quotaState(),
		MaxRequestBytes: int64(cfg.MaxRequestBytes), StreamWriteTimeout: cfg.StreamWriteTimeout,
		ReadBodyTimeout: cfg.ReadBodyTimeout,
		AdminToken:      cfg.AdminToken, Redactor: g.Redactor, PProf: bool(cfg.PProf), Logger: log,
		Metrics: g.Metrics.Handler(), Observe: g.Metrics, AccessLog: bool(cfg.AccessLog),
		Budgets: g.Budgets, AdminReadToken: cfg.AdminReadToken, Tracer: tracer, TraceURL: cfg.TraceURL,
		CacheStore: g.openCache(),
	}
	if g.keys.cache != nil {
		apiOpts.Keys, apiOpts.KeyStore, apiOpts.KeySync = g.keys.cache, g.keys.store, g.keys.syncer
	}
	g.API = api.New(apiOpts)
	return g, nil
}

// healthChanged logs a (target, model)'s health transition once, at info, and
// counts it. The key never appears: only its non-secret label.
func (g *Gateway) healthChanged(tr health.Transition) {
	attrs := []any{"provider", tr.Provider, "key_id", tr.KeyID, "target", tr.TargetID, "model", tr.Model,
		"state", tr.To.String(), "from", tr.From.String(), "reason", tr.Reason}
	if !tr.Until.IsZero() {
		attrs = append(attrs, "until", tr.Until.UTC().Format(time.RFC3339Nano))
	}
	if tr.ErrorType != "" {
		attrs = append(attrs, "error_type", tr.ErrorType, "status", tr.Status)
	}
	g.Log.Info("target health changed", attrs...)
	g.shareCooldown(tr)
	if g.Metrics != nil {
		g.Metrics.HealthTransition(tr)
	}
}

// MetricsHandler serves /metrics (also on the optional separate listener).
func (g *Gateway) MetricsHandler() http.Handler { return g.Metrics.Handler() }

// HTTPServer returns the client-facing http.Server with the edge limits of
// the configuration. It has no WriteTimeout on purpose: that would run from
// the request's headers and cut every generation longer than it. The API
// bounds its answers' writes itself: each by GATEWAY_STREAM_WRITE_TIMEOUT,
// and a relayed answer's by the attempt's timeouts.total and the request's
// deadline.
func (g *Gateway) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           g.API,
		BaseContext:       g.API.BaseContext,
		ReadHeaderTimeout: g.Config.ReadHeaderTimeout,
		IdleTimeout:       g.Config.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(g.Log.Handler(), slog.LevelDebug),
	}
}

// Run serves on ln until ctx ends, then drains (DESIGN section 4): /readyz
// fails at once; after the shutdown delay (cut short by SkipDelay) new
// requests get 503 and the listener closes; in-flight requests may finish
// within the grace, after which they are cut; then the scheduler closes and
// records are flushed.
func (g *Gateway) Run(ctx context.Context, ln net.Listener) error {
	srv := g.HTTPServer()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		g.Close(context.Background())
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	// Readiness fails first, so that once the line below is logged /readyz
	// already answers 503.
	g.API.MarkNotReady()
	g.Log.Info("shutting down", "reason", context.Cause(ctx), "delay", g.Config.ShutdownDelay,
		"grace", g.Config.ShutdownGrace)
	if d := g.Config.ShutdownDelay; d > 0 {
		g.waitShutdownDelay(d)
	}
	g.API.StartDrain()
	graceCtx, cancel := context.WithTimeout(context.Background(), g.Config.ShutdownGrace)
	defer cancel()
	err := srv.Shutdown(graceCtx)
	if errors.Is(err, context.DeadlineExceeded) {
		g.Log.Warn("shutdown grace ended with requests in flight; cutting them")
		g.API.HardStop()
		cutCtx, cancelCut := context.WithTimeout(context.Background(), 5*time.Second)
		err = srv.Shutdown(cutCtx)
		cancelCut()
		if err != nil {
			_ = srv.Close()
		}
	}
	<-errc
	closeCtx, cancelClose := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelClose()
	g.Close(closeCtx)
	return nil
}

// waitShutdownDelay keeps serving with /readyz failing for d, so that load
// balancers stop sending new requests before the listener closes, unless
// SkipDelay is closed first.
func (g *Gateway) waitShutdownDelay(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	start := time.Now()
	select {
	case <-t.C:
	case <-g.SkipDelay:
		g.Log.Info("shutdown delay skipped; draining now",
			"remaining", (d - time.Since(start)).Round(time.Millisecond))
	}
}

// Close releases the scheduler, the report writer and the connection pools.
func (g *Gateway) Close(ctx context.Context) {
	g.API.Close()
	if g.runner != nil {
		// Lost hedge attempts settle their rows and slots on their own
		// goroutines after their requests ended: before the recorder closes.
		if err := g.runner.Wait(ctx); err != nil {
			g.Log.Warn("hedge attempts still settling", "err", err)
		}
	}
	if err := g.Scheduler.Close(ctx); err != nil {
		g.Log.Warn("admission close", "err", err)
	}
	// Every attempt, lost hedges' included, has made its span by now.
	if err := g.Tracer.Shutdown(ctx); err != nil {
		g.Log.Warn("trace export close", "err", err)
	}
	// Every request has settled its budget by now; before the quota
	// store closes the Redis client the budgets share.
	g.closeKeys()
	g.closeBudgets()
	if g.Quota != nil {
		// After the scheduler: every lease is released, so the store's
		// last call gives back whatever Redis still holds for this replica.
		g.Quota.Close()
	}
	if g.Reports != nil {
		if err := g.Reports.Close(ctx); err != nil {
			g.Log.Warn("report writer close", "err", err)
		}
	}
	g.reload.mu.Lock()
	defer g.reload.mu.Unlock()
	for _, c := range g.Upstreams {
		c.CloseIdle()
	}
	g.closeRetired()
}
