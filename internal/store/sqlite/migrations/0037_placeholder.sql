-- Unused: this number was kept for a branch that needed no migration; migrations stay numbered without gaps.
SELECT 1;
