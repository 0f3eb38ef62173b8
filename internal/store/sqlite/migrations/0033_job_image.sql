-- The container image a job names ('': the runner's own). It decides which
-- runners fit the job, so it joins the queue shape (migration 9): a shape's
-- oldest jobs stand for all of it only if they fit the same runners.
ALTER TABLE jobs ADD COLUMN image TEXT NOT NULL DEFAULT '';
DROP INDEX jobs_queue_shape;
ALTER TABLE jobs DROP COLUMN queue_shape;
ALTER TABLE jobs ADD COLUMN queue_shape TEXT GENERATED ALWAYS AS (
    requester_id || char(31) || agent || char(31) || labels || char(31) || project || char(31) || account || char(31) || image) VIRTUAL;
CREATE INDEX jobs_queue_shape ON jobs (queue_shape, created_at, id) WHERE state = 'queued';
