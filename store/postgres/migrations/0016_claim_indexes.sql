-- Claims read indexes that hold only claimable rows (issue 21), so a claim
-- costs the same with 10 or 10 million finished runs or sent messages
-- behind it. The claim queries in store/sqlstore (runs.go, outbox.go) spell
-- these predicates literally, which is what lets the planner use them.
-- Keep in step with store/sqlite/migrations/0016_claim_indexes.sql.

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

-- Pending messages and claimable runs are a sliver of these tables and
-- come and go quickly. With the default thresholds (10 % of the table) a
-- large store is re-analyzed rarely, and statistics taken when nothing was
-- pending make the planner answer "is this the thread's head?" by scanning
-- every pending message (measured: 34 ms a claim with 3,000 pending, one
-- round of the backlog per candidate). A fixed threshold keeps the
-- statistics near what the claims see. Postgres only: SQLite's claims name
-- their indexes (INDEXED BY).
ALTER TABLE outbox SET (autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 2000);
ALTER TABLE runs SET (autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 2000);
