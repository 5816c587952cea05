package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"
	"weak"

	"github.com/fsnotify/fsnotify"

	"github.com/llmgw/gateway/internal/api"
	"github.com/llmgw/gateway/internal/candidates"
	"github.com/llmgw/gateway/internal/config"
	"github.com/llmgw/gateway/internal/metrics"
	"github.com/llmgw/gateway/internal/pricing"
	"github.com/llmgw/gateway/internal/routes"
	"github.com/llmgw/gateway/internal/upstream"
)

// Reload triggers, as logged.
const (
	TriggerSignal = "signal" // SIGHUP: always reads the file again
	TriggerFile   = "file"   // a change in the file's directory, debounced
)

// reloadDebounce gathers the events of one save (an editor's write, rename
// and chmod; a ConfigMap's symlink swap) into one reload.
const reloadDebounce = 200 * time.Millisecond

// RoutesFile is a routes file read and validated.
type RoutesFile struct {
	Path   string
	Digest string // "sha256:<hex>" of the file's bytes
	Routes *routes.Routes
	// Planner is built on a health tracker of its own: it shows what the
	// file plans (check-config) and is never served.
	Planner *candidates.Planner
	// Options are the planner settings the file was checked with, the
	// price table (GATEWAY_PRICES_FILE) read once with it.
	Options candidates.PlannerOptions
}

// LoadRoutesFile reads and validates cfg.RoutesFile exactly as a reload
// does; check-config and the start of serve call it.
func LoadRoutesFile(cfg config.Config) (*RoutesFile, error) {
	b, err := routes.ReadFile(cfg.RoutesFile)
	if err != nil {
		return nil, err
	}
	return CheckRoutes(cfg, cfg.RoutesFile, b)
}

// CheckRoutes is the one validation of a routes file, shared by
// check-config, the start and every reload: the file must parse and
// validate (an error is a *routes.FieldError naming the YAML path and
// line, wrapped with %w) and resolve into a planner.
func CheckRoutes(cfg config.Config, path string, b []byte) (*RoutesFile, error) {
	routes, err := routes.Parse(b, os.LookupEnv)
	if err != nil {
		return nil, fmt.Errorf("routes file %s: %w", path, err)
	}
	opts, err := PlannerOptions(cfg)
	if err != nil {
		return nil, err
	}
	planner, err := candidates.NewPlanner(routes, opts)
	if err != nil {
		return nil, fmt.Errorf("routes file %s: %w", path, err)
	}
	return &RoutesFile{Path: path, Digest: digestOf(b), Routes: routes, Planner: planner, Options: opts}, nil
}

// PlannerOptions are the planner settings that come from the environment,
// the price table of GATEWAY_PRICES_FILE included (read each time: a
// reload reads it again); the gateway adds its health tracker.
func PlannerOptions(cfg config.Config) (candidates.PlannerOptions, error) {
	opts := candidates.PlannerOptions{DefaultFirstByte: cfg.FirstByteTimeout, DefaultQueueBudget: cfg.QueueBudget}
	if cfg.PricesFile != "" {
		t, err := pricing.Load(cfg.PricesFile)
		if err != nil {
			return opts, fmt.Errorf("GATEWAY_PRICES_FILE %s: %w", cfg.PricesFile, err)
		}
		opts.Prices = t
	}
	return opts, nil
}

// logUnpriced names the routed models without a price: they run, their
// cost unknown (docs/cost.md).
func logUnpriced(log *slog.Logger, p *candidates.Planner) {
	if u := p.Unpriced(); len(u) > 0 {
		log.Warn("models without a price: their cost is unknown (add prices: to the provider or GATEWAY_PRICES_FILE)",
			"models", u)
	}
}

