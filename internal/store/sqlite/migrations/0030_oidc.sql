-- Sign-in with an OpenID Connect provider (internal/signin): the provider
-- (its issuer and this hub's client there; secret is the client secret,
-- read only by the hub, as forges' secrets) and the links of its
-- identities (issuer + subject) to drover users. A provider's links go
-- with it: a subject means nothing under another issuer.
CREATE TABLE oidc_providers (
    name       TEXT PRIMARY KEY,
    issuer     TEXT NOT NULL,
    client_id  TEXT NOT NULL,
    secret     TEXT NOT NULL,
    updated_by TEXT NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;

CREATE TABLE oidc_links (
    id         TEXT PRIMARY KEY, -- provider || ' ' || subject
    provider   TEXT NOT NULL REFERENCES oidc_providers (name) ON DELETE CASCADE,
    subject    TEXT NOT NULL,
    user_id    TEXT NOT NULL REFERENCES users (id),
    created_by TEXT NOT NULL,
    created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX oidc_links_user ON oidc_links (user_id, provider, subject);
CREATE INDEX oidc_links_provider ON oidc_links (provider);
