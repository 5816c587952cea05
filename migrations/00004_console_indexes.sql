-- +goose NO TRANSACTION
-- +goose Up

-- The indexes behind GET /admin/requests and GET /admin/stats/providers.
--
-- CONCURRENTLY, hence NO TRANSACTION above: the ledger is large (30 days of
-- requests by default) and a plain CREATE INDEX holds a lock that blocks every
-- write to the table until it finishes, so the writer's batches would time out
-- into the spool for the whole build. CONCURRENTLY lets writes go on at the cost
-- of two table scans. Each build is preceded by a DROP ... IF EXISTS because an
-- interrupted concurrent build (the AutoMigrate timeout, a restart) leaves an
-- INVALID index behind under the same name, and goose, which did not record
-- this version, runs the whole file again. On a very large ledger run
-- `gateway migrate up` by hand: AutoMigrate gives all migrations one minute.

-- Paging newest first on (created_at, id), exact even when created_at ties. It
-- also serves the retention job's range delete, so it replaces the plain
-- created_at index of 00001 (dropped at the end, once this one exists).
DROP INDEX CONCURRENTLY IF EXISTS requests_created_at_id_idx;
CREATE INDEX CONCURRENTLY requests_created_at_id_idx ON requests (created_at, id);

-- status filter: failures and cancellations are a small share of the rows, so
-- a partial index finds them without walking the successes; status=success is
-- the bulk of the table and walks the time index above.
DROP INDEX CONCURRENTLY IF EXISTS requests_status_created_at_idx;
CREATE INDEX CONCURRENTLY requests_status_created_at_idx
    ON requests (status, created_at, id) WHERE status <> 'success';

-- model and client filters: a rare model or client would otherwise walk the
-- time index through every newer row.
DROP INDEX CONCURRENTLY IF EXISTS requests_model_created_at_idx;
CREATE INDEX CONCURRENTLY requests_model_created_at_idx ON requests (model, created_at, id);
DROP INDEX CONCURRENTLY IF EXISTS requests_client_created_at_idx;
CREATE INDEX CONCURRENTLY requests_client_created_at_idx
    ON requests (client, created_at, id) WHERE client IS NOT NULL;

-- Provider statistics over a window: only attempted candidates (not
-- available, unused or skipped), with what the aggregate reads included so
-- the scan need not visit the heap for all-visible pages.
DROP INDEX CONCURRENTLY IF EXISTS request_candidates_attempted_idx;
CREATE INDEX CONCURRENTLY request_candidates_attempted_idx
    ON request_candidates (created_at) INCLUDE (provider, status, latency_ms)
    WHERE status IN ('pending', 'streaming', 'success', 'failed', 'cancelled');

DROP INDEX CONCURRENTLY IF EXISTS requests_created_at_idx;

-- +goose Down
CREATE INDEX CONCURRENTLY IF NOT EXISTS requests_created_at_idx ON requests (created_at);
DROP INDEX CONCURRENTLY IF EXISTS request_candidates_attempted_idx;
DROP INDEX CONCURRENTLY IF EXISTS requests_client_created_at_idx;
DROP INDEX CONCURRENTLY IF EXISTS requests_model_created_at_idx;
DROP INDEX CONCURRENTLY IF EXISTS requests_status_created_at_idx;
DROP INDEX CONCURRENTLY IF EXISTS requests_created_at_id_idx;
