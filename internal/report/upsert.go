package report

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Batches are written with COPY into session-local temp tables followed by one
// INSERT ... SELECT ... ON CONFLICT DO UPDATE per table, all in one transaction.
// COPY was measured against a pgx.Batch of per-row upserts (BENCHMARKS.md) and
// is several times faster. The temp tables are created lazily per connection
// and emptied at commit, so there is no catalog churn per batch.

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

// rankCase renders a rank table as a SQL CASE expression over expr, so the rank
// rule in SQL is generated from the same map mergeCandidate uses. An unknown
// stored status ranks -1 (anything may replace it); the CHECK constraints keep
// unknown incoming statuses out.
func rankCase(expr string, ranks map[string]int) string {
	var b strings.Builder
	b.WriteString("(CASE ")
	b.WriteString(expr)
	for _, status := range slices.Sorted(maps.Keys(ranks)) {
		b.WriteString(" WHEN '" + status + "' THEN " + strconv.Itoa(ranks[status]))
	}
	b.WriteString(" ELSE -1 END)")
	return b.String()
}

// The SET lists implement the merge rules mirrored by mergeCandidate and
// mergeRequest: a later record fills in or replaces a value but never blanks it,
// started_at keeps the earliest, created_at keeps the first.
var upsertCandidatesSQL = `
INSERT INTO request_candidates AS t (` + strings.Join(candidateColumns, ", ") + `)
SELECT ` + strings.Join(candidateColumns, ", ") + ` FROM pg_temp.report_candidates_in
ON CONFLICT (request_id, candidate_index, retry_index) DO UPDATE SET
    provider      = COALESCE(NULLIF(EXCLUDED.provider, ''), t.provider),
    endpoint      = COALESCE(NULLIF(EXCLUDED.endpoint, ''), t.endpoint),
    key_id        = COALESCE(NULLIF(EXCLUDED.key_id, ''), t.key_id),
    model         = COALESCE(NULLIF(EXCLUDED.model, ''), t.model),
    status        = EXCLUDED.status,
    skip_reason   = COALESCE(EXCLUDED.skip_reason, t.skip_reason),
    status_code   = COALESCE(EXCLUDED.status_code, t.status_code),
    error_type    = COALESCE(EXCLUDED.error_type, t.error_type),
    error_message = COALESCE(EXCLUDED.error_message, t.error_message),
    latency_ms    = COALESCE(EXCLUDED.latency_ms, t.latency_ms),
    first_byte_ms = COALESCE(EXCLUDED.first_byte_ms, t.first_byte_ms),
    started_at    = LEAST(EXCLUDED.started_at, t.started_at),
    finished_at   = COALESCE(EXCLUDED.finished_at, t.finished_at)
WHERE ` + rankCase("EXCLUDED.status", candidateRank) + ` > ` + rankCase("t.status", candidateRank)

var upsertRequestsSQL = `
INSERT INTO requests AS t (` + strings.Join(requestColumns, ", ") + `)
SELECT ` + strings.Join(requestColumns, ", ") + ` FROM pg_temp.report_requests_in
ON CONFLICT (id) DO UPDATE SET
    client_request_id = COALESCE(EXCLUDED.client_request_id, t.client_request_id),
    model             = COALESCE(NULLIF(EXCLUDED.model, ''), t.model),
    stream            = t.stream OR EXCLUDED.stream,
    client            = COALESCE(EXCLUDED.client, t.client),
    priority          = COALESCE(EXCLUDED.priority, t.priority),
    status            = EXCLUDED.status,
    status_code       = COALESCE(EXCLUDED.status_code, t.status_code),
    error_type        = COALESCE(EXCLUDED.error_type, t.error_type),
    latency_ms        = COALESCE(EXCLUDED.latency_ms, t.latency_ms),
    first_byte_ms     = COALESCE(EXCLUDED.first_byte_ms, t.first_byte_ms),
    candidate_count   = GREATEST(EXCLUDED.candidate_count, t.candidate_count),
    prompt_tokens     = COALESCE(EXCLUDED.prompt_tokens, t.prompt_tokens),
    completion_tokens = COALESCE(EXCLUDED.completion_tokens, t.completion_tokens),
    total_tokens      = COALESCE(EXCLUDED.total_tokens, t.total_tokens),
    finished_at       = COALESCE(EXCLUDED.finished_at, t.finished_at)
WHERE ` + rankCase("EXCLUDED.status", requestRank) + ` > ` + rankCase("t.status", requestRank)

// upsert writes prepared records in one transaction bounded by WriteTimeout.
//
// A connection or timeout error is returned (the caller spools the batch). An
// error that Postgres raises about the data itself would fail the batch on
// every replay forever, so the batch is retried row by row and only the rows
// Postgres refuses are dropped and logged; rejected counts their records.
func (w *Writer) upsert(ctx context.Context, recs []record) (rejected int, err error) {
	pool := w.pool.Load()
	if pool == nil {
		return 0, ErrUnavailable
	}
	m := w.merger
	m.reset()
	defer m.reset()
	for i := range recs {
		m.add(&recs[i])
	}
	err = w.upsertMerged(ctx, pool, m.reqs, m.cands)
	if err == nil || !isDataError(err) {
		return 0, err
	}
	w.log.Error("report batch refused by postgres; retrying row by row", "err", err)
	for i := range m.reqs {
		if err := w.upsertMerged(ctx, pool, m.reqs[i:i+1], nil); err != nil {
			if !isDataError(err) {
				return 0, err
			}
			rejected += m.reqN[i]
			w.reject(m.reqN[i], "postgres refused request row: "+err.Error())
		}
	}
	for i := range m.cands {
		if err := w.upsertMerged(ctx, pool, nil, m.cands[i:i+1]); err != nil {
			if !isDataError(err) {
				return 0, err
			}
			rejected += m.candN[i]
			w.reject(m.candN[i], "postgres refused candidate row: "+err.Error())
		}
	}
	return rejected, nil
}

// isDataError reports whether Postgres rejected the rows themselves (SQLSTATE
// class 22 data exception or 23 integrity violation), as opposed to being
// unreachable, slow or missing the schema.
func isDataError(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	return strings.HasPrefix(pgErr.Code, "22") || strings.HasPrefix(pgErr.Code, "23")
}

func (w *Writer) upsertMerged(ctx context.Context, pool *pgxpool.Pool, reqs []Request, cands []Candidate) error {
	ctx, cancel := context.WithTimeout(ctx, w.opts.WriteTimeout)
	defer cancel()
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
		if _, err := tx.Exec(ctx, upsertCandidatesSQL); err != nil {
			return fmt.Errorf("upsert candidates: %w", err)
		}
	}
	if len(reqs) > 0 {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"report_requests_in"}, requestColumns,
			copyRows(len(reqs), func(i int, v *[17]any) []any { return requestValues(&reqs[i], v) })); err != nil {
			return fmt.Errorf("copy requests: %w", err)
		}
		if _, err := tx.Exec(ctx, upsertRequestsSQL); err != nil {
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
