-- An index diet for the hot tables (issue 21's full-path load): every index
-- on runs and outbox is written on each insert and on each update that
-- changes an indexed column (a claim, a checkpoint that moves the status,
-- marking a message sent), so indexes that no read needs any more cost the
-- hot writes for nothing. This migration drops the ones later migrations
-- superseded and replaces the two status indexes over whole tables with
-- partial ones over the rows a read asks for. The reads in store/sqlstore
-- that use the new indexes spell their predicates literally (runs.go
-- runStatusWhere, outbox.go outboxStatusWhere, overview.go), which is what
-- lets a planner use them (a parameter never implies a partial index's
-- predicate: not in a generic plan, not in SQLite).
-- Keep in step with store/sqlite/migrations/0019_index_diet.sql.
--
-- Evidence: EXPLAIN ANALYZE of every read of runs, outbox, events and
-- run_events in store/sqlstore, custom and generic plans, on a store
-- preloaded with 1.1 M runs (1 M finished, 1,000 of them failed, 100 k
-- waiting for approval), 1.1 M outbox messages (550 dead, 2,000 pending)
-- and 1 M events; before, then after this migration.

-- Superseded by runs_claimable and runs_thread_active (0016): the claim
-- used it through a bitmap scan of every queued and running run (0.85 ms;
-- 0.63 ms on runs_claimable without it). Its other reader, RunList by
-- status, now reads runs_status or runs_claimable: in a generic plan
-- (the one a prepared statement settles on) a status filter walked the
-- primary key through the finished runs — 220 ms for the question sweep's
-- waiting_input, 92 ms for queued — and now reads 0.03–0.08 ms.
DROP INDEX runs_claim;
-- No read asks for a run by owner alone: RunHeartbeat names its runs by id
-- (runs_id_key, 0.08 ms either way).
DROP INDEX runs_owner;
-- RunList by a status other than queued, running (runs_claimable) and
-- succeeded (the bulk of the table, newest first from the primary key):
-- waiting for approval or input, and the failures. A run of the full path
-- (queued, running, succeeded) never enters it. 0.03–0.07 ms for each
-- status, generic or custom plan.
CREATE INDEX runs_status ON runs (status, seq) WHERE status NOT IN ('queued', 'running', 'succeeded');

-- Superseded by outbox_pending (0016) for the claim; its other reader,
-- Overview's per-channel backlog and dead letters, now reads outbox_pending
-- (0.36 ms for 2,000 pending) and outbox_dead.
DROP INDEX outbox_claim;
-- Superseded by outbox_thread_pending (0016) for the claim; the reads of a
-- thread (ThreadMessages, OutboxCardRef's generic plan, OutboxStreamRef)
-- use outbox_thread_at (thread, created_at, seq): 0.02–0.04 ms, the plans
-- never chose outbox_thread.
DROP INDEX outbox_thread;
-- Held every sent message for the dead-letter count and OutboxList by
-- status (a generic plan walked the primary key: 29 ms dead, 149 ms
-- pending). Dead letters are read from outbox_dead, pending messages from
-- outbox_pending (0016; few, sorted by seq after the read).
DROP INDEX outbox_status;
-- Only dead letters: the full path never enters it. Not an index over
-- every unsent row: that one would also match the claim's pending rows,
-- the trap described at outbox_pending below.
CREATE INDEX outbox_dead ON outbox (seq) WHERE status = 'dead';

-- Kept, each needed by a read on a large store (measured without it):
-- runs_created (Overview's runs of the last hour: 18 ms; a seq scan 128 ms;
-- a BRIN index read 21 ms but degrades once updates scatter new row
-- versions over the heap), runs_thread (AgentHistory, RunList by thread),
-- events_channel_at (a channel's last event: 0.05 ms; a seq scan 136 ms),
-- events_thread and outbox_thread_at (ThreadMessages), events_channel_thread
-- and outbox_channel_thread (ThreadList, index-only; without the latter the
-- outbox side is a seq scan of every message), outbox_card (OutboxCardRef,
-- cards only), run_events_run and run_events_agent (RunEventList,
-- AgentHistory).

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