// pricesDigest identifies the content of the prices file at path ("" for
// none), read up to one byte past its bound; a file that cannot be read is
// identified by its error, so that the reload runs and reports it.
func pricesDigest(path string) string {
	if path == "" {
		return ""
	}
	f, err := os.Open(path)
	if err != nil {
		return "error: " + err.Error()
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, pricing.MaxFileBytes+1))
	if err != nil {
		return "error: " + err.Error()
	}
	return digestOf(b)
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// NewFromFile builds a gateway from a loaded routes file; /admin/config
// then shows its digest.
func NewFromFile(ctx context.Context, cfg config.Config, rf *RoutesFile, log *slog.Logger) (*Gateway, error) {
	g, err := New(ctx, cfg, rf.Routes, log)
	if err != nil {
		return nil, err
	}
	g.reload.digest = rf.Digest
	return g, nil
}

// reloadState is the gateway's side of routes reloads.
type reloadState struct {
	mu       sync.Mutex // serialises reloads; guards the fields below and Gateway.Upstreams after New
	file     string
	digest   string // of the routes in service; "" when New was given parsed routes
	prices   string // pricesDigest of GATEWAY_PRICES_FILE in service
	loadedAt time.Time
	// failed is the digest (or read error) of the last failed attempt, so
	// that the events of one bad save are reported once.
	failed  string
	success int64
	errors  int64
	lastErr *api.ConfigError
	// clients are the provider clients in service by provider name, with
	// the options each was built with; retired ones (a removed provider, or
	// changed connect settings) may still carry requests planned before
	// the reload, and have their idle connections closed on every later
	// reload and at Close. They are held weakly: once no plan in flight
	// references one, it is collected (a cleanup closes what its pool
	// still holds) and dropped from the list at the next reload, so the
	// list holds only what is still in use however many reloads ran.
	clients map[string]providerClient
	retired []weak.Pointer[upstream.Client]
	// secrets are every secret value the gateway was ever configured
	// with, those of retired routes files included (learnSecrets), and
	// the same values as a set.
	secrets []string
	known   map[string]bool
}

// retire adds clients no provider uses any more to the retired list.
func (st *reloadState) retire(clients []*upstream.Client) {
	for _, c := range clients {
		runtime.AddCleanup(c, func(closeIdle func()) { closeIdle() }, c.IdleCloser())
		st.retired = append(st.retired, weak.Make(c))
	}
}

// closeRetired closes the idle connections of the retired clients still
// referenced and drops the others. Called with reload.mu held.
func (g *Gateway) closeRetired() {
	st := &g.reload
	st.retired = slices.DeleteFunc(st.retired, func(p weak.Pointer[upstream.Client]) bool {
		c := p.Value()
		if c == nil {
			return true
		}
		c.CloseIdle()
		return false
	})
}

type providerClient struct {
	opts   upstream.ClientOptions
	client *upstream.Client
}

// attachClients gives every provider of planner its client, reusing the one
// in service for a provider of the same name and connect settings, and
// returns the previous clients no provider uses any more. Called by New and,
// under reload.mu, by Reload, before planner serves.
func (g *Gateway) attachClients(planner *candidates.Planner) (retired []*upstream.Client) {
	next := make(map[string]providerClient, len(planner.Providers()))
	for _, p := range planner.Providers() {
		opts := upstream.ClientOptions{Provider: p.Name, ConnectTimeout: p.ConnectTimeout, MaxIdlePerHost: p.MaxConcurrency * len(p.Targets)}
		pc, ok := g.reload.clients[p.Name]
		if !ok || pc.opts != opts {
			pc = providerClient{opts: opts, client: upstream.NewClient(opts)}
		}
		next[p.Name] = pc
		p.Sender = pc.client
	}
	for name, pc := range g.reload.clients {
		if cur, ok := next[name]; !ok || cur.client != pc.client {
			retired = append(retired, pc.client)
		}
	}
	g.reload.clients = next
	g.Upstreams = make(map[string]*upstream.Client, len(next))
	for name, pc := range next {
		g.Upstreams[name] = pc.client
	}
	return retired
}

