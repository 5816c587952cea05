package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// profile captures the gateway's CPU profile and allocation delta over 10 s of load
// (non-streaming at 1,000 RPS, then streams), into s.pprofDir. These runs are not in
// the table: profiling itself costs some CPU.
func (b *bencher) profile(ctx context.Context, nonStream, stream *request) error {
	dir := b.s.pprofDir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	loads := []struct {
		name string
		rq   *request
		rate int
	}{
		{"nonstream-1000rps", nonStream, 1000},
		{"stream-200ps", stream, 200},
	}
	for _, l := range loads {
		if ctx.Err() != nil {
			return nil
		}
		cpu0, _ := b.st.gateway.cpu()
		var wg sync.WaitGroup
		var res runResult
		wg.Go(func() {
			res = openLoop(ctx, b.clients[gateway], b.urls[gateway]+chatPath, l.rq,
				openLoopSpec{rate: l.rate, duration: 12 * time.Second, maxInFlight: maxInFlight, timeout: requestTimeout})
		})
		sleepCtx(ctx, time.Second)
		errs := make(chan error, 2)
		var pw sync.WaitGroup
		for kind, path := range map[string]string{
			"cpu":    "/debug/pprof/profile?seconds=10",
			"allocs": "/debug/pprof/allocs?seconds=10",
		} {
			pw.Go(func() {
				out := filepath.Join(dir, fmt.Sprintf("gateway-%s-%s.pprof", l.name, kind))
				errs <- b.fetchProfile(ctx, path, out)
			})
		}
		pw.Wait()
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				return err
			}
		}
		cpu1, _ := b.st.gateway.cpu()
		var a agg
		a.add(res)
		logf("profiled gateway under %s (%d req, %d err; the gateway used %.1f CPU-s over the 12 s run, %.0f µs/req) into %s",
			l.name, a.requests, a.errors(), (cpu1 - cpu0).Seconds(), float64(cpu1-cpu0)/1e3/float64(max(1, a.requests)), dir)
	}
	logf("read them with: go tool pprof -top bin/gateway %s/gateway-nonstream-1000rps-cpu.pprof", dir)
	return nil
}

func (b *bencher) fetchProfile(ctx context.Context, path, out string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.st.gateURL+path, nil)
	req.Header.Set("Authorization", "Bearer "+b.st.adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("pprof %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("pprof %s: status %d: %s", path, resp.StatusCode, body)
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
