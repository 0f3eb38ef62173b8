-- See SQLite's migration 33: a job's container image, part of its queue shape.
ALTER TABLE jobs ADD COLUMN image TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs DROP COLUMN queue_shape; -- and its index
ALTER TABLE jobs ADD COLUMN queue_shape TEXT GENERATED ALWAYS AS (
    requester_id || chr(31) || agent || chr(31) || labels || chr(31) || project || chr(31) || account || chr(31) || image) STORED;
CREATE INDEX jobs_queue_shape ON jobs (queue_shape, created_at, id) WHERE state = 'queued';
