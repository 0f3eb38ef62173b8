-- Agent accounts runners report (never a secret), in their owner's
-- preference order: rank is per owner, lower preferred. An account's id is
-- its runner's, so the same id on two runners is two accounts. owner_id is
-- the runner's owner when the runner last reported it.
CREATE TABLE accounts (
    runner_id     TEXT NOT NULL REFERENCES runners (id) ON DELETE CASCADE,
    id            TEXT NOT NULL,
    owner_id      TEXT NOT NULL REFERENCES users (id),
    agent         TEXT NOT NULL,
    label         TEXT NOT NULL,
    kind          TEXT NOT NULL,
    state         TEXT NOT NULL,
    limited_until INTEGER,
    rank          INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    PRIMARY KEY (runner_id, id)
) STRICT;
CREATE INDEX accounts_owner ON accounts (owner_id, rank);
