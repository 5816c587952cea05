package report

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The write path before the single unnest statement, kept for the benchmarks'
// before/after comparison: COPY into ON COMMIT DELETE ROWS temp tables, then
// one INSERT ... SELECT ... ON CONFLICT per table, in one transaction.

const createTempTablesSQL = `
CREATE TEMP TABLE IF NOT EXISTS report_candidates_in (
    request_id uuid, candidate_index integer, retry_index integer,
    provider text, endpoint text, key_id text, model text,
    status text, skip_reason text, status_code integer,
    error_type text, error_message text, latency_ms bigint, first_byte_ms bigint,
    started_at timestamptz, finished_at timestamptz, created_at timestamptz
) ON COMMIT DELETE ROWS;
CREATE TEMP TABLE IF NOT EXISTS report_requests_in (
    id uuid, client_request_id text, created_at timestamptz, model text, stream boolean,
    client text, priority text, status text, status_code integer, error_type text,
    latency_ms bigint, first_byte_ms bigint, candidate_count integer,
    prompt_tokens bigint, completion_tokens bigint, total_tokens bigint,
    finished_at timestamptz
) ON COMMIT DELETE ROWS`

var candidateColumns = []string{
	"request_id", "candidate_index", "retry_index", "provider", "endpoint", "key_id",
	"model", "status", "skip_reason", "status_code", "error_type", "error_message",
	"latency_ms", "first_byte_ms", "started_at", "finished_at", "created_at",
}

var requestColumns = []string{
	"id", "client_request_id", "created_at", "model", "stream", "client", "priority",
	"status", "status_code", "error_type", "latency_ms", "first_byte_ms",
	"candidate_count", "prompt_tokens", "completion_tokens", "total_tokens", "finished_at",
}

var copyUpsertCandidatesSQL = `
INSERT INTO request_candidates AS t (` + strings.Join(candidateColumns, ", ") + `)
SELECT ` + strings.Join(candidateColumns, ", ") + ` FROM pg_temp.report_candidates_in` + candidateConflictSQL

var copyUpsertRequestsSQL = `
INSERT INTO requests AS t (` + strings.Join(requestColumns, ", ") + `)
SELECT ` + strings.Join(requestColumns, ", ") + ` FROM pg_temp.report_requests_in` + requestConflictSQL

// copyUpsertMerged writes folded rows the old way, in one transaction.
func copyUpsertMerged(ctx context.Context, pool *pgxpool.Pool, reqs []Request, cands []Candidate) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return copyUpsert(ctx, tx, reqs, cands)
	})
}

// copyRows adapts a row function to pgx.CopyFromSlice, reusing one values array.
func copyRows(n int, row func(i int, vals *[17]any) []any) pgx.CopyFromSource {
	var vals [17]any
	return pgx.CopyFromSlice(n, func(i int) ([]any, error) { return row(i, &vals), nil })
}

// copyUpsert runs the COPY + upsert statements inside tx.
func copyUpsert(ctx context.Context, tx pgx.Tx, reqs []Request, cands []Candidate) error {
	if _, err := tx.Exec(ctx, createTempTablesSQL); err != nil {
		return fmt.Errorf("create temp tables: %w", err)
	}
	if len(cands) > 0 {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"report_candidates_in"}, candidateColumns,
			copyRows(len(cands), func(i int, v *[17]any) []any { return candidateValues(&cands[i], v) })); err != nil {
			return fmt.Errorf("copy candidates: %w", err)
		}
		if _, err := tx.Exec(ctx, copyUpsertCandidatesSQL); err != nil {
			return fmt.Errorf("upsert candidates: %w", err)
		}
	}
	if len(reqs) > 0 {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"report_requests_in"}, requestColumns,
			copyRows(len(reqs), func(i int, v *[17]any) []any { return requestValues(&reqs[i], v) })); err != nil {
			return fmt.Errorf("copy requests: %w", err)
		}
		if _, err := tx.Exec(ctx, copyUpsertRequestsSQL); err != nil {
			return fmt.Errorf("upsert requests: %w", err)
		}
	}
	return nil
}

// candidateValues fills vals with the COPY row of c and returns it. pgx
// encodes a row before asking for the next, so one array serves a whole
// COPY. UUIDs go in as [16]byte, which pgx encodes directly; uuid.UUID would
// take the slower driver.Valuer (text) path.
func candidateValues(c *Candidate, vals *[17]any) []any {
	*vals = [17]any{
		[16]byte(c.RequestID), int32(c.Index), int32(c.RetryIndex), c.Provider, c.Endpoint, c.KeyID,
		c.Model, c.Status, nullString(c.SkipReason), nullInt32(c.StatusCode),
		nullString(c.ErrorType), nullString(c.ErrorMessage), nullMillis(c.Latency),
		nullMillis(c.FirstByte), nullTime(c.StartedAt), nullTime(c.FinishedAt), c.CreatedAt,
	}
	return vals[:]
}

// requestValues is candidateValues for a request row.
func requestValues(r *Request, vals *[17]any) []any {
	var prompt, completion, total any
	if r.HasUsage {
		prompt, completion, total = r.PromptTokens, r.CompletionTokens, r.TotalTokens
	}
	*vals = [17]any{
		[16]byte(r.ID), nullString(r.ClientRequestID), r.CreatedAt, r.Model, r.Stream,
		nullString(r.Client), nullString(r.Priority), r.Status, nullInt32(r.StatusCode),
		nullString(r.ErrorType), nullMillis(r.Latency), nullMillis(r.FirstByte),
		int32(r.CandidateCount), prompt, completion, total, nullTime(r.FinishedAt),
	}
	return vals[:]
}

// Zero values of the record types stand for NULL; these map them for pgx, where
// an untyped nil is NULL.

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nullInt32(v int) any {
	if v == 0 {
		return nil
	}
	return int32(v)
}

func nullMillis(d time.Duration) any {
	if d == 0 {
		return nil
	}
	return d.Milliseconds()
}

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}