// Reload reads the routes file again. A file whose bytes are those in
// service changes nothing. An invalid one changes nothing either: the error
// is returned, logged once per distinct content (a file event repeating a
// failed content is ignored; SIGHUP always reports), counted and kept for
// /admin/config, and the routes in service keep serving. A valid one
// serves every request planned after Reload returns; requests already
// planned finish on their plan. Targets that stay keep their admission gate
// and health (both are keyed by the target id, a digest of the provider
// name, origin and key); removed targets leave /admin/health and drain.
func (g *Gateway) Reload(trigger string) error {
	st := &g.reload
	st.mu.Lock()
	defer st.mu.Unlock()
	path := st.file
	b, err := routes.ReadFile(path)
	if err != nil {
		return g.reloadFailed(trigger, "read: "+err.Error(), err)
	}
	digest := digestOf(b)
	// The prices file is read with the routes: a change of it alone
	// (and SIGHUP) reloads too, rather than reading as nothing to do.
	prices := pricesDigest(g.Config.PricesFile)
	if digest == st.digest && prices == st.prices {
		if st.failed != "" {
			// The file is back to the routes in service (an edit undone, a
			// file restored): the failure is over, and last_error, newer
			// than loaded_at, would read as a failure still standing.
			st.failed, st.lastErr = "", nil
			g.Log.Info("routes file is back to the routes in service; last reload error cleared",
				"trigger", trigger, "file", path, "digest", digest)
		} else if trigger == TriggerSignal {
			g.Log.Info("routes file unchanged; nothing to reload", "file", path, "digest", digest)
		}
		return nil
	}
	if trigger == TriggerFile && digest+prices == st.failed {
		return nil
	}
	rf, err := CheckRoutes(g.Config, path, b)
	if err != nil {
		return g.reloadFailed(trigger, digest+prices, err)
	}
	opts := rf.Options
	opts.Health = g.Health
	planner, err := candidates.NewPlanner(rf.Routes, opts)
	if err != nil { // CheckRoutes built the same planner; kept for safety
		return g.reloadFailed(trigger, digest, fmt.Errorf("routes file %s: %w", path, err))
	}
	if err := g.setBudgets(context.WithoutCancel(context.Background()), rf.Routes); err != nil {
		// The new limits hold; a window whose spend could not be read
		// is rebuilt by the first request that needs it.
		g.Log.Warn("budgets: spend not rebuilt yet after the reload", "err", err)
	}
	old := g.API.Routing()
	// Before the swap: an error of the first request sent with a new key
	// is already redacted.
	g.learnSecrets(rf.Routes)
	retired := g.attachClients(planner)
	g.Metrics.SetProviders(planner.Providers())
	g.API.SetRouting(api.NewRouting(rf.Routes, planner, api.NewClientKeys(rf.Routes.Clients)))

	// After the swap: nothing new is planned on a removed target.
	kept := map[string]bool{}
	for _, p := range planner.Providers() {
		for _, t := range p.Targets {
			kept[t.ID] = true
		}
	}
	removed := 0
	for _, p := range old.Planner.Providers() {
		for _, t := range p.Targets {
			if !kept[t.ID] {
				removed++
			}
		}
	}
	// Health is kept per (target, model): forget the entries the new
	// routes no longer plan (a removed target, or a model no route names
	// on it any more); the kept ones keep their health.
	planned := planner.HealthKeys()
	for _, k := range g.Health.Keys() {
		if !planned[k] {
			g.Health.Remove(k)
		}
	}
	st.retire(retired)
	g.closeRetired()
	st.digest, st.prices, st.failed, st.loadedAt = digest, prices, "", time.Now()
	st.success++
	g.Metrics.ConfigReload(metrics.ReloadSuccess)
	g.Log.Info("routes reloaded", "trigger", trigger, "file", path, "digest", digest,
		"providers", len(planner.Providers()), "models", len(planner.Models()), "clients", len(rf.Routes.Clients),
		"targets_removed", removed, "providers_added", added(old.Planner, planner), "providers_removed", added(planner, old.Planner))
	if len(rf.Routes.Clients) == 0 {
		g.Log.Warn("no clients in the routes file: the API is open to anyone who can reach it")
	}
	logUnpriced(g.Log, planner)
	return nil
}

