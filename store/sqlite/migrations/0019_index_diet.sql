-- An index diet for the hot tables (issue 21's full-path load): an index
-- on runs or outbox is written on each insert and on each update of a
-- column it holds, and every index dropped here holds status, which a
-- claim, a checkpoint or marking a message sent changes. This migration
-- drops the indexes later migrations superseded and replaces the two
-- status indexes over whole tables with partial ones over the rows a read
-- asks for. The reads in store/sqlstore that use the new indexes spell
-- their predicates as written here (runs.go runStatusWhere, outbox.go
-- outboxStatusWhere, overview.go): SQLite uses a partial index only when
-- the query's WHERE holds the index's terms. The claims name their indexes
-- (INDEXED BY runs_claimable, runs_thread_active, outbox_pending,
-- outbox_thread_pending), all kept. TestClaimPlansUsePartialIndexes and
-- TestReadPlansUsePartialIndexes (store/sqlite/plan_test.go) check the plans.
-- Keep in step with store/postgres/migrations/0019_index_diet.sql.
--
-- Evidence: EXPLAIN QUERY PLAN and timings of every read of runs, outbox,
-- events and run_events in store/sqlstore, without statistics (opsgate
-- never runs ANALYZE on SQLite), on a store preloaded with 1.1 M runs (1 M
-- finished, 1,000 of them failed, 100 k waiting for approval), 1.1 M outbox
-- messages (550 dead, 2,000 pending) and 1 M events; before, then after.

-- Superseded by runs_claimable and runs_thread_active (0016) for the claim.
-- Worse than none for its other readers: RunList by status searched it and
-- sorted every run of the status (succeeded: 2.4 s, waiting_approval:
-- 155 ms), and Overview counted the last hour's runs by scanning all of it
-- (429 ms). Now RunList reads runs_status or runs_claimable (0.06–0.5 ms),
-- succeeded runs the table newest first (8 ms), and Overview runs_created
-- (30 ms).
DROP INDEX runs_claim;
-- No read asks for a run by owner alone: RunHeartbeat names its runs by id.
DROP INDEX runs_owner;
-- RunList by a status other than queued, running (runs_claimable) and
-- succeeded: waiting for approval or input, and the failures. A run of the
-- full path (queued, running, succeeded) never enters it.
CREATE INDEX runs_status ON runs (status, seq) WHERE status NOT IN ('queued', 'running', 'succeeded');

-- Superseded by outbox_pending (0016) for the claim; Overview's per-channel
-- backlog now reads outbox_pending (0.35 ms for 2,000 pending) and its dead
-- letters outbox_dead.
DROP INDEX outbox_claim;
-- Superseded by outbox_thread_pending (0016) for the claim; the reads of a
-- thread use outbox_thread_at (thread, created_at, seq), 0.02 ms.
DROP INDEX outbox_thread;
-- Held every sent message for the dead-letter count and OutboxList by
-- status; dead letters are read from outbox_dead, pending messages from
-- outbox_pending (0016), sent ones from the table in queue order.
DROP INDEX outbox_status;
-- Only dead letters (see the Postgres file for why not every unsent row:
-- such an index could also serve the claim, badly).
CREATE INDEX outbox_dead ON outbox (seq) WHERE status = 'dead';

-- Kept, each needed by a read (see the Postgres file for the cost without
-- them): runs_created, runs_thread, events_channel_at, events_thread,
-- events_channel_thread, outbox_thread_at, outbox_channel_thread,
-- outbox_card, run_events_run, run_events_agent.

-- outbox_pending again, now only for rows with a channel (every row has
-- one): the claim names a channel, so it still reads this index, but the
-- claim's "older pending message in this thread?" — which names no
-- channel — can no longer be answered from it, only from
-- outbox_thread_pending (thread, seq). With both indexes over the same
-- rows, statistics taken while nothing was pending (both estimated empty)
-- made Postgres pick outbox_pending for that check, with the thread as a
-- filter: every pending row read per candidate. Measured on 1.1 M rows
-- under the Slack load: 4.0 ms a claim, the full path at 314 replies/s
-- instead of 600. (TestOutboxClaimPlanWithStaleStatistics in
-- store/postgres.)
DROP INDEX outbox_pending;
CREATE INDEX outbox_pending ON outbox (channel, seq) WHERE status = 'pending' AND channel IS NOT NULL;
