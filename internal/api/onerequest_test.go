package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/candidates"
	"github.com/llmgw/gateway/internal/quota"
	"github.com/llmgw/gateway/internal/report"
	"github.com/llmgw/gateway/internal/routes"
	"github.com/llmgw/gateway/internal/upstream"
	"github.com/llmgw/gateway/internal/watchdog"
)

// stoppedClock is a loop clock that reads one fixed time; its timers run on
// real time.
type stoppedClock struct{ at time.Time }

func (c stoppedClock) Now() time.Time { return c.at }
func (stoppedClock) AfterFunc(d time.Duration, f func()) watchdog.Timer {
	return time.AfterFunc(d, f)
}

// lastRequest keeps the request rows it is given.
type lastRequest struct {
	mu   sync.Mutex
	rows []report.Request
}

func (l *lastRequest) RecordRequest(r report.Request) {
	l.mu.Lock()
	l.rows = append(l.rows, r)
	l.mu.Unlock()
}
func (l *lastRequest) RecordCandidate(report.Candidate) {}

// TestReceiptOnTheLoopsClock protects one clock per request: the handler
// stamps a request's receipt with the attempt loop's clock, so with a fake
// loop clock the request row's created_at, its finish and its latency all
// agree (no wall-clock receipt mixed with fake-clock ends).
func TestReceiptOnTheLoopsClock(t *testing.T) {
	uts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"x","choices":[]}`)
	}))
	t.Cleanup(uts.Close)
	planner, sched, client := oneProvider(t, uts.URL, `{ name: m, candidates: [ { provider: p } ] }`)
	rec := &lastRequest{}
	at := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	s := New(Options{Planner: planner, Admission: sched,
		Runner: &candidates.Runner{Admit: sched, Record: rec, Clock: stoppedClock{at},
			Upstreams: map[string]candidates.Sender{"p": client}},
		MaxRequestBytes: 1 << 20, Logger: slog.New(slog.DiscardHandler)})
	gts := httptest.NewServer(s)
	t.Cleanup(gts.Close)
	hc := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	t.Cleanup(hc.CloseIdleConnections)
	resp, err := hc.Post(gts.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	// The finished row is recorded once the relay ends, which can be just
	// after the client has read the last byte: wait for it.
	var last report.Request
	for deadline := time.Now().Add(5 * time.Second); ; {
		rec.mu.Lock()
		n := len(rec.rows)
		if n > 0 {
			last = rec.rows[n-1]
		}
		rec.mu.Unlock()
		if !last.FinishedAt.IsZero() || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !last.CreatedAt.Equal(at) || !last.FinishedAt.Equal(at) || last.Latency != 0 {
		t.Fatalf("request row created %s, finished %s, latency %s; want all on the loop's clock (%s, %s, 0)",
			last.CreatedAt, last.FinishedAt, last.Latency, at, at)
	}
}

// tokenTally records the limits each count of tokens was made against.
type tokenTally struct {
	mu     sync.Mutex
	counts []quota.Limits
}

func (c *tokenTally) Admit(context.Context, string, quota.Limits) quota.RateState {
	return quota.RateState{Allowed: true}
}
func (c *tokenTally) AddTokens(_ context.Context, _ string, l quota.Limits, _ int) error {
	c.mu.Lock()
	c.counts = append(c.counts, l)
	c.mu.Unlock()
	return nil
}

// TestTokensCountedOnThePlannedRoutes protects a request from a routes
// reload while it runs: its tokens are counted against the client's limits
// in the routes file it was planned with, not the one loaded meanwhile.
func TestTokensCountedOnThePlannedRoutes(t *testing.T) {
	var s *Server
	var reload func()
	uts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		reload() // the request is planned: a reload lands while it runs
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"x","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`)
	}))
	t.Cleanup(uts.Close)
	sum := sha256.Sum256([]byte("c-token"))
	routesWith := func(tpm int) (*routes.Routes, *candidates.Planner) {
		routes, err := routes.Parse([]byte(`
providers:
  - { name: p, base_url: "`+uts.URL+`/v1", api_keys: [k], max_concurrency: 4 }
models:
  - name: m
    candidates: [ { provider: p } ]
clients:
  - { name: c, key_sha256: "`+hex.EncodeToString(sum[:])+`", tokens_per_minute: `+strconv.Itoa(tpm)+` }
`), func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatal(err)
		}
		planner, err := candidates.NewPlanner(routes, candidates.PlannerOptions{DefaultQueueBudget: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return routes, planner
	}
	routes, planner := routesWith(1000)
	newRoutes, newPlanner := routesWith(5)
	reload = func() { s.SetRouting(NewRouting(newRoutes, newPlanner, NewClientKeys(newRoutes.Clients))) }
	client := upstream.NewClient(upstream.ClientOptions{Provider: "p"})
	t.Cleanup(client.CloseIdle)
	sched := admission.New(admission.Config{})
	t.Cleanup(func() { _ = sched.Close(context.Background()) })
	tally := &tokenTally{}
	s = New(Options{Planner: planner, Routes: routes, Clients: NewClientKeys(routes.Clients), Admission: sched,
		Rates:           tally,
		Runner:          &candidates.Runner{Admit: sched, Record: &lastRequest{}, Upstreams: map[string]candidates.Sender{"p": client}},
		MaxRequestBytes: 1 << 20, Logger: slog.New(slog.DiscardHandler)})
	gts := httptest.NewServer(s)
	t.Cleanup(gts.Close)
	hc := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	t.Cleanup(hc.CloseIdleConnections)
	req, _ := http.NewRequest(http.MethodPost, gts.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer c-token")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	tally.mu.Lock()
	defer tally.mu.Unlock()
	if len(tally.counts) != 1 || tally.counts[0].TokensPerMinute != 1000 {
		t.Fatalf("tokens counted against %+v, want once against the planned file's 1000 a minute", tally.counts)
	}
}
