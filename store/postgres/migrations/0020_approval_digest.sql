-- An approval names what it lets run (issue 26): digest is "sha256:<hex>"
-- over the tool, the canonical arguments, the asking rule's key and the
-- policy version; rule_key and policy_version are kept so dispatch can
-- hash the arguments again and refuse a call that no longer matches what
-- its deciders saw. Decisions carry their digest inside the decisions
-- JSON. Approvals made before this migration have none and are compared
-- against nothing. Keep in step with
-- store/sqlite/migrations/0020_approval_digest.sql.
ALTER TABLE approvals ADD COLUMN digest TEXT NOT NULL DEFAULT '';
ALTER TABLE approvals ADD COLUMN rule_key TEXT NOT NULL DEFAULT '';
ALTER TABLE approvals ADD COLUMN policy_version TEXT NOT NULL DEFAULT '';
