-- A project's forge triggers (internal/forgework) and the hook registered
-- on its forge repository: hook_id is in the hook's URL, secret signs its
-- deliveries (never listed by the API).
CREATE TABLE forge_triggers (
    project    TEXT PRIMARY KEY REFERENCES projects (name),
    hook_id    TEXT NOT NULL UNIQUE,
    secret     TEXT NOT NULL,
    forge      TEXT NOT NULL,
    kind       TEXT NOT NULL,
    repo       TEXT NOT NULL,
    remote_id  INTEGER NOT NULL,
    label      TEXT NOT NULL,
    command    TEXT NOT NULL,
    reviews    INTEGER NOT NULL,
    assign     TEXT NOT NULL,
    agent      TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;

-- Forge logins and the users they act as, one user per (forge, login).
CREATE TABLE forge_links (
    id         TEXT PRIMARY KEY, -- forge || ' ' || login
    forge      TEXT NOT NULL,
    login      TEXT NOT NULL,
    user_id    TEXT NOT NULL REFERENCES users (id),
    created_by TEXT NOT NULL,
    created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX forge_links_user ON forge_links (user_id, forge, login);

-- Each delivery of a hook, once: a redelivery of the same id inserts
-- nothing. Recorded before it is acted on; pruned once finished.
CREATE TABLE forge_deliveries (
    id         TEXT PRIMARY KEY, -- hook_id || ' ' || delivery
    hook_id    TEXT NOT NULL,
    delivery   TEXT NOT NULL,
    event      TEXT NOT NULL,
    state      TEXT NOT NULL,
    job_id     TEXT NOT NULL,
    reason     TEXT NOT NULL,
    tries      INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;
CREATE INDEX forge_deliveries_state ON forge_deliveries (state, created_at);
