-- Schedules (core/schedule, docs/schedules.md). schedules holds one row per
-- schedule ever configured: the first tick not yet handled (next_at), the
-- cron and timezone it was computed from (spec: a changed schedule starts
-- over), the latest tick that fired and its run, and the pause, which so
-- survives restarts and holds on every replica.
--
-- schedule_ticks holds one row per handled tick, unique on (schedule,
-- tick_at): the tick is claimed by inserting it in the transaction that
-- records its event and run and moves next_at on (compare-and-set), so a
-- tick fires once across replicas and restarts. Times are Unix
-- microseconds, as every other timestamp. Keep in step with
-- store/postgres/migrations/0022_schedules.sql.
CREATE TABLE schedules (
    name        TEXT PRIMARY KEY,
    spec        TEXT   NOT NULL,
    next_at     BIGINT NOT NULL,
    last_at     BIGINT,
    last_run_id TEXT,
    paused      INTEGER NOT NULL DEFAULT 0,
    paused_by   TEXT   NOT NULL DEFAULT '',
    updated_at  BIGINT NOT NULL
);

CREATE TABLE schedule_ticks (
    schedule   TEXT    NOT NULL,
    tick_at    BIGINT  NOT NULL,
    status     TEXT    NOT NULL,
    reason     TEXT    NOT NULL DEFAULT '',
    run_id     TEXT,
    missed     INTEGER NOT NULL DEFAULT 0,
    by_actor   TEXT    NOT NULL DEFAULT '',
    owner      TEXT    NOT NULL,
    created_at BIGINT  NOT NULL,
    PRIMARY KEY (schedule, tick_at)
);
