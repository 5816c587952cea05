-- +goose Up

-- The response cache (docs/cache.md): cache is what the cache did with the
-- request (hit, miss or bypass), NULL on a route without a cache; saved_usd
-- is what a hit would have cost, the stored answer's cost (NULL when that
-- is unknown, and on every row but a hit's). Nullable without a default,
-- so each ALTER is instant on a large table.
ALTER TABLE requests
    ADD COLUMN IF NOT EXISTS cache text,
    ADD COLUMN IF NOT EXISTS saved_usd numeric;

-- +goose Down
ALTER TABLE requests DROP COLUMN IF EXISTS saved_usd, DROP COLUMN IF EXISTS cache;
