-- Network policies, setup and caches. A project's owner sets its config
-- (store.ProjectConfig as JSON: the network policies of its setup and
-- agent phases, its setup commands and timeout, its caches). A job keeps
-- the agent-phase policies it asked for: JSON null keeps its project's.
ALTER TABLE projects ADD COLUMN config TEXT NOT NULL DEFAULT '{}';
ALTER TABLE jobs ADD COLUMN network TEXT NOT NULL DEFAULT 'null';
