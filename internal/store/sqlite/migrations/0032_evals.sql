-- Evaluations (internal/eval): a dataset of instances run by one agent,
-- each instance's samples (repeat × attempt) an agent job and a grading
-- job. params is the run's settings as JSON.
CREATE TABLE evals (
    id           TEXT PRIMARY KEY,
    requester_id TEXT NOT NULL REFERENCES users (id),
    key          TEXT NOT NULL,
    agent        TEXT NOT NULL,
    name         TEXT NOT NULL,
    params       TEXT NOT NULL,
    state        TEXT NOT NULL,
    reason       TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
) STRICT;
CREATE INDEX evals_state ON evals (state, created_at, id);
CREATE UNIQUE INDEX evals_requester_key ON evals (requester_id, key) WHERE key != '';

-- One sample of an instance (key "INSTANCE#REPEAT#ATTEMPT"), or a refused
-- dataset line (repeat 0). Its jobs' ids have no foreign key: '' until
-- they exist.
CREATE TABLE eval_items (
    eval_id     TEXT NOT NULL REFERENCES evals (id),
    key         TEXT NOT NULL,
    instance_id TEXT NOT NULL,
    repeat      INTEGER NOT NULL,
    attempt     INTEGER NOT NULL,
    line        INTEGER NOT NULL,
    instance    TEXT NOT NULL,
    state       TEXT NOT NULL,
    agent_job   TEXT NOT NULL,
    head        TEXT NOT NULL,
    graded      TEXT NOT NULL,
    grade_job   TEXT NOT NULL,
    patch       TEXT NOT NULL,
    reason      TEXT NOT NULL,
    cost_usd    REAL NOT NULL,
    tokens      INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (eval_id, key)
) STRICT;
