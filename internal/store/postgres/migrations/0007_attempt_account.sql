-- The runner's account an attempt's offer named ('' for an agent without
-- accounts, and for attempts from before it was kept).
ALTER TABLE attempts ADD COLUMN account TEXT NOT NULL DEFAULT '';
