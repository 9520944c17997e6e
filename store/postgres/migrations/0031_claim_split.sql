-- Issue 31: the run claim reads queued runs and lapsed leases from two
-- indexes of their own. Walking runs_claimable (0016) in queue order, every
-- claim passed over the runs executing (up to engine.concurrency per
-- replica, whose leases are live) before reaching a queued one; under load
-- that was most of the entries a claim read. Now the queued branch walks
-- only queued runs, and the lapsed branch reads only leases already past
-- (a range of lease_until). runs_claimable stays for RunList. Keep in step
-- with store/sqlite/migrations/0031_claim_split.sql.
CREATE INDEX runs_queued ON runs (seq) WHERE status = 'queued';
CREATE INDEX runs_lease ON runs (lease_until) WHERE status = 'running';
