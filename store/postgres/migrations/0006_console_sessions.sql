-- Signed-out web console sessions (adapters/console/web): a session cookie
-- whose id is here is refused by every replica and after a restart, until
-- the time it would have expired anyway; rows past that are pruned on the
-- next sign-out. Only ids of ended sessions are kept, never a cookie or a
-- token. Keep in step with the other backend's 0006_console_sessions.sql.
CREATE TABLE console_sessions_revoked (
    session_id TEXT   PRIMARY KEY,
    expires_at BIGINT NOT NULL
);
CREATE INDEX console_sessions_revoked_expires ON console_sessions_revoked (expires_at);
