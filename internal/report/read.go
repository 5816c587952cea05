package report

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Timeline is one request and its candidates, as stored, for the admin API
// (GET /admin/requests/{id}). NULL columns are nil pointers (JSON null).
type Timeline struct {
	Request    TimelineRequest     `json:"request"`
	Candidates []TimelineCandidate `json:"candidates"`
}

// TimelineRequest is a row of requests.
type TimelineRequest struct {
	ID               uuid.UUID  `json:"id"`
	ClientRequestID  *string    `json:"client_request_id"`
	CreatedAt        time.Time  `json:"created_at"`
	Model            string     `json:"model"`
	Route            string     `json:"route"`
	Replica          string     `json:"replica"`
	Stream           bool       `json:"stream"`
	Client           *string    `json:"client"`
	Priority         *string    `json:"priority"`
	Status           string     `json:"status"`
	StatusCode       *int32     `json:"status_code"`
	ErrorType        *string    `json:"error_type"`
	LatencyMS        *int64     `json:"latency_ms"`
	FirstByteMS      *int64     `json:"first_byte_ms"`
	CandidateCount   int32      `json:"candidate_count"`
	PromptTokens     *int64     `json:"prompt_tokens"`
	CompletionTokens *int64     `json:"completion_tokens"`
	TotalTokens      *int64     `json:"total_tokens"`
	FinishedAt       *time.Time `json:"finished_at"`
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
}

const selectRequestSQL = `SELECT id, client_request_id, created_at, model, route, replica, stream, client, priority,
    status, status_code, error_type, latency_ms, first_byte_ms, candidate_count,
    prompt_tokens, completion_tokens, total_tokens, finished_at
FROM requests WHERE id = $1`

const selectCandidatesSQL = `SELECT candidate_index, retry_index, provider, endpoint, key_id, model,
    status, skip_reason, status_code, error_type, error_message, latency_ms, first_byte_ms,
    started_at, finished_at, created_at
FROM request_candidates WHERE request_id = $1
ORDER BY candidate_index, retry_index`

// Timeline reads a request and its candidates ordered by (candidate_index,
// retry_index). It returns ErrNotFound when the request row does not exist (even
// if some of its candidates were already written), and ErrUnavailable before
// Postgres was ever reached. Records still queued or spooled are not visible.
func (w *Writer) Timeline(ctx context.Context, id uuid.UUID) (Timeline, error) {
	pool := w.pool.Load()
	if pool == nil {
		return Timeline{}, ErrUnavailable
	}
	var tl Timeline
	r := &tl.Request
	err := pool.QueryRow(ctx, selectRequestSQL, id).Scan(
		&r.ID, &r.ClientRequestID, &r.CreatedAt, &r.Model, &r.Route, &r.Replica, &r.Stream, &r.Client, &r.Priority,
		&r.Status, &r.StatusCode, &r.ErrorType, &r.LatencyMS, &r.FirstByteMS, &r.CandidateCount,
		&r.PromptTokens, &r.CompletionTokens, &r.TotalTokens, &r.FinishedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Timeline{}, ErrNotFound
	}
	if err != nil {
		return Timeline{}, fmt.Errorf("report: read request %s: %w", id, err)
	}
	rows, err := pool.Query(ctx, selectCandidatesSQL, id)
	if err != nil {
		return Timeline{}, fmt.Errorf("report: read candidates of %s: %w", id, err)
	}
	tl.Candidates, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (TimelineCandidate, error) {
		var c TimelineCandidate
		err := row.Scan(&c.CandidateIndex, &c.RetryIndex, &c.Provider, &c.Endpoint, &c.KeyID,
			&c.Model, &c.Status, &c.SkipReason, &c.StatusCode, &c.ErrorType, &c.ErrorMessage,
			&c.LatencyMS, &c.FirstByteMS, &c.StartedAt, &c.FinishedAt, &c.CreatedAt)
		return c, err
	})
	if err != nil {
		return Timeline{}, fmt.Errorf("report: read candidates of %s: %w", id, err)
	}
	if tl.Candidates == nil {
		tl.Candidates = []TimelineCandidate{} // JSON [] rather than null
	}
	return tl, nil
}
