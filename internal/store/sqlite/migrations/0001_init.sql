-- drover schema, version 1.
-- Times are INTEGER unix milliseconds (UTC), NULL when unset. Maps and slices
-- are JSON TEXT. Tables are STRICT so a wrongly typed value fails loudly
-- instead of being coerced.

CREATE TABLE users (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    admin      INTEGER NOT NULL,
    created_at INTEGER NOT NULL
) STRICT;

-- owner_id is a user or a runner id (see kind), so it has no foreign key.
CREATE TABLE tokens (
    hash       TEXT PRIMARY KEY,
    kind       TEXT NOT NULL,
    owner_id   TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
) STRICT;
CREATE INDEX tokens_owner ON tokens (kind, owner_id);

CREATE TABLE runners (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    owner_id   TEXT NOT NULL REFERENCES users (id),
    token_hash TEXT NOT NULL,
    slots      INTEGER NOT NULL,
    labels     TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    last_seen  INTEGER,
    revoked_at INTEGER
) STRICT;

-- attempt_id has no foreign key: jobs and attempts reference each other.
CREATE TABLE jobs (
    id           TEXT PRIMARY KEY,
    state        TEXT NOT NULL,
    agent        TEXT NOT NULL,
    args         TEXT NOT NULL,
    labels       TEXT NOT NULL,
    requester_id TEXT NOT NULL REFERENCES users (id),
    key          TEXT NOT NULL,
    epoch        INTEGER NOT NULL,
    attempt_id   TEXT NOT NULL,
    cancelling   INTEGER NOT NULL,
    reason       TEXT NOT NULL,
    exit_code    INTEGER,
    log_cap      INTEGER NOT NULL,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    finished_at  INTEGER
) STRICT;
CREATE INDEX jobs_state ON jobs (state, created_at, id);
CREATE INDEX jobs_created ON jobs (created_at, id);
CREATE INDEX jobs_requester ON jobs (requester_id, created_at, id);
-- The idempotency key is unique per requester only when set.
CREATE UNIQUE INDEX jobs_requester_key ON jobs (requester_id, key) WHERE key != '';

CREATE TABLE attempts (
    id          TEXT PRIMARY KEY,
    job_id      TEXT NOT NULL REFERENCES jobs (id),
    epoch       INTEGER NOT NULL,
    runner_id   TEXT NOT NULL REFERENCES runners (id),
    state       TEXT NOT NULL,
    reason      TEXT NOT NULL,
    exit_code   INTEGER,
    message     TEXT NOT NULL,
    offered_at  INTEGER NOT NULL,
    accepted_at INTEGER,
    finished_at INTEGER,
    lease_until INTEGER NOT NULL,
    log_size    INTEGER NOT NULL,
    log_sha256  TEXT NOT NULL,
    -- The epoch fences a job's attempts, so two attempts must never share one.
    UNIQUE (job_id, epoch)
) STRICT;
CREATE INDEX attempts_state ON attempts (state);
CREATE INDEX attempts_runner ON attempts (runner_id, state);

CREATE TABLE log_chunks (
    attempt_id TEXT NOT NULL REFERENCES attempts (id),
    offset     INTEGER NOT NULL,
    data       BLOB NOT NULL,
    PRIMARY KEY (attempt_id, offset)
) STRICT;

-- AUTOINCREMENT so a sequence number is never reused, even after deletes.
CREATE TABLE events (
    seq     INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id  TEXT NOT NULL REFERENCES jobs (id),
    at      INTEGER NOT NULL,
    kind    TEXT NOT NULL,
    actor   TEXT NOT NULL,
    message TEXT NOT NULL
) STRICT;
CREATE INDEX events_job ON events (job_id, seq);

CREATE TABLE requests (
    runner_id  TEXT NOT NULL,
    request_id TEXT NOT NULL,
    response   BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (runner_id, request_id)
) STRICT;
CREATE INDEX requests_created ON requests (created_at);

CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;
