-- Durable key/value state of adapters (core.StateStore), e.g. the email
-- adapter's IMAP cursor, so it lives with everything else the server keeps
-- and every replica sees it.
CREATE TABLE adapter_state (
    key        TEXT   PRIMARY KEY,
    value      BYTEA  NOT NULL,
    updated_at BIGINT NOT NULL
);
