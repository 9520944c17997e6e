package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/opsgate/opsgate/core"
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

// SendLeaseAcquire implements core.OutboxStore: LeaseAcquire's guarded
// upsert, which also stores the holder's state, after reading the row as
// it was under the row lock (Postgres) or the write lock (SQLite), so
// exactly one of two racing replicas acquires and learns what the previous
// holder left.
func (s *Store) SendLeaseAcquire(ctx context.Context, p core.SendLeaseParams) (core.SendLease, error) {
	var got core.SendLease
	err := s.inTx(ctx, "send lease acquire", func(t *tx) error {
		var owner, state string
		var until int64
		err := t.queryRow(ctx, `SELECT owner, until_at, state FROM leases WHERE name = ?`+t.d.ForUpdate, p.Name).
			Scan(&owner, &until, &state)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return fmt.Errorf("store: send lease acquire %s: %w", p.Name, err)
		default:
			got.PriorOwner, got.PriorState = owner, []byte(state)
			if until != 0 {
				got.PriorUntil = fromMicros(until)
			}
		}
		r, err := t.exec(ctx, `INSERT INTO leases (name, owner, until_at, state) VALUES (?, ?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, until_at = excluded.until_at, state = excluded.state
			WHERE leases.owner = excluded.owner OR leases.until_at <= ?`,
			p.Name, p.Owner, micros(p.Until), string(p.State), micros(p.Now))
		if err != nil {
			return fmt.Errorf("store: send lease acquire %s: %w", p.Name, err)
		}
		n, err := r.RowsAffected()
		if err != nil {
			return fmt.Errorf("store: send lease acquire %s: %w", p.Name, err)
		}
		got.Acquired = n == 1
		return nil
	})
	if err != nil {
		return core.SendLease{}, err
	}
	return got, nil
}

// SendLeaseHandOver implements core.OutboxStore. The row stays, with
// until_at 0 ("handed over") and the state, for the next holder to read.
func (s *Store) SendLeaseHandOver(ctx context.Context, p core.SendLeaseParams) error {
	return s.inTx(ctx, "send lease hand over", func(t *tx) error {
		r, err := t.exec(ctx, `UPDATE leases SET until_at = 0, state = ? WHERE name = ? AND owner = ?`,
			string(p.State), p.Name, p.Owner)
		if err != nil {
			return fmt.Errorf("store: send lease hand over %s: %w", p.Name, err)
		}
		if n, err := r.RowsAffected(); err != nil || n == 0 {
			if err != nil {
				return fmt.Errorf("store: send lease hand over %s: %w", p.Name, err)
			}
			return nil // not ours: nothing to hand over
		}
		if _, err := t.exec(ctx, `UPDATE outbox SET owner = NULL, lease_until = NULL
			WHERE channel = ? AND owner = ? AND status = 'pending'`, p.Channel, p.Owner); err != nil {
			return fmt.Errorf("store: send lease hand over %s: free claims: %w", p.Name, err)
		}
		t.notify(core.TopicOutbox)
		return nil
	})
}
