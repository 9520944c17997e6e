package sqlstore

import (
	"context"
	"fmt"
	"time"
)

// AgentAttendHold records that holder (one replica) holds an event stream
// of Agent API session until until, or moves an existing hold of holder's
// to until (a renewal). Lapsed holds of the session are pruned in the same
// transaction.
func (s *Store) AgentAttendHold(ctx context.Context, session, holder string, until, now time.Time) error {
	if session == "" || holder == "" {
		return fmt.Errorf("store: agent attend hold: empty session or holder")
	}
	return s.inTx(ctx, "agent attend hold", func(t *tx) error {
		if _, err := t.exec(ctx, `DELETE FROM agent_attendance WHERE session_id = ? AND held_until <= ?`,
			session, micros(orNow(now))); err != nil {
			return fmt.Errorf("store: agent attend prune %s: %w", session, err)
		}
		if _, err := t.exec(ctx, `INSERT INTO agent_attendance (session_id, holder, held_until) VALUES (?, ?, ?)
			ON CONFLICT (session_id, holder) DO UPDATE SET held_until = excluded.held_until`,
			session, holder, micros(until)); err != nil {
			return fmt.Errorf("store: agent attend hold %s: %w", session, err)
		}
		return nil
	})
}

// AgentAttendRelease drops holder's hold of session (its last stream of
// the session closed). Releasing what is not held is no error.
func (s *Store) AgentAttendRelease(ctx context.Context, session, holder string) error {
	return s.inTx(ctx, "agent attend release", func(t *tx) error {
		if _, err := t.exec(ctx, `DELETE FROM agent_attendance WHERE session_id = ? AND holder = ?`, session, holder); err != nil {
			return fmt.Errorf("store: agent attend release %s: %w", session, err)
		}
		return nil
	})
}

// AgentAttended reports whether any holder holds session at now: a hold
// whose held_until is after now.
func (s *Store) AgentAttended(ctx context.Context, session string, now time.Time) (bool, error) {
	var n int
	err := s.read.QueryRowContext(ctx, s.dialect.Rebind(`SELECT COUNT(*) FROM agent_attendance WHERE session_id = ? AND held_until > ?`),
		session, micros(orNow(now))).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("store: agent attended %s: %w", session, err)
	}
	return n > 0, nil
}
