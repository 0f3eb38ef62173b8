-- Placeholder on the eval branch only: the oidc/attempts branches own this number; delete this file when merging them.
SELECT 1;
