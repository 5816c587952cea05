package report

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Spend reads (docs/cost.md): what requests cost per client, team, model
// or provider over a window, the same over time, and one owner's spend
// since a time (the budgets' rebuild).

// Groups of Spend and SpendSeries.
const (
	SpendByClient   = "client"
	SpendByTeam     = "team"
	SpendByModel    = "model"
	SpendByProvider = "provider"
)

// ErrSpendGroup is a group Spend does not know.
var ErrSpendGroup = errors.New("report: spend group must be client, team, model or provider")

// SpendRow is one group's spend over a window. Unpriced counts the requests
// with usage but no cost (an unpriced model); CostUSD sums the known costs.
type SpendRow struct {
	Group        string  `json:"group"`
	Requests     int64   `json:"requests"`
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CachedTokens int64   `json:"cached_tokens"`
	CostUSD      float64 `json:"cost_usd"`
	Unpriced     int64   `json:"unpriced"`
	// CacheHits counts the requests answered from the response cache (in
	// Requests too, at cost 0); SavedUSD sums what their stored answers
	// cost. Always 0 by provider: a hit reaches no provider.
	CacheHits int64   `json:"cache_hits"`
	SavedUSD  float64 `json:"saved_usd"`
}

// SpendPoint is one group's cost in one bucket of a series.
type SpendPoint struct {
	Bucket   time.Time `json:"bucket"`
	Group    string    `json:"group"`
	CostUSD  float64   `json:"cost_usd"`
	Requests int64     `json:"requests"`
}

// spendSource is the table and group column of a spend group: requests for
// client, team and model (the model the client asked for); the candidates
// for provider, since one request's attempts may bill several.
func spendSource(by string) (table, group string, err error) {
	switch by {
	case SpendByClient:
		return "requests", "coalesce(client, '')", nil
	case SpendByTeam:
		return "requests", "coalesce(team, '')", nil
	case SpendByModel:
		return "requests", "model", nil
	case SpendByProvider:
		return "request_candidates", "provider", nil
	}
	return "", "", ErrSpendGroup
}

// Spend sums the requests created at or after since per group: requests,
// tokens, the known cost and the unpriced. By provider it sums the
// attempts that reported usage, each request counted once per provider.
func (w *Writer) Spend(ctx context.Context, by string, since time.Time) ([]SpendRow, error) {
	table, group, err := spendSource(by)
	if err != nil {
		return nil, err
	}
	pool, err := w.readPool()
	if err != nil {
		return nil, err
	}
	where := "created_at >= $1"
	count := "count(*)"
	cache := "count(*) FILTER (WHERE cache = 'hit'), coalesce(sum(saved_usd), 0)::float8"
	if table == "request_candidates" {
		where += " AND prompt_tokens IS NOT NULL"
		count = "count(DISTINCT request_id)"
		cache = "0::int8, 0::float8"
	}
	q := `SELECT ` + group + `, ` + count + `, coalesce(sum(prompt_tokens), 0)::int8, coalesce(sum(completion_tokens), 0)::int8,
	coalesce(sum(cached_tokens), 0)::int8, coalesce(sum(cost_usd), 0)::float8,
	count(*) FILTER (WHERE prompt_tokens IS NOT NULL AND cost_usd IS NULL), ` + cache + `
	FROM ` + table + ` WHERE ` + where + ` GROUP BY 1 ORDER BY 6 DESC, 1`
	rows, err := pool.Query(ctx, q, since)
	if err != nil {
		return nil, fmt.Errorf("report: spend: %w", err)
	}
	defer rows.Close()
	var out []SpendRow
	for rows.Next() {
		var r SpendRow
		if err := rows.Scan(&r.Group, &r.Requests, &r.InputTokens, &r.OutputTokens, &r.CachedTokens, &r.CostUSD, &r.Unpriced,
			&r.CacheHits, &r.SavedUSD); err != nil {
			return nil, fmt.Errorf("report: spend: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// SpendSeries is the known cost per group and bucket since since, buckets
// aligned on since; buckets without requests are absent.
func (w *Writer) SpendSeries(ctx context.Context, by string, since time.Time, bucket time.Duration) ([]SpendPoint, error) {
	table, group, err := spendSource(by)
	if err != nil {
		return nil, err
	}
	if bucket <= 0 {
		return nil, fmt.Errorf("report: spend series bucket %s", bucket)
	}
	pool, err := w.readPool()
	if err != nil {
		return nil, err
	}
	where := "created_at >= $1"
	count := "count(*)"
	if table == "request_candidates" {
		// As in Spend: a request whose attempts billed one provider twice
		// (a cut stream resumed there) is one request of that provider.
		where += " AND prompt_tokens IS NOT NULL"
		count = "count(DISTINCT request_id)"
	}
	q := `SELECT date_bin($2::interval, created_at, $1), ` + group + `, coalesce(sum(cost_usd), 0)::float8, ` + count + `
	FROM ` + table + ` WHERE ` + where + ` GROUP BY 1, 2 ORDER BY 1, 2`
	rows, err := pool.Query(ctx, q, since, bucket)
	if err != nil {
		return nil, fmt.Errorf("report: spend series: %w", err)
	}
	defer rows.Close()
	var out []SpendPoint
	for rows.Next() {
		var p SpendPoint
		if err := rows.Scan(&p.Bucket, &p.Group, &p.CostUSD, &p.Requests); err != nil {
			return nil, fmt.Errorf("report: spend series: %w", err)
		}
		p.Bucket = p.Bucket.UTC()
		out = append(out, p)
	}
	return out, rows.Err()
}

// SpentSince is what the client or team (owner "client", "team") named
// name spent on requests created at or after since: the indexed sum the
// budgets rebuild a window from (requests_client_spend_idx,
// requests_team_spend_idx). Records still in the writer's queue or spool
// are not in it yet.
func (w *Writer) SpentSince(ctx context.Context, owner, name string, since time.Time) (float64, error) {
	var q string
	switch owner {
	case "client":
		q = `SELECT coalesce(sum(cost_usd), 0)::float8 FROM requests WHERE client = $1 AND created_at >= $2`
	case "team":
		q = `SELECT coalesce(sum(cost_usd), 0)::float8 FROM requests WHERE team = $1 AND created_at >= $2`
	default:
		return 0, fmt.Errorf("report: spend owner %q is not client or team", owner)
	}
	pool, err := w.readPool()
	if err != nil {
		return 0, err
	}
	var usd float64
	if err := pool.QueryRow(ctx, q, name, since).Scan(&usd); err != nil {
		return 0, fmt.Errorf("report: spent since: %w", err)
	}
	return usd, nil
}
