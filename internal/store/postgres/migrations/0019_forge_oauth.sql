-- Sign-in with a forge (internal/signin): the OAuth application a forge
-- connection's users sign in to the dashboard through. secret is the
-- application's client secret (read only by the hub, as forges' secrets).
CREATE TABLE forge_oauth (
    forge      TEXT PRIMARY KEY REFERENCES forges (name) ON DELETE CASCADE,
    client_id  TEXT NOT NULL,
    secret     TEXT NOT NULL,
    updated_by TEXT NOT NULL,
    updated_at BIGINT NOT NULL
);
