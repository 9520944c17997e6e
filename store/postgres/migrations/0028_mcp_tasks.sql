-- MCP task handles (the Tasks extension, docs/mcp.md) and the trace
-- context runs were started under. A task's state is read from its run on
-- every tasks/get; the row only says which run (and agent tool call) it
-- follows, for whom, and until when. Times are Unix microseconds. Keep in
-- step with store/sqlite/migrations/0028_mcp_tasks.sql.
CREATE TABLE mcp_tasks (
    id           TEXT   PRIMARY KEY,
    actor        TEXT   NOT NULL,
    endpoint     TEXT   NOT NULL,
    tool         TEXT   NOT NULL,
    run_id       TEXT   NOT NULL,
    call_id      TEXT   NOT NULL DEFAULT '',
    claim_id     TEXT   NOT NULL DEFAULT '',
    tool_call_id TEXT   NOT NULL DEFAULT '',
    tool_id      TEXT   NOT NULL DEFAULT '',
    input        TEXT   NOT NULL DEFAULT '',
    traceparent  TEXT   NOT NULL DEFAULT '',
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL
);
CREATE TABLE run_traces (
    run_id      TEXT PRIMARY KEY,
    traceparent TEXT NOT NULL
);
