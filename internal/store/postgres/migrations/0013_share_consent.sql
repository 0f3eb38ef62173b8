-- A runner's share takes effect only once its recipient accepts it (a
-- user for themself; a project's owner or an admin for a project):
-- accepted_at is when, NULL while it is pending. Account shares need no
-- consent (they only widen what an accepted runner spends) and are
-- accepted as they are made.
--
-- Existing shares were made without consent, so an upgrade keeps only
-- those consent can be read into: account shares, and runner shares with
-- a project whose member the runner's owner is. Runner shares with a user,
-- and with a project the runner's owner is not a member of, become
-- pending until their recipient accepts them (docs/operator.md).
ALTER TABLE shares ADD COLUMN accepted_at BIGINT;
UPDATE shares SET accepted_at = created_at
WHERE account_id != ''
   OR (kind = 'project' AND EXISTS (
        SELECT 1 FROM project_members JOIN runners ON runners.owner_id = project_members.user_id
        WHERE runners.id = shares.runner_id AND project_members.project = shares.subject));
