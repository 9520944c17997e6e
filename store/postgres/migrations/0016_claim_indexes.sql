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
-- come and go quickly. With the default thresholds (10 % of the table for
-- ANALYZE, 20 % for VACUUM) a large store is rarely analyzed or vacuumed,
-- and both hurt the claims: statistics taken when nothing was pending make
-- the planner answer "is this the thread's head?" by scanning every pending
-- message (measured: 34 ms a claim with 3,000 pending), and the partial
-- indexes fill with entries of rows that left them (sent messages, finished
-- runs), which every claim steps over until a vacuum removes them
-- (measured on 1.1 M rows after a 10,000-event run: 8.1 ms a claim, 0.9 ms
-- after VACUUM). Fixed thresholds keep both near what the claims see.
-- Postgres only: SQLite's claims name their indexes (INDEXED BY) and its
-- deleted index entries go at commit.
ALTER TABLE outbox SET (autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 2000,
    autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000);
ALTER TABLE runs SET (autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 2000,
    autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000);
