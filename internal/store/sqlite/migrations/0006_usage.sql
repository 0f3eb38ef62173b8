-- What a vendor agent's attempt consumed (tokens, cost), as the JSON the
-- runner reported with its finish ('' when it reported none).
ALTER TABLE attempts ADD COLUMN usage TEXT NOT NULL DEFAULT '';
