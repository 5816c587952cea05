-- +goose Up

-- One row per client request. The writer upserts it as the request moves from
-- 'pending' to a terminal status; the upsert itself refuses to move a status backwards.
CREATE TABLE requests (
    id                uuid        PRIMARY KEY,
    client_request_id text,
    created_at        timestamptz NOT NULL DEFAULT now(),
    model             text        NOT NULL DEFAULT '',
    stream            boolean     NOT NULL DEFAULT false,
    client            text,
    priority          text,
    status            text        NOT NULL
        CHECK (status IN ('pending', 'success', 'failed', 'cancelled')),
    status_code       integer,
    error_type        text,
    latency_ms        bigint,
    first_byte_ms     bigint,
    candidate_count   integer     NOT NULL DEFAULT 0,
    prompt_tokens     bigint,
    completion_tokens bigint,
    total_tokens      bigint,
    finished_at       timestamptz
);

-- Serves both "recent requests" (ORDER BY created_at DESC LIMIT n, a backward scan)
-- and the retention job (DELETE ... WHERE created_at < cutoff).
CREATE INDEX requests_created_at_idx ON requests (created_at);

-- One row per attempt of a candidate. Deliberately no foreign key to requests: the two
-- tables are upserted independently, a spool replay may deliver a candidate before its
-- request (records can arrive in any order), and retention deletes each table on its
-- own schedule. The (request_id, ...) primary key doubles as the index for "the
-- candidates of one request".
CREATE TABLE request_candidates (
    request_id      uuid        NOT NULL,
    candidate_index integer     NOT NULL,
    retry_index     integer     NOT NULL DEFAULT 0,
    provider        text        NOT NULL DEFAULT '',
    endpoint        text        NOT NULL DEFAULT '',
    key_id          text        NOT NULL DEFAULT '',
    model           text        NOT NULL DEFAULT '',
    status          text        NOT NULL
        CHECK (status IN ('available', 'pending', 'streaming', 'success', 'failed',
                          'cancelled', 'unused', 'skipped')),
    skip_reason     text,
    status_code     integer,
    error_type      text,
    error_message   text,
    latency_ms      bigint,
    first_byte_ms   bigint,
    started_at      timestamptz,
    finished_at     timestamptz,
    -- When the record was first written; retention keys on it, so a candidate row
    -- expires with the same clock as its request even without a join.
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (request_id, candidate_index, retry_index)
);

-- "Failures by provider over time" without scanning the successes, which are the
-- overwhelming majority of rows.
CREATE INDEX request_candidates_failed_provider_idx
    ON request_candidates (provider, created_at) WHERE status = 'failed';

-- Retention deletes candidates by age in small batches.
CREATE INDEX request_candidates_created_at_idx ON request_candidates (created_at);

-- +goose Down
DROP TABLE request_candidates;
DROP TABLE requests;
