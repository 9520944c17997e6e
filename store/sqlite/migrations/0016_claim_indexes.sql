-- Claims read indexes that hold only claimable rows (issue 21), so a claim
-- costs the same with 10 or 10 million finished runs or sent messages
-- behind it. The claim queries in store/sqlstore (runs.go, outbox.go) spell
-- these predicates literally, which is what lets the planner use them.
-- Keep in step with store/postgres/migrations/0016_claim_indexes.sql.

-- RunClaim walks queued and running runs in queue order ...
CREATE INDEX runs_claimable ON runs (seq) WHERE status IN ('queued', 'running');
-- ... and asks, per candidate, whether its thread holds an active or an
-- older queued run.
CREATE INDEX runs_thread_active ON runs (thread, seq)
    WHERE status IN ('queued', 'running', 'waiting_approval', 'waiting_input');

-- OutboxClaim walks a channel's pending messages in queue order and keeps
-- each thread's head (its oldest pending message).
CREATE INDEX outbox_pending ON outbox (channel, seq) WHERE status = 'pending';
CREATE INDEX outbox_thread_pending ON outbox (thread, seq) WHERE status = 'pending';
