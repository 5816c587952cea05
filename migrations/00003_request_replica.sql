-- +goose Up

-- The gateway replica (GATEWAY_REPLICA_ID) that served the request. Rows written
-- before this migration did not say, hence the empty default; the constant default
-- makes the ALTER instant (no table rewrite) on Postgres 11 and later.
ALTER TABLE requests ADD COLUMN replica text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE requests DROP COLUMN replica;
