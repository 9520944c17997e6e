-- Grants bound to what they were granted for (the trust model): a session
-- grant covers only the same requester, thread, tool and policy rule until
-- it expires; a forever grant is a stored allow rule for exact arguments
-- or a per-argument pattern, listed and revoked through the API. The old
-- table held blanket (thread, tool) grants that never expired; they are
-- dropped, so later calls ask again. Keep in step with
-- store/sqlite/migrations/0005_trust_grants.sql.
DROP TABLE grants;
CREATE TABLE grants (
    seq         BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id          TEXT    NOT NULL UNIQUE,
    scope       TEXT    NOT NULL,
    tool        TEXT    NOT NULL,
    thread      TEXT    NOT NULL DEFAULT '',
    requester   TEXT    NOT NULL DEFAULT '',
    rule_key    TEXT    NOT NULL DEFAULT '',
    args        TEXT,
    pattern     TEXT,
    approval_id TEXT    NOT NULL,
    actor       TEXT    NOT NULL,
    created_at  BIGINT  NOT NULL,
    expires_at  BIGINT,
    revoked_at  BIGINT,
    revoked_by  TEXT    NOT NULL DEFAULT ''
);
-- The gate reads the grants of one tool that are not revoked.
CREATE INDEX grants_tool ON grants (tool, revoked_at);
