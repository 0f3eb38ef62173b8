-- The issue or pull request a job works for on a forge (internal/forgethread),
-- one per job: where the bot keeps its status comment (status_id, 0 until
-- posted), what that comment last showed (shown; settled once it shows an
-- outcome nothing more changes) and, as JSON, the comment of each question
-- posted (question id -> comment id). forge names a connection without a
-- foreign key, as publications do.
CREATE TABLE forge_threads (
    job_id     TEXT PRIMARY KEY REFERENCES jobs (id),
    project    TEXT NOT NULL,
    forge      TEXT NOT NULL,
    repo       TEXT NOT NULL,
    number     INTEGER NOT NULL,
    is_pr      INTEGER NOT NULL,
    status_id  INTEGER NOT NULL,
    shown      TEXT NOT NULL,
    settled    INTEGER NOT NULL,
    questions  TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;
-- A reply in a thread finds its jobs; the sweep finds the unsettled ones.
CREATE INDEX forge_threads_target ON forge_threads (forge, repo, number, created_at);
CREATE INDEX forge_threads_settled ON forge_threads (settled, updated_at);
