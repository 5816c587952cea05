package report

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/llmgw/gateway/internal/budget"
)

// spendNow is the moment the spend tests read at: a Wednesday, so its day,
// week (from Monday 2 March), month and total windows all differ.
var spendNow = time.Date(2026, 3, 4, 15, 30, 0, 0, time.UTC)

// spendReq is one request of the spend ledger and its attempts' providers
// (each with usage; "!" before a name: an attempt that failed before its
// commit point, without usage, billed nothing).
type spendReq struct {
	at                  string // RFC 3339, UTC
	client, team, model string
	cost                float64 // < 0: unpriced (usage, no cost)
	providers           []string
}

// spendLedger: two clients of team search (web, web2), one of team ads
// (batch), one request without client or team; priced and unpriced
// models; requests on each side of the window starts, one exactly at
// the day's start (windows include their start).
var spendLedger = []spendReq{
	{"2026-02-27T10:00:00Z", "web", "search", "m-cheap", 1.0, []string{"openai"}},           // total only
	{"2026-03-01T08:00:00Z", "web", "search", "m-dear", 0.5, []string{"openai"}},            // month, a Sunday: not the week
	{"2026-03-03T23:59:59.5Z", "batch", "ads", "m-dear", 0.02, []string{"openai"}},          // week, not the day
	{"2026-03-04T00:00:00Z", "batch", "ads", "m-cheap", 0.004, []string{"openai"}},          // the day's first instant
	{"2026-03-04T09:10:00Z", "web", "search", "m-dear", 0.02, []string{"!azure", "openai"}}, // failed over
	{"2026-03-04T10:20:00Z", "web", "search", "m-cheap", 0.0014, []string{"openai"}},
	{"2026-03-04T11:00:00Z", "batch", "ads", "m-cheap", -1, []string{"openai"}},      // unpriced
	{"2026-03-04T12:00:00Z", "", "", "m-cheap", 0.003, []string{"openai", "openai"}}, // no client key; cut, resumed on the same provider
	{"2026-03-04T13:00:00Z", "web2", "search", "m-dear", 0.1, []string{"anthropic"}},
}

// writeSpendLedger upserts spendLedger, each request with 1000 prompt, 200
// completion and 100 cached tokens, and its attempts, each with those
// tokens and an equal share of the cost. Its writer's session
// runs in Asia/Kolkata (+05:30), so a read that cut days in the session's
// zone rather than in UTC would put requests in the wrong buckets.
func writeSpendLedger(t *testing.T) *Writer {
	t.Helper()
	dsn := migratedURL(t)
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	w := connectedWriter(t, dsn+sep+"timezone=Asia/Kolkata")
	var tz string
	if err := w.pool.Load().QueryRow(context.Background(), "SHOW TimeZone").Scan(&tz); err != nil || tz != "Asia/Kolkata" {
		t.Fatalf("session time zone %q (%v), want Asia/Kolkata", tz, err)
	}
	var recs []record
	for _, s := range spendLedger {
		at, err := time.Parse(time.RFC3339Nano, s.at)
		if err != nil {
			t.Fatal(err)
		}
		id := uuid.New()
		r := Request{ID: id, CreatedAt: at, Model: s.model, Client: s.client, Team: s.team, Status: RequestSuccess,
			StatusCode: 200, CandidateCount: len(s.providers), HasUsage: true, PromptTokens: 1000, CompletionTokens: 200,
			TotalTokens: 1200, CachedTokens: 100, HasCost: s.cost >= 0, CostUSD: max(s.cost, 0)}
		recs = append(recs, record{kind: kindRequest, req: r})
		billed := 0
		for _, p := range s.providers {
			if !strings.HasPrefix(p, "!") {
				billed++
			}
		}
		for i, p := range s.providers {
			c := Candidate{RequestID: id, Index: i, Provider: strings.TrimPrefix(p, "!"), Model: s.model, Status: CandidateSuccess,
				StatusCode: 200, CreatedAt: at, StartedAt: at}
			if strings.HasPrefix(p, "!") {
				c.Status, c.StatusCode = CandidateFailed, 500
			} else {
				c.HasUsage, c.PromptTokens, c.CompletionTokens, c.CachedTokens = true, 1000, 200, 100
				c.HasCost, c.CostUSD = s.cost >= 0, max(s.cost, 0)/float64(billed)
			}
			recs = append(recs, record{kind: kindCandidate, cand: c})
		}
	}
	mustUpsert(t, w, recs)
	return w
}

