-- Agent tools and the person in the loop. A question belongs to the attempt
-- that asked it (at most one per attempt). An answer is stored with who gave
-- it; it reaches the agent only once approved (approved_at set): at once for
-- the job's requester, after the requester's approval for anyone else.
CREATE TABLE questions (
    id          TEXT PRIMARY KEY,
    job_id      TEXT NOT NULL REFERENCES jobs (id),
    attempt_id  TEXT NOT NULL UNIQUE REFERENCES attempts (id),
    text        TEXT NOT NULL,
    choices     TEXT NOT NULL,
    asked_at    INTEGER NOT NULL,
    expires_at  INTEGER,
    answer      TEXT NOT NULL,
    choice      INTEGER,
    answered_by TEXT NOT NULL,
    answered_at INTEGER,
    approved_by TEXT NOT NULL,
    approved_at INTEGER
) STRICT;
CREATE INDEX questions_job ON questions (job_id, asked_at, id);
CREATE INDEX questions_open ON questions (asked_at, id) WHERE approved_at IS NULL;

-- The agent's session id (to resume it) and its delivery summary.
ALTER TABLE attempts ADD COLUMN session TEXT NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN summary TEXT NOT NULL DEFAULT '';
-- Whether the agent has the tool server (deliver required), and the attempt
-- whose session the next attempt resumes ('' for a fresh start).
ALTER TABLE jobs ADD COLUMN tools INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN resume_attempt TEXT NOT NULL DEFAULT '';
