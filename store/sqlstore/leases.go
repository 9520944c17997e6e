package sqlstore

import (
	"context"
	"fmt"
	"time"
)

// LeaseAcquire implements core.OutboxStore: the upsert only overwrites a
// lease held by the same owner or already expired, so exactly one of two
// racing replicas sees a row change.
func (s *Store) LeaseAcquire(ctx context.Context, name, owner string, now, until time.Time) (bool, error) {
	var got bool
	err := s.inTx(ctx, "lease acquire", func(t *tx) error {
		r, err := t.exec(ctx, `INSERT INTO leases (name, owner, until_at) VALUES (?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, until_at = excluded.until_at
			WHERE leases.owner = excluded.owner OR leases.until_at <= ?`, name, owner, micros(until), micros(now))
		if err != nil {
			return fmt.Errorf("store: lease acquire %s: %w", name, err)
		}
		n, err := r.RowsAffected()
		if err != nil {
			return fmt.Errorf("store: lease acquire %s: %w", name, err)
		}
		got = n == 1
		return nil
	})
	return got, err
}

// LeaseRelease implements core.OutboxStore; releasing a lease one does not
// hold changes nothing.
func (s *Store) LeaseRelease(ctx context.Context, name, owner string) error {
	return s.inTx(ctx, "lease release", func(t *tx) error {
		if _, err := t.exec(ctx, `DELETE FROM leases WHERE name = ? AND owner = ?`, name, owner); err != nil {
			return fmt.Errorf("store: lease release %s: %w", name, err)
		}
		return nil
	})
}
