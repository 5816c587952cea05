-- +goose NO TRANSACTION
-- +goose Up

-- What each attempt and each request cost (docs/cost.md): cost_usd is NULL
-- when unknown (an unpriced model, or usage the provider did not send); the
-- token counts NULL when the usage is. Every column is nullable or has a
-- constant default, so each ALTER is instant on a large table.
ALTER TABLE requests
    ADD COLUMN IF NOT EXISTS team text,
    ADD COLUMN IF NOT EXISTS cost_usd numeric,
    ADD COLUMN IF NOT EXISTS cached_tokens bigint,
    ADD COLUMN IF NOT EXISTS cache_write_tokens bigint,
    ADD COLUMN IF NOT EXISTS reasoning_tokens bigint,
    ADD COLUMN IF NOT EXISTS usage_estimated boolean NOT NULL DEFAULT false;

ALTER TABLE request_candidates
    ADD COLUMN IF NOT EXISTS cost_usd numeric,
    ADD COLUMN IF NOT EXISTS prompt_tokens bigint,
    ADD COLUMN IF NOT EXISTS completion_tokens bigint,
    ADD COLUMN IF NOT EXISTS cached_tokens bigint,
    ADD COLUMN IF NOT EXISTS cache_write_tokens bigint,
    ADD COLUMN IF NOT EXISTS reasoning_tokens bigint,
    ADD COLUMN IF NOT EXISTS usage_estimated boolean NOT NULL DEFAULT false;

-- The budgets rebuild a window's spend with an indexed sum per client or
-- team (report.Writer.SpentSince); the cost rides in the index.
-- CONCURRENTLY (hence NO TRANSACTION) as in 00004: writes go on during the
-- build; a build that failed left an invalid index, dropped first.
DROP INDEX CONCURRENTLY IF EXISTS requests_client_spend_idx;
CREATE INDEX CONCURRENTLY requests_client_spend_idx
    ON requests (client, created_at) INCLUDE (cost_usd) WHERE client IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS requests_team_spend_idx;
CREATE INDEX CONCURRENTLY requests_team_spend_idx
    ON requests (team, created_at) INCLUDE (cost_usd) WHERE team IS NOT NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS requests_team_spend_idx;
DROP INDEX CONCURRENTLY IF EXISTS requests_client_spend_idx;
ALTER TABLE request_candidates
    DROP COLUMN IF EXISTS usage_estimated, DROP COLUMN IF EXISTS reasoning_tokens,
    DROP COLUMN IF EXISTS cache_write_tokens, DROP COLUMN IF EXISTS cached_tokens,
    DROP COLUMN IF EXISTS completion_tokens, DROP COLUMN IF EXISTS prompt_tokens,
    DROP COLUMN IF EXISTS cost_usd;
ALTER TABLE requests
    DROP COLUMN IF EXISTS usage_estimated, DROP COLUMN IF EXISTS reasoning_tokens,
    DROP COLUMN IF EXISTS cache_write_tokens, DROP COLUMN IF EXISTS cached_tokens,
    DROP COLUMN IF EXISTS cost_usd, DROP COLUMN IF EXISTS team;
