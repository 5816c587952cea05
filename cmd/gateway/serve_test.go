package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/llmgw/gateway/internal/config"
	"github.com/llmgw/gateway/internal/routes"
	"github.com/llmgw/gateway/internal/server"
)

var errAcceptBroken = errors.New("accept: listener broken")

// brokenListener accepts nothing and fails for good once broken is closed,
// as a listener whose socket the kernel took away would.
type brokenListener struct {
	net.Listener
	broken    chan struct{}
	closed    chan struct{}
	closeOnce sync.Once
}

func (l *brokenListener) Accept() (net.Conn, error) {
	select {
	case <-l.broken:
		return nil, errAcceptBroken
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *brokenListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// newTestGateway assembles a gateway (records off) in this process.
func newTestGateway(t *testing.T, log *slog.Logger) *server.Gateway {
	t.Helper()
	cfg, _, err := config.Load(map[string]string{"GATEWAY_SHUTDOWN_GRACE": "5s"})
	if err != nil {
		t.Fatal(err)
	}
	routes, err := routes.Parse([]byte(`
providers:
  - name: primary
    base_url: http://127.0.0.1:9/v1
    api_keys: ["k"]
    max_concurrency: 1
models:
  - name: m
    candidates: [{ provider: primary }]
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	g, err := server.New(context.Background(), cfg, routes, log)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func listenLoopback(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// TestMetricsListenerFailureStopsGateway: when the separate metrics listener
// dies, the gateway does not run on blind: it drains the API listener and
// returns the listener's error (so the process exits non-zero), and no
// goroutine of either listener outlives the call.
func TestMetricsListenerFailureStopsGateway(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var logs bytes.Buffer
	g := newTestGateway(t, slog.New(slog.NewJSONHandler(&logs, nil)))
	ln := listenLoopback(t)
	mln := &brokenListener{Listener: listenLoopback(t), broken: make(chan struct{}), closed: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- runListeners(context.Background(), g, ln, mln) }()

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + ln.Addr().String() + "/healthz")
	if err != nil {
		t.Fatalf("API listener before the failure: %v", err)
	}
	resp.Body.Close()

	close(mln.broken)
	select {
	case err := <-done:
		if !errors.Is(err, errAcceptBroken) {
			t.Fatalf("runListeners returned %v, want the metrics listener's error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("gateway kept running after its metrics listener died")
	}
	if _, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		t.Error("API listener still accepts after the gateway stopped")
	}
	if !strings.Contains(logs.String(), `"msg":"shutting down","reason":"metrics listener`) {
		t.Errorf("the drain does not say why it started:\n%s", logs.String())
	}
}

// TestMetricsListenerClosedAfterDrain: a normal stop closes the metrics
// listener too, and runListeners returns only once its goroutine has ended.
func TestMetricsListenerClosedAfterDrain(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	g := newTestGateway(t, slog.New(slog.DiscardHandler))
	ln, mln := listenLoopback(t), listenLoopback(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runListeners(ctx, g, ln, mln) }()

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + mln.Addr().String() + "/metrics")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %v %v", resp, err)
	}
	resp.Body.Close()

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("runListeners after a normal stop: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("runListeners did not return after its context ended")
	}
	if _, err := net.DialTimeout("tcp", mln.Addr().String(), time.Second); err == nil {
		t.Error("metrics listener still accepts after the gateway stopped")
	}
}
