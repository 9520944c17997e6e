-- Audit entries committed with what they record but not yet chained: the
-- sealer (sqlstore.Store.SealAudit) moves them into audit in id order under
-- the audit advisory lock, so concurrent decisions no longer commit one at
-- a time behind that lock. SQLite seals inline and has no such table.
CREATE TABLE audit_pending (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          BIGINT NOT NULL,
    kind        TEXT   NOT NULL,
    actor       TEXT   NOT NULL,
    run_id      TEXT   NOT NULL DEFAULT '',
    approval_id TEXT   NOT NULL DEFAULT '',
    tool        TEXT   NOT NULL DEFAULT '',
    detail      TEXT
);
