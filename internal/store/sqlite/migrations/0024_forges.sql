-- The forge connections the hub holds, by name: secret is the token, or a
-- GitHub App's private key (app_id not 0), which the API never returns.
CREATE TABLE forges (
    name       TEXT PRIMARY KEY,
    kind       TEXT NOT NULL,
    url        TEXT NOT NULL,
    app_id     INTEGER NOT NULL,
    secret     TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;

-- A job's publication to its project's forge: the intent, written before
-- any forge call, then what came of it. forge names a connection without a
-- foreign key, so removing one keeps the record of what it published.
CREATE TABLE publications (
    job_id     TEXT PRIMARY KEY REFERENCES jobs (id),
    forge      TEXT NOT NULL,
    repo       TEXT NOT NULL,
    mode       TEXT NOT NULL,
    branch     TEXT NOT NULL,
    base       TEXT NOT NULL,
    to_pr      INTEGER NOT NULL,
    title      TEXT NOT NULL,
    draft      INTEGER NOT NULL,
    head       TEXT NOT NULL,
    expect     TEXT NOT NULL,
    pushed     TEXT NOT NULL,
    pr_number  INTEGER NOT NULL,
    pr_url     TEXT NOT NULL,
    state      TEXT NOT NULL,
    code       TEXT NOT NULL,
    reason     TEXT NOT NULL,
    tries      INTEGER NOT NULL,
    asked_by   TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;
-- The hub carries on the pending ones, oldest first.
CREATE INDEX publications_state ON publications (state, updated_at);
