-- What the runner's execution boundary actually applied to an attempt, as
-- the JSON the runner reported with its finish ('' before that).
ALTER TABLE attempts ADD COLUMN isolation TEXT NOT NULL DEFAULT '';
