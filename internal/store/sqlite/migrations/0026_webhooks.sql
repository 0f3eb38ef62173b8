-- Outbound webhooks (internal/webhook): a user's hook, with the secret
-- that signs its bodies (read only by the hub, as forges' secrets).
CREATE TABLE webhooks (
    id         TEXT PRIMARY KEY,
    owner_id   TEXT NOT NULL REFERENCES users (id),
    url        TEXT NOT NULL,
    events     TEXT NOT NULL,
    project    TEXT NOT NULL,
    format     TEXT NOT NULL,
    secret     TEXT NOT NULL,
    created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX webhooks_owner ON webhooks (owner_id, created_at, id);

-- The outbox: a job's move to a state, written in the transaction that
-- made it (while any webhook exists), until the leader expands it into
-- deliveries (AUTOINCREMENT: a job's changes in commit order).
CREATE TABLE job_changes (
    seq    INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL,
    state  TEXT NOT NULL,
    at     INTEGER NOT NULL
) STRICT;

-- One event of one job for one hook; id is the delivery id every try
-- carries. A change expands once per hook (the unique index).
CREATE TABLE webhook_deliveries (
    id         TEXT PRIMARY KEY,
    hook_id    TEXT NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    job_id     TEXT NOT NULL,
    change_seq INTEGER NOT NULL,
    event      TEXT NOT NULL,
    payload    TEXT NOT NULL,
    state      TEXT NOT NULL,
    attempts   INTEGER NOT NULL,
    status     INTEGER NOT NULL,
    error      TEXT NOT NULL,
    next_at    INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX webhook_deliveries_change ON webhook_deliveries (hook_id, change_seq);
CREATE INDEX webhook_deliveries_job ON webhook_deliveries (hook_id, job_id, change_seq);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (state, next_at);
