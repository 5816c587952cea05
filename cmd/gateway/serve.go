package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/llmgw/gateway/internal/config"
	"github.com/llmgw/gateway/internal/gcfloor"
	"github.com/llmgw/gateway/internal/server"
)

// metricsShutdownTimeout bounds the wait for scrapes in flight on the separate
// metrics listener once the gateway has drained.
const metricsShutdownTimeout = 5 * time.Second

func serve(cfg config.Config, log *slog.Logger) error {
	rf, err := server.LoadRoutesFile(cfg)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w; %s", err, missingRoutesHint(cfg.RoutesFile))
		}
		return err
	}
	sigs := watchSignals(log)
	defer sigs.stop()
	// The GC percentage is the process's, so the command sets it, not the
	// packages it runs.
	defer gcfloor.Start(uint64(cfg.GCMinHeap)).Stop()
	g, err := server.NewFromFile(context.Background(), cfg, rf, log)
	if err != nil {
		return err
	}
	g.SkipDelay = sigs.skipDelay
	log = g.Log // redacts the secrets of the configuration and routes
	// SIGHUP or a change of the routes file reloads it; the watch ends
	// (after a reload in progress) when serve returns.
	stopWatch := g.WatchConfig(sigs.hup)
	defer stopWatch()
	ln, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		g.Close(context.Background())
		return fmt.Errorf("listen %s: %w", cfg.ListenAddr, err)
	}
	var mln net.Listener
	if cfg.MetricsAddr != "" {
		if mln, err = net.Listen("tcp", cfg.MetricsAddr); err != nil {
			ln.Close()
			g.Close(context.Background())
			return fmt.Errorf("listen GATEWAY_METRICS_ADDR %s: %w", cfg.MetricsAddr, err)
		}
		log.Info("metrics listening", "addr", mln.Addr().String())
	}
	log.Info("gateway listening", "addr", ln.Addr().String(), "models", len(g.Planner.Models()),
		"hold_mode", cfg.HoldMode.String(), "execution_gate_limit", cfg.ExecutionGateLimit,
		"records", g.Reports != nil)
	return runListeners(sigs.ctx, g, ln, mln)
}

// missingRoutesHint says where serve looked for the routes file and how to
// get one, for a first run without one.
func missingRoutesHint(file string) string {
	where := file
	if abs, err := filepath.Abs(file); err == nil {
		where = abs
	}
	from := "GATEWAY_CONFIG"
	if _, set := os.LookupEnv("GATEWAY_CONFIG"); !set {
		from = "the default, as GATEWAY_CONFIG is unset"
	}
	return fmt.Sprintf("looked for %s (%s); write a routes file there, for example from the source tree's "+
		"examples/openai.yaml (cp examples/openai.yaml gateway.yaml, then export OPENAI_API_KEY), "+
		"or set GATEWAY_CONFIG to yours", where, from)
}

// runListeners serves the API on ln until ctx ends and drains it (g.Run) and,
// when mln is not nil, serves /metrics alone on mln for as long. The metrics
// listener stays up through the drain, so the last scrapes still see the
// gateway's final counts, and is closed after it.
//
// A metrics listener that dies is fatal: a process that silently stops
// exporting metrics looks healthy to its supervisor while its alerts go blind.
// Its error starts the same drain as SIGTERM and is returned, so the process
// exits non-zero, as it does when the API listener fails.
func runListeners(ctx context.Context, g *server.Gateway, ln, mln net.Listener) error {
	if mln == nil {
		return g.Run(ctx, ln)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	mux := http.NewServeMux()
	mux.Handle("/metrics", g.MetricsHandler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(g.Log.Handler(), slog.LevelDebug)}
	metricsErr := make(chan error, 1)
	go func() {
		err := srv.Serve(mln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		} else {
			err = fmt.Errorf("metrics listener %s: %w", mln.Addr(), err)
			cancel(err)
		}
		metricsErr <- err
	}()
	runErr := g.Run(ctx, ln)
	sctx, scancel := context.WithTimeout(context.Background(), metricsShutdownTimeout)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	return errors.Join(runErr, <-metricsErr)
}

// signals turns the process's signals into the gateway's shutdown steps
// and routes reloads.
type signals struct {
	ctx       context.Context // ends on the first SIGTERM or SIGINT: drain
	skipDelay chan struct{}   // closed on the second: skip the shutdown delay
	hup       chan struct{}   // a SIGHUP: reload the routes (signals that arrive during a reload coalesce)
	stop      func()          // stops watching and waits for the watcher
}

// watchSignals starts the signal watcher; its owner must call stop. The
// first SIGTERM or SIGINT starts the drain. A second one skips whatever is
// left of GATEWAY_SHUTDOWN_DELAY, for an operator at a terminal who does not
// want to wait for load balancers; the drain itself still lets requests in
// flight finish within GATEWAY_SHUTDOWN_GRACE. Later ones are logged only.
// SIGHUP reloads the routes file (see "Reloading the routes" in
// docs/architecture.md).
func watchSignals(log *slog.Logger) *signals {
	c := make(chan os.Signal, 4)
	signal.Notify(c, syscall.SIGTERM, os.Interrupt, syscall.SIGHUP)
	ctx, begin := context.WithCancelCause(context.Background())
	s := &signals{ctx: ctx, skipDelay: make(chan struct{}), hup: make(chan struct{}, 1)}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		received := 0
		for {
			select {
			case <-quit:
				return
			case sig := <-c:
				if sig == syscall.SIGHUP {
					log.Info("SIGHUP received; reloading the routes file")
					select {
					case s.hup <- struct{}{}:
					default: // a reload is already due
					}
					continue
				}
				received++
				switch received {
				case 1:
					begin(fmt.Errorf("%s received", signalName(sig)))
				case 2:
					log.Info("second signal received; skipping any shutdown delay left", "signal", signalName(sig))
					close(s.skipDelay)
				default:
					log.Info("signal received while draining; ignoring", "signal", signalName(sig))
				}
			}
		}
	})
	s.stop = func() {
		signal.Stop(c)
		close(quit)
		wg.Wait()
		begin(nil)
	}
	return s
}

// signalName spells signals the way operators send them.
func signalName(sig os.Signal) string {
	switch sig {
	case syscall.SIGTERM:
		return "SIGTERM"
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGHUP:
		return "SIGHUP"
	}
	return sig.String()
}
