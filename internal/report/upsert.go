package report

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A batch is written by one statement: a data-modifying CTE writes the
// candidate rows and the outer INSERT the request rows, each reading its rows
// from unnest() over one array parameter per column (batchArgs). One statement
// is atomic on its own, so there is no BEGIN or COMMIT, and pgx prepares it
// once per connection, so a batch costs Postgres one Bind/Execute and one
// commit: ~0.2-0.3 ms of backend CPU plus its rows. It replaced COPY into
// ON COMMIT DELETE ROWS temp tables plus an INSERT ... SELECT per table in a
// transaction: creating the temp tables (IF NOT EXISTS), the COPY protocol and
// truncating the temp tables' files at every commit cost ~2 ms per batch
// whatever its size, which dominated under steady load (BENCHMARKS.md,
// "Postgres CPU per request").

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

// The conflict clauses implement the merge rules mirrored by mergeCandidate and
// mergeRequest: a later record fills in or replaces a value but never blanks it,
// started_at keeps the earliest, created_at keeps the first, and the WHERE rank
// rule lets a row only move forward.
var candidateConflictSQL = `
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
    finished_at   = COALESCE(EXCLUDED.finished_at, t.finished_at),
    resumed_from  = COALESCE(EXCLUDED.resumed_from, t.resumed_from),
    prompt_tokens      = COALESCE(EXCLUDED.prompt_tokens, t.prompt_tokens),
    completion_tokens  = COALESCE(EXCLUDED.completion_tokens, t.completion_tokens),
    cached_tokens      = COALESCE(EXCLUDED.cached_tokens, t.cached_tokens),
    cache_write_tokens = COALESCE(EXCLUDED.cache_write_tokens, t.cache_write_tokens),
    reasoning_tokens   = COALESCE(EXCLUDED.reasoning_tokens, t.reasoning_tokens),
    usage_estimated    = EXCLUDED.usage_estimated OR t.usage_estimated,
    cost_usd           = COALESCE(EXCLUDED.cost_usd, t.cost_usd)
WHERE ` + rankCase("EXCLUDED.status", candidateRank) + ` > ` + rankCase("t.status", candidateRank)

var requestConflictSQL = `
ON CONFLICT (id) DO UPDATE SET
    client_request_id = COALESCE(EXCLUDED.client_request_id, t.client_request_id),
    model             = COALESCE(NULLIF(EXCLUDED.model, ''), t.model),
    route             = EXCLUDED.route,
    replica           = COALESCE(NULLIF(EXCLUDED.replica, ''), t.replica),
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
    finished_at       = COALESCE(EXCLUDED.finished_at, t.finished_at),
    team              = COALESCE(EXCLUDED.team, t.team),
    cached_tokens     = COALESCE(EXCLUDED.cached_tokens, t.cached_tokens),
    cache_write_tokens = COALESCE(EXCLUDED.cache_write_tokens, t.cache_write_tokens),
    reasoning_tokens  = COALESCE(EXCLUDED.reasoning_tokens, t.reasoning_tokens),
    usage_estimated   = EXCLUDED.usage_estimated OR t.usage_estimated,
    cost_usd          = COALESCE(EXCLUDED.cost_usd, t.cost_usd),
    trace_id          = COALESCE(EXCLUDED.trace_id, t.trace_id),
    cache             = COALESCE(EXCLUDED.cache, t.cache),
    saved_usd         = COALESCE(EXCLUDED.saved_usd, t.saved_usd)
WHERE ` + rankCase("EXCLUDED.status", requestRank) + ` > ` + rankCase("t.status", requestRank)

// upsert writes prepared records in one statement bounded by WriteTimeout.
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
	err = w.upsertMerged(ctx, pool, m.reqs, m.reqNew, m.cands, m.candNew)
	if err == nil || !isDataError(err) {
		return 0, err
	}
	w.log.Error("report batch refused by postgres; retrying row by row", "err", err)
	for i := range m.reqs {
		if err := w.upsertMerged(ctx, pool, m.reqs[i:i+1], nil, nil, nil); err != nil {
			if !isDataError(err) {
				return 0, err
			}
			rejected += m.reqN[i]
			w.reject(m.reqN[i], "postgres refused request row: "+err.Error())
		}
	}
	for i := range m.cands {
		if err := w.upsertMerged(ctx, pool, nil, nil, m.cands[i:i+1], nil); err != nil {
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

// upsertMerged writes folded rows (at most one per key) in one statement.
// When reqNew and candNew (nil: none) flag every row as presumed new, the rows
// are inserted without ON CONFLICT; if one exists after all, that statement
// fails with a unique violation and changes nothing, and the batch is written
// again with every row upserted.
func (w *Writer) upsertMerged(ctx context.Context, pool *pgxpool.Pool, reqs []Request, reqNew []bool, cands []Candidate, candNew []bool) error {
	ctx, cancel := context.WithTimeout(ctx, w.opts.WriteTimeout)
	defer cancel()
	a := w.args
	defer a.reset()
	sql, args := a.fill(reqs, reqNew, cands, candNew)
	_, err := pool.Exec(ctx, sql, args...)
	if sql != upsertBatchSQL && isUniqueViolation(err) {
		sql, args = a.fill(reqs, nil, cands, nil)
		_, err = pool.Exec(ctx, sql, args...)
	}
	return err
}

// isUniqueViolation reports whether Postgres refused a row because its key
// exists (SQLSTATE 23505).
func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}
