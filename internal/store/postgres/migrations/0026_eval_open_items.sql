-- An evaluation's pass reads only its items at their agent or grading and
-- its next queued ones (EvalOpenItems): a seek each, in the order it needs.
CREATE INDEX eval_items_open ON eval_items (eval_id, state, line, key);
