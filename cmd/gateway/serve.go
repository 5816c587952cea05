package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/llmgw/gateway/internal/candidates"
	"github.com/llmgw/gateway/internal/config"
	"github.com/llmgw/gateway/internal/server"
)

// metricsShutdownTimeout bounds the wait for scrapes in flight on the separate
// metrics listener once the gateway has drained.
const metricsShutdownTimeout = 5 * time.Second

func serve(cfg config.Config, log *slog.Logger) error {
	routes, err := candidates.LoadRoutes(cfg.RoutesFile)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	g, err := server.New(context.Background(), cfg, routes, log)
	if err != nil {
		return err
	}
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
	return runListeners(ctx, g, ln, mln)
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
