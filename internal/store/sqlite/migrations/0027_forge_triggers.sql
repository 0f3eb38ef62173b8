-- Placeholder on branch forgethread only, so its migration numbers run: the
-- branch that owns this number (issue 28's split) replaces it at the merge.
SELECT 1;