// spendRows renders Spend's answer as "group requests cost unpriced
// input output cached; ...", costs to 1e-9 USD.
func spendRows(rows []SpendRow) string {
	var s []string
	for _, r := range rows {
		s = append(s, fmt.Sprintf("%s %d %.9f %d %d %d %d", r.Group, r.Requests, r.CostUSD, r.Unpriced,
			r.InputTokens, r.OutputTokens, r.CachedTokens))
	}
	return strings.Join(s, "; ")
}

// TestSpendGroups: the day's spend per client, team, model and provider,
// ordered by cost, the unpriced counted apart, the request without a
// client under "", an attempt that failed before its commit point not
// counted for its provider, and a request with two billed attempts on one
// provider counted once (its tokens twice: both were billed). Over longer windows the same client's
// spend grows by the requests each window adds.
func TestSpendGroups(t *testing.T) {
	w := writeSpendLedger(t)
	ctx := context.Background()
	day := budget.Day.Start(spendNow)
	for _, tc := range []struct {
		by, want string
	}{
		{SpendByClient, "web2 1 0.100000000 0 1000 200 100; web 2 0.021400000 0 2000 400 200; " +
			"batch 2 0.004000000 1 2000 400 200;  1 0.003000000 0 1000 200 100"},
		{SpendByTeam, "search 3 0.121400000 0 3000 600 300; ads 2 0.004000000 1 2000 400 200;  1 0.003000000 0 1000 200 100"},
		{SpendByModel, "m-dear 2 0.120000000 0 2000 400 200; m-cheap 4 0.008400000 1 4000 800 400"},
		{SpendByProvider, "anthropic 1 0.100000000 0 1000 200 100; openai 5 0.028400000 1 6000 1200 600"},
	} {
		rows, err := w.Spend(ctx, tc.by, day)
		if err != nil {
			t.Fatalf("Spend(%s): %v", tc.by, err)
		}
		if got := spendRows(rows); got != tc.want {
			t.Errorf("Spend(%s, day)\n got %s\nwant %s", tc.by, got, tc.want)
		}
	}

	// Client web over each window: the day, the week (from Monday), the
	// month and all time.
	for _, tc := range []struct {
		per  budget.Per
		want float64
	}{{budget.Day, 0.0214}, {budget.Week, 0.0214}, {budget.Month, 0.5214}, {budget.Total, 1.5214}} {
		rows, err := w.Spend(ctx, SpendByClient, tc.per.Start(spendNow))
		if err != nil {
			t.Fatal(err)
		}
		got := math.NaN()
		for _, r := range rows {
			if r.Group == "web" {
				got = r.CostUSD
			}
		}
		if math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("client web's spend over the %s: %v, want %v", tc.per, got, tc.want)
		}
	}

	if _, err := w.Spend(ctx, "key", day); !errors.Is(err, ErrSpendGroup) {
		t.Errorf("Spend by key: %v, want ErrSpendGroup", err)
	}
	if rows, err := w.Spend(ctx, SpendByTeam, spendNow); err != nil || len(rows) != 0 {
		t.Errorf("Spend since now: %v %v, want nothing", rows, err)
	}
}

// seriesPoints renders SpendSeries's answer as "bucket group cost
// requests; ..." with buckets in RFC 3339.
func seriesPoints(ps []SpendPoint) string {
	var s []string
	for _, p := range ps {
		if p.Bucket.Location() != time.UTC {
			return "bucket " + p.Bucket.String() + " is not in UTC"
		}
		s = append(s, fmt.Sprintf("%s %s %.9f %d", p.Bucket.Format(time.RFC3339), p.Group, p.CostUSD, p.Requests))
	}
	return strings.Join(s, "; ")
}

