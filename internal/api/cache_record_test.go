package api

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/cache"
	"github.com/llmgw/gateway/internal/candidates"
	"github.com/llmgw/gateway/internal/metrics"
	"github.com/llmgw/gateway/internal/mockupstream"
	"github.com/llmgw/gateway/internal/report"
	"github.com/llmgw/gateway/internal/routes"
	"github.com/llmgw/gateway/internal/upstream"
)

// brokenStore is a CacheStore that fails as told: getErr from every Get,
// Get blocking until its deadline (hang), or answering a stored entry
// only after 30 ms, past storeTimeout (late); setErr from every Set.
type brokenStore struct {
	getErr, setErr error
	hang, late     bool
}

func (b brokenStore) Get(ctx context.Context, _ cache.Key) (cache.Entry, bool, error) {
	switch {
	case b.hang:
		<-ctx.Done()
		return cache.Entry{}, false, ctx.Err()
	case b.late:
		time.Sleep(30 * time.Millisecond) // a store that does not watch ctx
		now := time.Now()
		return cache.Entry{Body: []byte(`{"stale":true}`), Stored: now, Expires: now.Add(time.Minute)}, true, nil
	}
	return cache.Entry{}, false, b.getErr
}

func (b brokenStore) Set(context.Context, cache.Key, cache.Entry) error { return b.setErr }

// TestCacheStoreFailureIsAMiss: a store whose Get fails, hangs past the
// 20 ms bound or answers after it is a miss: the client is answered 200
// by the provider, x-gateway-cache says miss, the row says miss, and
// gateway_cache_store_errors_total{op="get"} counts each; a Set that fails
// is counted under op="set" and the answer goes out all the same.
func TestCacheStoreFailureIsAMiss(t *testing.T) {
	down := errors.New("store down")
	for _, tc := range []struct {
		name          string
		store         brokenStore
		gets, sets    float64
		wantTakesLong bool
	}{
		{"get fails", brokenStore{getErr: down}, 2, 0, false},
		{"get hangs", brokenStore{hang: true}, 2, 0, true},
		{"get answers late", brokenStore{late: true}, 2, 0, true},
		{"set fails", brokenStore{setErr: down}, 0, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mock := mockupstream.New(mockupstream.Behavior{})
			uts := httptest.NewServer(mock)
			t.Cleanup(uts.Close)
			m := metrics.New(metrics.Sources{})
			rec := &lastRequest{}
			gts := cachedServer(t, uts.URL, tc.store, m, rec)
			hc := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
			t.Cleanup(hc.CloseIdleConnections)
			for i := range 2 {
				start := time.Now()
				resp, err := hc.Post(gts.URL+"/v1/chat/completions", "application/json",
					strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || resp.Header.Get(headerCache) != "miss" || strings.Contains(string(body), "stale") {
					t.Fatalf("request %d: %d, x-gateway-cache %q: %s; want the provider's 200, miss", i, resp.StatusCode, resp.Header.Get(headerCache), body)
				}
				if took := time.Since(start); tc.wantTakesLong && took < storeTimeout {
					t.Errorf("request %d took %s: the store was not waited on", i, took)
				}
			}
			if got := mock.Stats().Requests; got != 2 {
				t.Errorf("provider saw %d requests, want 2", got)
			}
			// The store's Set runs once the answer is written, so the
			// client can hold the body before the second is counted.
			for op, want := range map[string]float64{metrics.CacheOpGet: tc.gets, metrics.CacheOpSet: tc.sets} {
				got := counterValue(t, m, "gateway_cache_store_errors_total", "op", op)
				for deadline := time.Now().Add(5 * time.Second); got < want && time.Now().Before(deadline); {
					time.Sleep(5 * time.Millisecond)
					got = counterValue(t, m, "gateway_cache_store_errors_total", "op", op)
				}
				if got != want {
					t.Errorf("gateway_cache_store_errors_total{op=%q} = %v, want %v", op, got, want)
				}
			}
			rows := rec.final(t, 2)
			for _, r := range rows {
				if r.Cache != report.CacheMiss || r.Status != report.RequestSuccess {
					t.Errorf("row cache %q status %s, want miss, success", r.Cache, r.Status)
				}
			}
		})
	}
}

// cachedServer is a gateway API with model m cached on one provider at
// upstreamURL, its response cache in store.
func cachedServer(t *testing.T, upstreamURL string, store CacheStore, m *metrics.Metrics, rec *lastRequest) *httptest.Server {
	t.Helper()
	planner, sched, client := oneProvider(t, upstreamURL, `{ name: m, cache: { ttl: 1m }, candidates: [ { provider: p } ] }`)
	s := New(Options{Planner: planner, Admission: sched, CacheStore: store, Observe: m,
		Runner:          &candidates.Runner{Admit: sched, Record: rec, Observe: m, Upstreams: map[string]candidates.Sender{"p": client}},
		MaxRequestBytes: 1 << 20, Logger: slog.New(slog.DiscardHandler)})
	gts := httptest.NewServer(s)
	t.Cleanup(gts.Close)
	return gts
}

// oneProvider plans model (one YAML flow mapping) on provider p at
// upstreamURL: the planner, a scheduler and p's client, closed when the
// test ends.
func oneProvider(t *testing.T, upstreamURL, model string) (*candidates.Planner, *admission.Scheduler, *upstream.Client) {
	t.Helper()
	rt, err := routes.Parse([]byte(`
providers:
  - { name: p, base_url: "`+upstreamURL+`/v1", api_keys: [k], max_concurrency: 4 }
models:
  - `+model+`
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	planner, err := candidates.NewPlanner(rt, candidates.PlannerOptions{DefaultQueueBudget: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	client := upstream.NewClient(upstream.ClientOptions{Provider: "p"})
	t.Cleanup(client.CloseIdle)
	sched := admission.New(admission.Config{})
	t.Cleanup(func() { _ = sched.Close(context.Background()) })
	return planner, sched, client
}

// counterValue reads counter name's child whose label is value from m's
// registry, as a scrape would; a missing child fails the test.
func counterValue(t *testing.T, m *metrics.Metrics, name, label, value string) float64 {
	t.Helper()
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, c := range f.GetMetric() {
			for _, l := range c.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return c.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("%s{%s=%q} is not exported", name, label, value)
	return 0
}

// final waits for n final request rows (a row is recorded just after
// the client read its last byte) and returns them.
func (l *lastRequest) final(t *testing.T, n int) []report.Request {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		var done []report.Request
		l.mu.Lock()
		for _, r := range l.rows {
			if r.Status != report.RequestPending {
				done = append(done, r)
			}
		}
		l.mu.Unlock()
		if len(done) >= n || time.Now().After(deadline) {
			if len(done) != n {
				t.Fatalf("%d final request rows, want %d", len(done), n)
			}
			return done
		}
		time.Sleep(5 * time.Millisecond)
	}
}
