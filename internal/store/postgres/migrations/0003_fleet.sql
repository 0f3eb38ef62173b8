-- Fleet launches and their single-use registration tokens (hashes only).
-- A registration names the runner it made once used; runner_id has no
-- foreign key because it is '' until then.
CREATE TABLE launches (
    id         TEXT PRIMARY KEY,
    owner_id   TEXT NOT NULL REFERENCES users (id),
    target     TEXT NOT NULL,
    labels     TEXT NOT NULL,
    slots      BIGINT NOT NULL,
    count      BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT
);
CREATE INDEX launches_owner ON launches (owner_id, created_at);

CREATE TABLE registrations (
    hash       TEXT PRIMARY KEY,
    launch_id  TEXT NOT NULL REFERENCES launches (id),
    name       TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at    BIGINT,
    runner_id  TEXT NOT NULL DEFAULT ''
);
CREATE INDEX registrations_launch ON registrations (launch_id, name);
CREATE INDEX registrations_runner ON registrations (runner_id) WHERE runner_id != '';
