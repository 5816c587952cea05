package api

import (
	"context"
	"net/http"
	"time"

	"github.com/llmgw/gateway/internal/budget"
	"github.com/llmgw/gateway/internal/report"
)

// SpendReader is what GET /admin/spend reads from the record store
// (*report.Writer): cost per group over a window, and over time.
type SpendReader interface {
	Spend(ctx context.Context, by string, since time.Time) ([]report.SpendRow, error)
	SpendSeries(ctx context.Context, by string, since time.Time, bucket time.Duration) ([]report.SpendPoint, error)
}

var _ SpendReader = (*report.Writer)(nil)

// spendWindows are the windows /admin/spend answers, each with the bucket
// of its series: about 24 to 48 points, a chart's worth.
var spendWindows = map[string]struct{ span, bucket time.Duration }{
	"1h":  {time.Hour, 5 * time.Minute},
	"24h": {24 * time.Hour, time.Hour},
	"7d":  {7 * 24 * time.Hour, 6 * time.Hour},
	"30d": {30 * 24 * time.Hour, 24 * time.Hour},
}

// spendAnswer is GET /admin/spend's body.
type spendAnswer struct {
	By     string              `json:"by"`
	Window string              `json:"window"`
	Since  time.Time           `json:"since"`
	Bucket string              `json:"bucket"`
	Groups []report.SpendRow   `json:"groups"`
	Series []report.SpendPoint `json:"series"`
}

// adminSpend serves GET /admin/spend?by=client|team|model|provider&window=1h|24h|7d|30d
// (defaults model and 24h): per group the requests, tokens and cost over
// the window, and the cost over time in buckets for the console's chart.
func (s *Server) adminSpend(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	by, ok := single(w, r, q, "by")
	if !ok {
		return
	}
	switch by {
	case "":
		by = report.SpendByModel
	case report.SpendByClient, report.SpendByTeam, report.SpendByModel, report.SpendByProvider:
	default:
		badParam(w, r, "by", "by must be one of client, team, model, provider")
		return
	}
	window, ok := single(w, r, q, "window")
	if !ok {
		return
	}
	if window == "" {
		window = "24h"
	}
	win, known := spendWindows[window]
	if !known {
		badParam(w, r, "window", "window must be one of 1h, 24h, 7d, 30d")
		return
	}
	l, _ := s.opts.Reports.(SpendReader)
	if s.opts.Reports == nil || l == nil {
		recordsOff(w, r)
		return
	}
	since := time.Now().Add(-win.span).UTC().Truncate(time.Second)
	groups, err := l.Spend(r.Context(), by, since)
	if err != nil {
		s.storeUnavailable(w, r, "admin spend failed", err)
		return
	}
	series, err := l.SpendSeries(r.Context(), by, since, win.bucket)
	if err != nil {
		s.storeUnavailable(w, r, "admin spend series failed", err)
		return
	}
	if groups == nil {
		groups = []report.SpendRow{}
	}
	if series == nil {
		series = []report.SpendPoint{}
	}
	s.writeAdmin(w, spendAnswer{By: by, Window: window, Since: since, Bucket: win.bucket.String(), Groups: groups, Series: series})
}

// BudgetReader is what GET /admin/budgets reads (*budget.Budgets).
type BudgetReader interface {
	Snapshot(ctx context.Context) []budget.Status
}

// adminBudgets serves GET /admin/budgets: each configured budget with its
// window, limit, spent, reserved, remaining and when it resets.
func (s *Server) adminBudgets(w http.ResponseWriter, r *http.Request) {
	list := []budget.Status{}
	if br, ok := s.opts.Budgets.(BudgetReader); ok {
		if got := br.Snapshot(r.Context()); got != nil {
			list = got
		}
	}
	s.writeAdmin(w, map[string]any{"budgets": list})
}
