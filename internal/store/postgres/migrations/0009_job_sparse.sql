-- The folders a job's worktree holds as a cone-mode sparse checkout (JSON;
-- null: the project's default).
ALTER TABLE jobs ADD COLUMN sparse TEXT NOT NULL DEFAULT 'null';
