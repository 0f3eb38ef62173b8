-- Placeholder on the forgein branch for the outbound webhooks' migration
-- (branch webhooks), so that the versions run without a gap: that
-- branch's file of this name replaces it when both are merged.
SELECT 1;
