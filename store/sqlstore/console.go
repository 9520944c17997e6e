package sqlstore

import (
	"context"
	"fmt"
	"time"
)

// ConsoleSessionRevoke records that the console session id was signed out:
// every replica refuses it from now on, until expires (when its cookie
// would have stopped working anyway). Revoking twice is no error; ended
// revocations are pruned in the same transaction.
func (s *Store) ConsoleSessionRevoke(ctx context.Context, id string, expires, now time.Time) error {
	if id == "" {
		return fmt.Errorf("store: console session revoke: empty id")
	}
	return s.inTx(ctx, "console session revoke", func(t *tx) error {
		if _, err := t.exec(ctx, `DELETE FROM console_sessions_revoked WHERE expires_at <= ?`, micros(orNow(now))); err != nil {
			return fmt.Errorf("store: console session prune: %w", err)
		}
		if _, err := t.exec(ctx, `INSERT INTO console_sessions_revoked (session_id, expires_at) VALUES (?, ?)
			ON CONFLICT (session_id) DO UPDATE SET expires_at = excluded.expires_at`, id, micros(expires)); err != nil {
			return fmt.Errorf("store: console session revoke: %w", err)
		}
		return nil
	})
}

// ConsoleSessionRevoked reports whether the session id was signed out and
// its revocation has not yet run out at now.
func (s *Store) ConsoleSessionRevoked(ctx context.Context, id string, now time.Time) (bool, error) {
	var n int
	err := s.read.QueryRowContext(ctx, s.dialect.Rebind(`SELECT COUNT(*) FROM console_sessions_revoked WHERE session_id = ? AND expires_at > ?`),
		id, micros(orNow(now))).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("store: console session revoked: %w", err)
	}
	return n > 0, nil
}
