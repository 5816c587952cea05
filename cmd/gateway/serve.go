package main

import (
	"context"
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
	if cfg.MetricsAddr != "" {
		if err := serveMetrics(ctx, g, cfg.MetricsAddr, log); err != nil {
			g.Close(context.Background())
			return err
		}
	}
	log.Info("gateway listening", "addr", ln.Addr().String(), "models", len(g.Planner.Models()),
		"hold_mode", cfg.HoldMode.String(), "execution_gate_limit", cfg.ExecutionGateLimit,
		"records", g.Reports != nil)
	return g.Run(ctx, ln)
}

// serveMetrics runs the optional separate /metrics listener until ctx ends.
func serveMetrics(ctx context.Context, g *server.Gateway, addr string, log *slog.Logger) error {
	h := g.MetricsHandler()
	if h == nil {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen GATEWAY_METRICS_ADDR %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	context.AfterFunc(ctx, func() { _ = srv.Close() })
	log.Info("metrics listening", "addr", ln.Addr().String())
	return nil
}
