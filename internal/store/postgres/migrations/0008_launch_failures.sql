-- The latest launch failure of each owner (an image missing, a host
-- unreachable): the owner's waiting jobs show it, across hub restarts,
-- until a launch succeeds.
CREATE TABLE launch_failures (
    owner_id  TEXT PRIMARY KEY REFERENCES users (id),
    launch_id TEXT NOT NULL REFERENCES launches (id),
    target    TEXT NOT NULL,
    labels    TEXT NOT NULL,
    reason    TEXT NOT NULL,
    failed_at BIGINT NOT NULL
);
