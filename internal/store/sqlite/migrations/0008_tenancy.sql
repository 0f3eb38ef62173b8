-- Tenancy. Users are removed, not deleted: their rows name jobs, runners
-- and answers. A runner is private to its owner (and whom it is shared
-- with) unless an admin opens it to the hub. A project has an owner and
-- members.
ALTER TABLE users ADD COLUMN removed_at INTEGER;
ALTER TABLE runners ADD COLUMN access TEXT NOT NULL DEFAULT 'private';
-- owner_id is '' for a project nobody owns (no jobs and no admin when this
-- migration ran), so it has no foreign key.
ALTER TABLE projects ADD COLUMN owner_id TEXT NOT NULL DEFAULT '';

-- A share lets a user (kind 'user', subject a user id) or the members' jobs
-- on a project (kind 'project', subject a project name) use a runner
-- (account_id '') or one of its accounts. subject names a row of one of two
-- tables, and account_id an account that comes and goes with the runner's
-- reports, so neither has a foreign key.
CREATE TABLE shares (
    runner_id  TEXT NOT NULL REFERENCES runners (id) ON DELETE CASCADE,
    account_id TEXT NOT NULL DEFAULT '',
    kind       TEXT NOT NULL,
    subject    TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (runner_id, account_id, kind, subject)
) STRICT;
CREATE INDEX shares_subject ON shares (kind, subject);

CREATE TABLE project_members (
    project    TEXT NOT NULL REFERENCES projects (name) ON DELETE CASCADE,
    user_id    TEXT NOT NULL REFERENCES users (id),
    created_at INTEGER NOT NULL,
    PRIMARY KEY (project, user_id)
) STRICT;
CREATE INDEX project_members_user ON project_members (user_id, project);

-- The three ways a user may see a job (JobFilter.VisibleTo), each through
-- an index: jobs by requester (jobs_requester), jobs of a project, attempts
-- on the runners a user owns.
CREATE INDEX jobs_project ON jobs (project, created_at, id);
CREATE INDEX runners_owner ON runners (owner_id);
CREATE INDEX attempts_runner_job ON attempts (runner_id, job_id);

-- Existing projects keep working: the owner is the requester of the
-- project's oldest job, else the admin (if that user exists), else nobody.
UPDATE projects SET owner_id = coalesce(
    (SELECT requester_id FROM jobs WHERE jobs.project = projects.name ORDER BY created_at, id LIMIT 1),
    (SELECT value FROM meta WHERE key = 'admin_user_id' AND value IN (SELECT id FROM users)),
    '');

-- Every requester of a project's jobs is a member since their first job
-- there, and the owner since the project's creation at the latest.
INSERT INTO project_members (project, user_id, created_at)
SELECT project, user_id, min(created_at) FROM (
    SELECT jobs.project, jobs.requester_id AS user_id, jobs.created_at
        FROM jobs JOIN projects ON projects.name = jobs.project
    UNION ALL
    SELECT name, owner_id, created_at FROM projects WHERE owner_id != ''
) GROUP BY project, user_id;
