-- The hub processes sharing this database, each heartbeating its row; a
-- row not seen for the hubs' TTL is a hub that is not live.
CREATE TABLE hubs (
    id         TEXT PRIMARY KEY,
    url        TEXT NOT NULL,
    version    TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    last_seen  INTEGER NOT NULL,
    conns      INTEGER NOT NULL
) STRICT;

-- Which hub holds each connected runner's connection: set at connect,
-- cleared at disconnect. A holder that is not live holds nothing.
CREATE TABLE runner_hubs (
    runner_id TEXT PRIMARY KEY REFERENCES runners (id),
    hub_id    TEXT NOT NULL,
    since     INTEGER NOT NULL
) STRICT;
CREATE INDEX runner_hubs_hub ON runner_hubs (hub_id);

-- The leader term: one row, held by one hub until expires_at; the term
-- number grows with every new holding.
CREATE TABLE leader (
    name       TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    term       INTEGER NOT NULL,
    since      INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT;
