-- Pipelines (internal/pipeline): a pipeline file run on a project at a
-- base commit. spec is the parsed file as JSON, params its values.
CREATE TABLE pipelines (
    id           TEXT PRIMARY KEY,
    name         TEXT NOT NULL,
    file         TEXT NOT NULL,
    project      TEXT NOT NULL,
    base         TEXT NOT NULL,
    requester_id TEXT NOT NULL REFERENCES users (id),
    key          TEXT NOT NULL,
    spec         TEXT NOT NULL,
    params       TEXT NOT NULL,
    staged       INTEGER NOT NULL,
    state        TEXT NOT NULL,
    reason       TEXT NOT NULL,
    result       TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
) STRICT;
CREATE INDEX pipelines_created ON pipelines (created_at, id);
CREATE INDEX pipelines_state ON pipelines (state, created_at, id);
CREATE INDEX pipelines_requester ON pipelines (requester_id, created_at, id);
-- The idempotency key is unique per requester only when set, as jobs'.
CREATE UNIQUE INDEX pipelines_requester_key ON pipelines (requester_id, key) WHERE key != '';

-- One job of a step (the step's, a loop round's, a for_each item's).
-- job_id has no foreign key: it is '' until the job exists, and a replay
-- names the job of the result it replays. head is the commit it left.
CREATE TABLE pipeline_runs (
    pipeline_id TEXT NOT NULL REFERENCES pipelines (id),
    key         TEXT NOT NULL,
    step        TEXT NOT NULL,
    round       INTEGER NOT NULL,
    item        INTEGER NOT NULL,
    item_value  TEXT NOT NULL,
    hash        TEXT NOT NULL,
    input       TEXT NOT NULL,
    job_id      TEXT NOT NULL,
    tries       INTEGER NOT NULL,
    state       TEXT NOT NULL,
    replayed    INTEGER NOT NULL,
    head        TEXT NOT NULL,
    summary     TEXT NOT NULL,
    reason      TEXT NOT NULL,
    cost_usd    REAL NOT NULL,
    tokens      INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (pipeline_id, key)
) STRICT;
-- A job's end finds its run.
CREATE INDEX pipeline_runs_job ON pipeline_runs (job_id) WHERE job_id != '';

-- Finished steps' results by project and step hash, which a later run of
-- the same step replays; the first recorded stays.
CREATE TABLE step_results (
    project    TEXT NOT NULL,
    hash       TEXT NOT NULL,
    job_id     TEXT NOT NULL,
    head       TEXT NOT NULL,
    summary    TEXT NOT NULL,
    cost_usd   REAL NOT NULL,
    tokens     INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (project, hash)
) STRICT;

-- A pipeline's log, numbered as events are (AUTOINCREMENT: never reused).
CREATE TABLE pipeline_events (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    pipeline_id TEXT NOT NULL REFERENCES pipelines (id),
    at          INTEGER NOT NULL,
    kind        TEXT NOT NULL,
    step        TEXT NOT NULL,
    actor       TEXT NOT NULL,
    message     TEXT NOT NULL
) STRICT;
CREATE INDEX pipeline_events_pipeline ON pipeline_events (pipeline_id, seq);
