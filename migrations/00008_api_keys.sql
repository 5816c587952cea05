-- +goose Up

-- Client keys issued at run time through /admin/keys (DESIGN 11.2,
-- docs/keys.md). Only the SHA-256 of a secret is stored, as lower-case hex,
-- the form the routes file's key_sha256 has; hint is the secret's first and
-- last characters, for people telling keys apart. A rotation moves the
-- old digest to previous_key_sha256, which works until previous_expires_at.
CREATE TABLE api_keys (
    id                  uuid        PRIMARY KEY,
    name                text        NOT NULL,
    team                text        NOT NULL DEFAULT '',
    key_sha256          text        NOT NULL UNIQUE CHECK (key_sha256 ~ '^[0-9a-f]{64}$'),
    hint                text        NOT NULL,
    models              text[]      NOT NULL DEFAULT '{}',
    priority            text        NOT NULL DEFAULT '',
    max_concurrency     integer     NOT NULL DEFAULT 0,
    requests_per_minute integer     NOT NULL DEFAULT 0,
    tokens_per_minute   integer     NOT NULL DEFAULT 0,
    budget_usd          numeric,
    budget_per          text,
    cost_in_usage       boolean     NOT NULL DEFAULT false,
    expires_at          timestamptz,
    metadata            jsonb       NOT NULL DEFAULT '{}',
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    revoked_at          timestamptz,
    previous_key_sha256 text        UNIQUE CHECK (previous_key_sha256 ~ '^[0-9a-f]{64}$'),
    previous_expires_at timestamptz,
    CHECK ((budget_usd IS NULL) = (budget_per IS NULL))
);
-- A key's name is its client name in records, limits and budgets: one
-- live key per name (a revoked key's name can be issued again).
CREATE UNIQUE INDEX api_keys_live_name_idx ON api_keys (name) WHERE revoked_at IS NULL;
CREATE INDEX api_keys_team_idx ON api_keys (team);

-- One row per admin write. actor is a fingerprint of the admin token (a
-- SHA-256 prefix), never the token; changes holds the fields written,
-- never a secret.
CREATE TABLE admin_audit (
    id      bigserial   PRIMARY KEY,
    at      timestamptz NOT NULL DEFAULT now(),
    actor   text        NOT NULL,
    action  text        NOT NULL,
    key_id  uuid,
    changes jsonb       NOT NULL DEFAULT '{}'
);
CREATE INDEX admin_audit_at_idx ON admin_audit (at DESC, id DESC);

-- +goose Down
DROP TABLE admin_audit;
DROP TABLE api_keys;
