-- The token version that last replaced or revoked the runner's token: a
-- hub's cross sweep checks the connections it holds only against runners
-- stamped after the version it last looked at.
ALTER TABLE runners ADD COLUMN token_seq BIGINT NOT NULL DEFAULT 0;
CREATE INDEX runners_token_seq ON runners (token_seq);
