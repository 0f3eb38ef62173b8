-- The drover version a runner last reported on connecting ('' before any).
ALTER TABLE runners ADD COLUMN version TEXT NOT NULL DEFAULT '';