// TestSpendSeries: the cost per group and bucket, buckets aligned on the
// window's start in UTC whatever the session's time zone (whole UTC days
// from Monday, hours from the day's start, and half hours past when the
// window starts at :30), empty buckets absent, an unpriced request counted
// with cost 0, and by provider each request once per provider, as Spend
// counts them.
func TestSpendSeries(t *testing.T) {
	w := writeSpendLedger(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		by     string
		since  time.Time
		bucket time.Duration
		want   string
	}{
		{"the week in days, by client", SpendByClient, budget.Week.Start(spendNow), 24 * time.Hour,
			"2026-03-03T00:00:00Z batch 0.020000000 1; 2026-03-04T00:00:00Z  0.003000000 1; " +
				"2026-03-04T00:00:00Z batch 0.004000000 2; 2026-03-04T00:00:00Z web 0.021400000 2; " +
				"2026-03-04T00:00:00Z web2 0.100000000 1"},
		{"the day in hours, by team", SpendByTeam, budget.Day.Start(spendNow), time.Hour,
			"2026-03-04T00:00:00Z ads 0.004000000 1; 2026-03-04T09:00:00Z search 0.020000000 1; " +
				"2026-03-04T10:00:00Z search 0.001400000 1; 2026-03-04T11:00:00Z ads 0.000000000 1; " +
				"2026-03-04T12:00:00Z  0.003000000 1; 2026-03-04T13:00:00Z search 0.100000000 1"},
		{"from 09:30 in hours, by model", SpendByModel, time.Date(2026, 3, 4, 9, 30, 0, 0, time.UTC), time.Hour,
			"2026-03-04T09:30:00Z m-cheap 0.001400000 1; 2026-03-04T10:30:00Z m-cheap 0.000000000 1; " +
				"2026-03-04T11:30:00Z m-cheap 0.003000000 1; 2026-03-04T12:30:00Z m-dear 0.100000000 1"},
		{"the month in weeks, by provider", SpendByProvider, budget.Month.Start(spendNow), 7 * 24 * time.Hour,
			"2026-03-01T00:00:00Z anthropic 0.100000000 1; 2026-03-01T00:00:00Z openai 0.548400000 7"},
	} {
		ps, err := w.SpendSeries(ctx, tc.by, tc.since, tc.bucket)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := seriesPoints(ps); got != tc.want {
			t.Errorf("%s\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
	if _, err := w.SpendSeries(ctx, SpendByModel, spendNow, 0); err == nil {
		t.Error("a zero bucket was accepted")
	}
	if _, err := w.SpendSeries(ctx, "key", spendNow, time.Hour); !errors.Is(err, ErrSpendGroup) {
		t.Errorf("SpendSeries by key: %v, want ErrSpendGroup", err)
	}
}

// TestSpentSince is the budgets' rebuild: one client's or team's spend
// since the start of its day, week, month or all time (UTC windows), the
// unpriced request adding nothing, a request at the window's first
// instant counted.
func TestSpentSince(t *testing.T) {
	w := writeSpendLedger(t)
	ctx := context.Background()
	want := map[string][4]float64{ // day, week, month, total
		"client web":   {0.0214, 0.0214, 0.5214, 1.5214},
		"client web2":  {0.1, 0.1, 0.1, 0.1},
		"client batch": {0.004, 0.024, 0.024, 0.024},
		"client none":  {0, 0, 0, 0},
		"team search":  {0.1214, 0.1214, 0.6214, 1.6214},
		"team ads":     {0.004, 0.024, 0.024, 0.024},
	}
	for who, sums := range want {
		owner, name, _ := strings.Cut(who, " ")
		for i, per := range []budget.Per{budget.Day, budget.Week, budget.Month, budget.Total} {
			got, err := w.SpentSince(ctx, owner, name, per.Start(spendNow))
			if err != nil {
				t.Fatalf("SpentSince(%s, %s): %v", who, per, err)
			}
			if math.Abs(got-sums[i]) > 1e-9 {
				t.Errorf("%s spent %v over the %s, want %v", who, got, per, sums[i])
			}
		}
	}
	if _, err := w.SpentSince(ctx, "key", "web", spendNow); err == nil {
		t.Error("owner key was accepted")
	}
}

// TestSpendWindowStarts pins the window starts the tests above read
// from, so a change to them shows here rather than as a wrong sum.
func TestSpendWindowStarts(t *testing.T) {
	for per, want := range map[budget.Per]time.Time{
		budget.Day:   time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC),
		budget.Week:  time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC),
		budget.Month: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC),
		budget.Total: {},
	} {
		if got := per.Start(spendNow); !got.Equal(want) {
			t.Errorf("%s starts %s, want %s", per, got, want)
		}
	}
}
