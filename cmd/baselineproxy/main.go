// Command baselineproxy is the baseline that cmd/bench measures the gateway against: a
// bare net/http/httputil.ReverseProxy to one upstream with a tuned transport, and nothing
// else (no routing, admission, records or metrics). What the gateway costs is the
// distance between it and this.
package main

import (
	"context"
	"flag"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8090", "listen address")
	upstream := flag.String("upstream", "http://127.0.0.1:9001", "upstream origin; request paths are kept")
	flag.Parse()
	target, err := url.Parse(*upstream)
	if err != nil || target.Host == "" {
		log.Fatalf("baselineproxy: bad -upstream %q", *upstream)
	}
	// The same choices the gateway's provider transport makes: a warm pool that covers
	// the peak concurrency, no proxy from the environment, no transparent compression.
	transport := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 4096,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	proxy := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport:     transport,
		FlushInterval: -1, // flush every write: SSE events pass as they arrive
	}
	srv := &http.Server{Addr: *addr, Handler: proxy, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatalf("baselineproxy: %v", err)
	}
	log.Printf("baselineproxy: listening on %s -> %s", ln.Addr(), target)

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	select {
	case err := <-served:
		log.Fatalf("baselineproxy: %v", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
}
