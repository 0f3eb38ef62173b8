-- A project's secrets: credentials its owner set for its setup phase. The
-- egress proxy adds value in header (after prefix) to requests to
-- upstream; the API never returns the value.
CREATE TABLE project_secrets (
    project    TEXT NOT NULL REFERENCES projects (name) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    upstream   TEXT NOT NULL,
    header     TEXT NOT NULL,
    prefix     TEXT NOT NULL,
    value      TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (project, name)
);
