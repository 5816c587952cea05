-- +goose Up

-- The request's OpenTelemetry trace (docs/tracing.md): 32 hex digits, NULL
-- when tracing is off. Nullable without a default, so the ALTER is instant
-- on a large table.
ALTER TABLE requests ADD COLUMN IF NOT EXISTS trace_id text;

-- +goose Down
ALTER TABLE requests DROP COLUMN IF EXISTS trace_id;
