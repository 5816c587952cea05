package report

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Timeline is one request and its candidates, as stored, for the admin API
// (GET /admin/requests/{id}). NULL columns are nil pointers (JSON null).
type Timeline struct {
	Request    TimelineRequest     `json:"request"`
	Candidates []TimelineCandidate `json:"candidates"`
}

// RequestSummary is the columns of a requests row that both admin reads
// show: the list shows these (and the providers), the timeline these and the
// rest. Fields are matched to the SELECT's columns by name (see collectRows):
// LatencyMS reads latency_ms.
type RequestSummary struct {
	ID             uuid.UUID `json:"id"`
	CreatedAt      time.Time `json:"created_at"`
	Model          string    `json:"model"`
	Route          string    `json:"route"`
	Stream         bool      `json:"stream"`
	Client         *string   `json:"client"`
	Priority       *string   `json:"priority"`
	Status         string    `json:"status"`
	StatusCode     *int32    `json:"status_code"`
	ErrorType      *string   `json:"error_type"`
	LatencyMS      *int64    `json:"latency_ms"`
	FirstByteMS    *int64    `json:"first_byte_ms"`
	CandidateCount int32     `json:"candidate_count"`
	TotalTokens    *int64    `json:"total_tokens"`
	Replica        string    `json:"replica"`
	// Team is the client's team when the request was served (null: none).
	Team *string `json:"team"`
	// The request's cost in USD, the sum of its billed attempts'
	// (docs/cost.md); null when unknown: an unpriced model, or usage the
	// provider did not send. UsageEstimated: some of it is an estimate (a
	// stream cut before its usage arrived).
	CostUSD        *float64 `json:"cost_usd"`
	UsageEstimated bool     `json:"usage_estimated"`
	// Cache reads inside the prompt's tokens and reasoning inside the
	// completion's; null with the usage.
	CachedTokens    *int64 `json:"cached_tokens"`
	ReasoningTokens *int64 `json:"reasoning_tokens"`
	// Cache is the response cache's result (hit, miss, bypass); null on
	// a route without a cache. A hit has no candidates and costs 0;
	// SavedUSD is then the stored answer's cost (null when unknown, and
	// on every other request).
	Cache    *string  `json:"cache"`
	SavedUSD *float64 `json:"saved_usd"`
}

// TimelineRequest is a row of requests: the summary and the columns only
// the timeline shows.
type TimelineRequest struct {
	RequestSummary
	ClientRequestID  *string    `json:"client_request_id"`
	PromptTokens     *int64     `json:"prompt_tokens"`
	CompletionTokens *int64     `json:"completion_tokens"`
	CacheWriteTokens *int64     `json:"cache_write_tokens"`
	FinishedAt       *time.Time `json:"finished_at"`
	// TraceID is the request's OpenTelemetry trace; null with tracing off.
	TraceID *string `json:"trace_id"`
}

// TimelineCandidate is a row of request_candidates.
type TimelineCandidate struct {
	CandidateIndex int32      `json:"candidate_index"`
	RetryIndex     int32      `json:"retry_index"`
	Provider       string     `json:"provider"`
	Endpoint       string     `json:"endpoint"`
	KeyID          string     `json:"key_id"`
	Model          string     `json:"model"`
	Status         string     `json:"status"`
	SkipReason     *string    `json:"skip_reason"`
	StatusCode     *int32     `json:"status_code"`
	ErrorType      *string    `json:"error_type"`
	ErrorMessage   *string    `json:"error_message"`
	LatencyMS      *int64     `json:"latency_ms"`
	FirstByteMS    *int64     `json:"first_byte_ms"`
	StartedAt      *time.Time `json:"started_at"`
	FinishedAt     *time.Time `json:"finished_at"`
	CreatedAt      time.Time  `json:"created_at"`
	// ResumedFrom is the candidate_index whose cut stream this attempt
	// continued; null for any other attempt.
	ResumedFrom *int32 `json:"resumed_from"`
	// The attempt's usage (null when it reported none) and its cost (null
	// when unknown; 0 for an attempt the provider does not bill, one that
	// failed before its commit point).
	PromptTokens     *int64   `json:"prompt_tokens"`
	CompletionTokens *int64   `json:"completion_tokens"`
	CachedTokens     *int64   `json:"cached_tokens"`
	CacheWriteTokens *int64   `json:"cache_write_tokens"`
	ReasoningTokens  *int64   `json:"reasoning_tokens"`
	CostUSD          *float64 `json:"cost_usd"`
	UsageEstimated   bool     `json:"usage_estimated"`
}

// The reads' columns are named as the fields of the structs they fill (see
// collectRows), in any order. cost_usd is numeric in the table and read as
// float8: the JSON number the API shows.
const selectRequestSQL = `SELECT id, client_request_id, created_at, model, route, replica, stream, client, priority,
    status, status_code, error_type, latency_ms, first_byte_ms, candidate_count,
    prompt_tokens, completion_tokens, total_tokens, finished_at, team, cost_usd::float8 AS cost_usd,
    usage_estimated, cached_tokens, cache_write_tokens, reasoning_tokens, trace_id, cache,
    saved_usd::float8 AS saved_usd
FROM requests WHERE id = $1`

const selectCandidatesSQL = `SELECT candidate_index, retry_index, provider, endpoint, key_id, model,
    status, skip_reason, status_code, error_type, error_message, latency_ms, first_byte_ms,
    started_at, finished_at, created_at, resumed_from, prompt_tokens, completion_tokens,
    cached_tokens, cache_write_tokens, reasoning_tokens, cost_usd::float8 AS cost_usd, usage_estimated
FROM request_candidates WHERE request_id = $1
ORDER BY candidate_index, retry_index`

// Timeline reads a request and its candidates ordered by (candidate_index,
// retry_index). It returns ErrNotFound when the request row does not exist (even
// if some of its candidates were already written), and ErrUnavailable before
// Postgres was ever reached. Records still queued or spooled are not visible.
func (w *Writer) Timeline(ctx context.Context, id uuid.UUID) (Timeline, error) {
	pool, err := w.readPool()
	if err != nil {
		return Timeline{}, err
	}
	reqs, err := collectRows[TimelineRequest](ctx, pool, selectRequestSQL, id)
	if err != nil {
		return Timeline{}, fmt.Errorf("report: read request %s: %w", id, err)
	}
	if len(reqs) == 0 {
		return Timeline{}, ErrNotFound
	}
	cands, err := collectRows[TimelineCandidate](ctx, pool, selectCandidatesSQL, id)
	if err != nil {
		return Timeline{}, fmt.Errorf("report: read candidates of %s: %w", id, err)
	}
	return Timeline{Request: reqs[0], Candidates: cands}, nil
}

// readPool is the pool the admin reads query, or ErrUnavailable before
// Postgres was ever reached.
func (w *Writer) readPool() (*pgxpool.Pool, error) {
	pool := w.pool.Load()
	if pool == nil {
		return nil, ErrUnavailable
	}
	return pool, nil
}

// collectRows runs one admin read and scans every row into a T, column to
// field by name (pgx.RowToStructByName: a db tag, or the field name matched
// ignoring case and underscores), so the SELECT list and the struct cannot
// drift apart by position; a column without a field, or a field without a
// column, is an error. No rows is an empty, non-nil slice (JSON [] rather
// than null).
func collectRows[T any](ctx context.Context, pool *pgxpool.Pool, sql string, args ...any) ([]T, error) {
	rows, err := pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[T])
}
