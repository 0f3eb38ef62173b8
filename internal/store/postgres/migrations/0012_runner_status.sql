-- What a held runner last reported (agents, accounts, readiness, draining),
-- recorded by its holding hub so that every hub shows it; it goes with the
-- holding row.
ALTER TABLE runner_hubs ADD COLUMN agents TEXT NOT NULL DEFAULT '[]';
ALTER TABLE runner_hubs ADD COLUMN accounts TEXT NOT NULL DEFAULT '[]';
ALTER TABLE runner_hubs ADD COLUMN not_ready TEXT NOT NULL DEFAULT '';
ALTER TABLE runner_hubs ADD COLUMN draining BOOLEAN NOT NULL DEFAULT false;
