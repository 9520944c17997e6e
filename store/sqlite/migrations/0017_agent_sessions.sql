-- Agent API sessions (issue 13): an app's conversation with one agent,
-- owned by the API token that created it (token = the token's name) and
-- acting as that token's actor. The agent and its settings (a JSON
-- snapshot taken at creation) stay fixed for the session's life; its turns
-- are the runs of thread <thread_channel>:<thread_key>. Keep in step with
-- store/postgres/migrations/0017_agent_sessions.sql.
CREATE TABLE agent_sessions (
    seq            INTEGER PRIMARY KEY AUTOINCREMENT,
    id             TEXT    NOT NULL UNIQUE,
    token          TEXT    NOT NULL,
    actor          TEXT    NOT NULL,
    agent          TEXT    NOT NULL,
    settings       TEXT    NOT NULL,
    thread_channel TEXT    NOT NULL,
    thread_key     TEXT    NOT NULL,
    created_at     BIGINT  NOT NULL
);
CREATE INDEX agent_sessions_token ON agent_sessions (token, seq);