// added lists the providers of b that a does not have, by name.
func added(a, b *candidates.Planner) []string {
	var out []string
	for _, p := range b.Providers() {
		if !slices.ContainsFunc(a.Providers(), func(q *candidates.Provider) bool { return q.Name == p.Name }) {
			out = append(out, p.Name)
		}
	}
	return out
}

// reloadFailed records a failed reload; key identifies the content (its
// digest, or the read error) so a file event repeating it is not reported
// again.
func (g *Gateway) reloadFailed(trigger, key string, err error) error {
	st := &g.reload
	if trigger == TriggerFile && key == st.failed {
		return err
	}
	st.failed = key
	st.errors++
	st.lastErr = &api.ConfigError{Message: err.Error(), At: time.Now()}
	g.Metrics.ConfigReload(metrics.ReloadError)
	g.Log.Error("routes reload failed; the routes in service keep serving", "trigger", trigger, "err", err)
	return err
}

// ConfigStatus implements api.ConfigSource.
func (g *Gateway) ConfigStatus() api.ConfigStatus {
	st := &g.reload
	st.mu.Lock()
	defer st.mu.Unlock()
	out := api.ConfigStatus{File: st.file, Digest: st.digest, LoadedAt: st.loadedAt,
		Reloads: api.ReloadCounts{Success: st.success, Error: st.errors}}
	if st.lastErr != nil {
		e := *st.lastErr
		out.LastError = &e
	}
	return out
}

// configMapData is the symlink a Kubernetes ConfigMap volume swaps on an
// update; the routes file is a symlink through it.
const configMapData = "..data"

// routesEvent reports whether a change of the watched directory may change
// the routes file: an event on the file's own name (a write, or a new file
// renamed over it) or on a ConfigMap's ..data. Anything else in the
// directory is ignored: a log written next to the file must not trigger
// reloads, nor debug lines about itself.
func routesEvent(file string, ev fsnotify.Event) bool {
	name := filepath.Base(ev.Name)
	return name == filepath.Base(file) || name == configMapData
}

// WatchConfig reloads the routes file on every receive from hup (SIGHUP)
// and, debounced, on every change of the file: the watch is on the file's
// directory, which survives editors that replace the file by rename and
// Kubernetes ConfigMaps that swap a symlink, and keeps only the events of
// the file's name and of ..data (routesEvent). Without inotify it logs a
// warning and reloads on hup alone. stop ends the watch and waits for a
// reload in progress.
func (g *Gateway) WatchConfig(hup <-chan struct{}) (stop func()) {
	var events <-chan fsnotify.Event
	var errs <-chan error
	w, err := fsnotify.NewWatcher()
	if err == nil {
		if err = w.Add(filepath.Dir(g.reload.file)); err == nil {
			events, errs = w.Events, w.Errors
		} else {
			_ = w.Close()
			w = nil
		}
	}
	if err != nil {
		g.Log.Warn("cannot watch the routes file; SIGHUP still reloads it", "file", g.reload.file, "err", err)
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		timer := time.NewTimer(time.Hour)
		timer.Stop()
		defer timer.Stop()
		var fire <-chan time.Time
		for {
			select {
			case <-quit:
				return
			case <-hup:
				_ = g.Reload(TriggerSignal)
			case ev, ok := <-events:
				if !ok {
					events = nil
					continue
				}
				if !routesEvent(g.reload.file, ev) {
					continue
				}
				g.Log.Debug("routes file changed", "name", ev.Name, "op", ev.Op.String())
				timer.Reset(reloadDebounce)
				fire = timer.C
			case err, ok := <-errs:
				if !ok {
					errs = nil
					continue
				}
				g.Log.Warn("routes file watch", "err", err)
			case <-fire:
				fire = nil
				_ = g.Reload(TriggerFile)
			}
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() {
			close(quit)
			wg.Wait()
			if w != nil {
				_ = w.Close()
			}
		})
	}
}
