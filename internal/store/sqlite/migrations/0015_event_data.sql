-- What an event carries beyond its message: a turn event's transcript
-- record (JSON), '' for the others.
ALTER TABLE events ADD COLUMN data TEXT NOT NULL DEFAULT '';
