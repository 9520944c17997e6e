-- opsgate schema, Postgres. Times are unix microseconds; JSON is TEXT.
-- Keep in step with store/sqlite/migrations/0001_init.sql: the same
-- columns, the same meaning, only the types of generated keys differ.

CREATE TABLE events (
    channel     TEXT    NOT NULL,
    event_id    TEXT    NOT NULL,
    run_id      TEXT,
    actor       TEXT    NOT NULL DEFAULT '',
    thread      TEXT    NOT NULL DEFAULT '',
    received_at BIGINT  NOT NULL,
    raw         BYTEA,
    PRIMARY KEY (channel, event_id)
);

CREATE TABLE runs (
    seq           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id            TEXT    NOT NULL UNIQUE,
    flow          TEXT    NOT NULL,
    thread        TEXT    NOT NULL,
    requester     TEXT    NOT NULL,
    status        TEXT    NOT NULL,
    args          TEXT    NOT NULL,
    reason        TEXT    NOT NULL DEFAULT '',
    step_index    INTEGER NOT NULL DEFAULT 0,
    error_code    TEXT    NOT NULL DEFAULT '',
    error_message TEXT    NOT NULL DEFAULT '',
    event_channel TEXT    NOT NULL DEFAULT '',
    event_id      TEXT    NOT NULL DEFAULT '',
    owner         TEXT,
    lease_until   BIGINT,
    created_at    BIGINT  NOT NULL,
    updated_at    BIGINT  NOT NULL
);
CREATE INDEX runs_claim ON runs (status, thread, seq);
CREATE INDEX runs_thread ON runs (thread, seq);
CREATE INDEX runs_owner ON runs (owner) WHERE owner IS NOT NULL;

CREATE TABLE steps (
    run_id          TEXT    NOT NULL REFERENCES runs (id),
    idx             INTEGER NOT NULL,
    tool            TEXT    NOT NULL,
    status          TEXT    NOT NULL,
    args            TEXT    NOT NULL,
    output          TEXT    NOT NULL DEFAULT '',
    error           TEXT    NOT NULL DEFAULT '',
    approval_id     TEXT    NOT NULL DEFAULT '',
    idempotency_key TEXT    NOT NULL DEFAULT '',
    attempts        INTEGER NOT NULL DEFAULT 0,
    started_at      BIGINT,
    finished_at     BIGINT,
    PRIMARY KEY (run_id, idx)
);

CREATE TABLE run_events (
    seq    BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id TEXT    NOT NULL,
    type   TEXT    NOT NULL,
    data   TEXT,
    at     BIGINT  NOT NULL
);
CREATE INDEX run_events_run ON run_events (run_id, seq);

CREATE TABLE approvals (
    seq           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id            TEXT    NOT NULL UNIQUE,
    run_id        TEXT    NOT NULL,
    step_index    INTEGER NOT NULL,
    thread        TEXT    NOT NULL,
    requester     TEXT    NOT NULL,
    tool          TEXT    NOT NULL,
    destructive   BOOLEAN NOT NULL,
    risk          TEXT    NOT NULL,
    proposed_args TEXT    NOT NULL,
    approved_args TEXT    NOT NULL,
    executed_args TEXT    NOT NULL,
    preview       TEXT    NOT NULL DEFAULT '',
    reason        TEXT    NOT NULL DEFAULT '',
    status        TEXT    NOT NULL,
    approvers     TEXT    NOT NULL,
    eligible      TEXT    NOT NULL,
    quorum        INTEGER NOT NULL,
    rule          INTEGER NOT NULL,
    decisions     TEXT    NOT NULL,
    created_at    BIGINT  NOT NULL,
    expires_at    BIGINT  NOT NULL,
    decided_at    BIGINT
);
CREATE INDEX approvals_expiry ON approvals (status, expires_at);
CREATE INDEX approvals_run ON approvals (run_id, seq);

CREATE TABLE grants (
    thread      TEXT   NOT NULL,
    tool        TEXT   NOT NULL,
    approval_id TEXT   NOT NULL,
    actor       TEXT   NOT NULL,
    at          BIGINT NOT NULL,
    PRIMARY KEY (thread, tool)
);

CREATE TABLE audit (
    seq         BIGINT PRIMARY KEY,
    at          BIGINT NOT NULL,
    kind        TEXT   NOT NULL,
    actor       TEXT   NOT NULL,
    run_id      TEXT   NOT NULL DEFAULT '',
    approval_id TEXT   NOT NULL DEFAULT '',
    tool        TEXT   NOT NULL DEFAULT '',
    detail      TEXT,
    prev_hash   TEXT   NOT NULL,
    hash        TEXT   NOT NULL
);

CREATE TABLE outbox (
    seq             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id              TEXT    NOT NULL UNIQUE,
    channel         TEXT    NOT NULL,
    thread          TEXT    NOT NULL,
    kind            TEXT    NOT NULL,
    text            TEXT    NOT NULL DEFAULT '',
    approval_id     TEXT    NOT NULL DEFAULT '',
    run_id          TEXT    NOT NULL DEFAULT '',
    status          TEXT    NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at BIGINT  NOT NULL,
    chunks_sent     INTEGER NOT NULL DEFAULT 0,
    refs            TEXT    NOT NULL DEFAULT '[]',
    last_error      TEXT    NOT NULL DEFAULT '',
    owner           TEXT,
    lease_until     BIGINT,
    created_at      BIGINT  NOT NULL,
    sent_at         BIGINT
);
CREATE INDEX outbox_claim ON outbox (channel, status, next_attempt_at);
CREATE INDEX outbox_thread ON outbox (thread, status, seq);
CREATE INDEX outbox_status ON outbox (status, seq);
CREATE INDEX outbox_card ON outbox (approval_id, thread) WHERE approval_id <> '';

CREATE TABLE leases (
    name     TEXT   PRIMARY KEY,
    owner    TEXT   NOT NULL,
    until_at BIGINT NOT NULL
);
