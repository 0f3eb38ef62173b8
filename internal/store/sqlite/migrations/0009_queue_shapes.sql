-- The dispatcher reads the queue by shape (QueuedHeads): the jobs of one
-- requester, agent, labels, project and account fit the same runners, so a
-- shape's oldest jobs stand for all of it. One column, so that the next
-- shape is one index seek (a row-value range over five columns is not).
ALTER TABLE jobs ADD COLUMN queue_shape TEXT GENERATED ALWAYS AS (
    requester_id || char(31) || agent || char(31) || labels || char(31) || project || char(31) || account) VIRTUAL;
CREATE INDEX jobs_queue_shape ON jobs (queue_shape, created_at, id) WHERE state = 'queued';
