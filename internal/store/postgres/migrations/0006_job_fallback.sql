-- A native agent's job's fallback account (its id or label; '' for none).
ALTER TABLE jobs ADD COLUMN fallback TEXT NOT NULL DEFAULT '';
