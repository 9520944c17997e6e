-- Issue 29: an approval keeps the policy's one line on why it asked
-- ("policy rule 3: deploy to prod* by a non-lead: ask") and, once people
-- decided it, its signed receipt (a compact JWS, approvals/receipt),
-- written in the deciding transaction and handed to the tool at dispatch.
-- Delegations are decisions of action "delegate" inside the decisions
-- JSON and need no column. Approvals made before this migration have
-- neither. Keep in step with
-- store/postgres/migrations/0030_approval_receipts.sql.
ALTER TABLE approvals ADD COLUMN why TEXT NOT NULL DEFAULT '';
ALTER TABLE approvals ADD COLUMN receipt TEXT NOT NULL DEFAULT '';
