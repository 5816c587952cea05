-- +goose Up

-- The client route a request came in on. Every row written before this migration
-- was a chat completion, hence the default; the constant default makes the
-- ALTER instant (no table rewrite) on Postgres 11 and later.
ALTER TABLE requests ADD COLUMN route text NOT NULL DEFAULT 'chat'
    CHECK (route IN ('chat', 'messages', 'embeddings', 'responses'));

-- +goose Down
ALTER TABLE requests DROP COLUMN route;
