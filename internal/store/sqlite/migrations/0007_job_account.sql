-- The account a job is pinned to (an account id or label of a runner's
-- vendor agent), '' for any account.
ALTER TABLE jobs ADD COLUMN account TEXT NOT NULL DEFAULT '';
