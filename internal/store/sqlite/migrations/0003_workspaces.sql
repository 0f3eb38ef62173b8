-- Git workspaces: a job's source (project and exact base commit), its
-- latest published commit (head, the base before any publication), its mode
-- and, for a project mapped to a remote, the URL runners fetch from (pinned
-- at submit). Empty strings for a job without a repository.
ALTER TABLE jobs ADD COLUMN project TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN base TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN head TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN mode TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN repo_url TEXT NOT NULL DEFAULT '';
-- Checkpoint refs made so far (refs/drover/checkpoints/JOB/1..N).
ALTER TABLE jobs ADD COLUMN checkpoints INTEGER NOT NULL DEFAULT 0;

-- A project is hosted on the hub (remote '', a bare repository under
-- DATA/repos) or mapped to a remote URL.
CREATE TABLE projects (
    name       TEXT PRIMARY KEY,
    remote     TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;

-- Files attached to a job with `drover run --context`, served to runners.
CREATE TABLE context_files (
    job_id TEXT NOT NULL REFERENCES jobs (id),
    name   TEXT NOT NULL,
    size   INTEGER NOT NULL,
    data   BLOB NOT NULL,
    PRIMARY KEY (job_id, name)
) STRICT;
