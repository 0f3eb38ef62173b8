-- The access version that last changed what the runner's access is made of
-- (its owner, name, hub-wide flag, its owner's user row, its shares): hubs
-- reload only runners stamped after the version they last looked at.
ALTER TABLE runners ADD COLUMN access_seq INTEGER NOT NULL DEFAULT 0;
CREATE INDEX runners_access_seq ON runners (access_seq);
