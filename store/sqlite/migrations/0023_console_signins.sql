-- The web console's OpenID Connect sign-ins (adapters/console/web,
-- docs/console.md). console_signins holds one row per session begun
-- through the identity provider: the identity it acts as, the display
-- name and the identity provider's groups as of sign-in (JSON array),
-- read on every request so a sign-out or a removal from the configuration
-- takes effect on every replica. Rows past expires_at are pruned at the
-- next sign-in. console_oidc_states makes each sign-in attempt's state
-- single-use across replicas: the callback inserts it, a replay finds it.
-- Neither table holds a token or a secret. Keep in step with the other
-- backend's 0023_console_signins.sql.
CREATE TABLE console_signins (
    id         TEXT   PRIMARY KEY,
    identity   TEXT   NOT NULL,
    name       TEXT   NOT NULL DEFAULT '',
    groups     TEXT   NOT NULL DEFAULT '[]',
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX console_signins_expires ON console_signins (expires_at);
CREATE TABLE console_oidc_states (
    state      TEXT   PRIMARY KEY,
    expires_at BIGINT NOT NULL
);
CREATE INDEX console_oidc_states_expires ON console_oidc_states (expires_at);
