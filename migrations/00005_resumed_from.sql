-- +goose Up

-- The candidate_index whose stream, cut after its commit point, this attempt
-- continued in the same client stream (a model route's resume); NULL for every
-- other attempt. Nullable without a default: the ALTER is instant.
ALTER TABLE request_candidates ADD COLUMN resumed_from integer;

-- +goose Down
ALTER TABLE request_candidates DROP COLUMN resumed_from;
