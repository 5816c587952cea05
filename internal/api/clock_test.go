package api

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/admission"
	"github.com/llmgw/gateway/internal/candidates"
	"github.com/llmgw/gateway/internal/report"
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
	routes, err := candidates.ParseRoutes([]byte(`
providers:
  - { name: p, base_url: "`+uts.URL+`/v1", api_keys: [k], max_concurrency: 4 }
models:
  - name: m
    candidates: [ { provider: p } ]
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	planner, err := candidates.NewPlanner(routes, candidates.PlannerOptions{DefaultQueueBudget: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	client := upstream.NewClient(upstream.ClientOptions{Provider: "p"})
	t.Cleanup(client.CloseIdle)
	sched := admission.New(admission.Config{})
	t.Cleanup(func() { _ = sched.Close(context.Background()) })
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
	rec.mu.Lock()
	defer rec.mu.Unlock()
	last := rec.rows[len(rec.rows)-1]
	if !last.CreatedAt.Equal(at) || !last.FinishedAt.Equal(at) || last.Latency != 0 {
		t.Fatalf("request row created %s, finished %s, latency %s; want all on the loop's clock (%s, %s, 0)",
			last.CreatedAt, last.FinishedAt, last.Latency, at, at)
	}
}
