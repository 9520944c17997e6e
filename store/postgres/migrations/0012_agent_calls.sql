-- Agent tasks: a flow step `agent_task` suspends its run with an agent
-- call that an external agent (an MCP client) claims, works on with the
-- task's declared tools, and completes with a result. agent_receipts keeps
-- every tool call an agent made for a call, keyed by the agent's own
-- toolCallId, so a retry gets the kept receipt instead of a second
-- dispatch. Keep in step with store/sqlite/migrations/0012_agent_calls.sql.
CREATE TABLE agent_calls (
    seq           BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id            TEXT    NOT NULL UNIQUE,
    run_id        TEXT    NOT NULL REFERENCES runs (id),
    step_index    INTEGER NOT NULL,
    status        TEXT    NOT NULL,
    task          TEXT    NOT NULL,
    claim_id      TEXT    NOT NULL DEFAULT '',
    claimed_by    TEXT    NOT NULL DEFAULT '',
    claimed_at    BIGINT,
    served_by     TEXT    NOT NULL DEFAULT '',
    result        TEXT,
    error_code    TEXT    NOT NULL DEFAULT '',
    error         TEXT    NOT NULL DEFAULT '',
    created_at    BIGINT  NOT NULL,
    updated_at    BIGINT  NOT NULL,
    finished_at   BIGINT
);
CREATE INDEX agent_calls_run ON agent_calls (run_id, step_index, seq);
CREATE INDEX agent_calls_status ON agent_calls (status, seq);

CREATE TABLE agent_receipts (
    call_id         TEXT    NOT NULL REFERENCES agent_calls (id),
    tool_call_id    TEXT    NOT NULL,
    seq             INTEGER NOT NULL,
    tool_id         TEXT    NOT NULL,
    input           TEXT    NOT NULL,
    args            TEXT,
    status          TEXT    NOT NULL,
    output          TEXT    NOT NULL DEFAULT '',
    error           TEXT    NOT NULL DEFAULT '',
    approval_id     TEXT    NOT NULL DEFAULT '',
    idempotency_key TEXT    NOT NULL DEFAULT '',
    created_at      BIGINT  NOT NULL,
    finished_at     BIGINT,
    PRIMARY KEY (call_id, tool_call_id)
);
