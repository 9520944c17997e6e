-- Durable key/value state of adapters (core.StateStore), e.g. the email
-- adapter's IMAP cursor, so it lives with everything else the server keeps
-- and every replica sees it. Numbered 0003 like its Postgres twin (SQLite
-- has no 0002: audit_pending is Postgres only).
CREATE TABLE adapter_state (
    key        TEXT   PRIMARY KEY,
    value      BLOB   NOT NULL,
    updated_at BIGINT NOT NULL
);
