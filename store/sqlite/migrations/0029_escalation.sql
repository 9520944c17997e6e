-- Escalation (issue 29): an approval keeps the ladder it climbs while
-- pending (escalation, JSON steps fixed when it asked), how many steps
-- fired (escalated: a sweeper claims the next step by compare-and-set on
-- it, so each fires once across replicas and restarts), when the next one
-- is due (escalation_due, NULL when only the end is left), the approver
-- entries escalation added and the threads besides its own its card went
-- to (escalated approvers' direct messages: the decision updates each).
-- Approvals made before this migration have no ladder.
-- Task grants (scope task) are bound to their run: grants.run_id.
-- Keep in step with store/postgres/migrations/0029_escalation.sql.
ALTER TABLE approvals ADD COLUMN escalation TEXT NOT NULL DEFAULT '[]';
ALTER TABLE approvals ADD COLUMN escalated INTEGER NOT NULL DEFAULT 0;
ALTER TABLE approvals ADD COLUMN escalation_due BIGINT;
ALTER TABLE approvals ADD COLUMN added_approvers TEXT NOT NULL DEFAULT '[]';
ALTER TABLE approvals ADD COLUMN card_threads TEXT NOT NULL DEFAULT '[]';
-- The sweeper's tick reads only the steps due: one range of this index.
-- Its leading status column makes SQLite's planner prefer it to
-- approvals_expiry (status, expires_at), which would visit every pending
-- approval on every tick.
CREATE INDEX approvals_escalation_due ON approvals (status, escalation_due)
    WHERE status = 'pending' AND escalation_due IS NOT NULL;
-- /metrics counts pending approvals by risk and finds the oldest from
-- this index alone (covering; status leads for the same reason).
CREATE INDEX approvals_pending_risk ON approvals (status, risk, created_at) WHERE status = 'pending';
ALTER TABLE grants ADD COLUMN run_id TEXT NOT NULL DEFAULT '';
