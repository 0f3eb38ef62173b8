-- The model a native agent's job asks for ('' for its account's).
ALTER TABLE jobs ADD COLUMN model TEXT NOT NULL DEFAULT '';
