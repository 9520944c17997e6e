package sqlstore

import (
	"context"
	"time"
)

// StateGet implements core.StateStore. The value is read outside any write
// transaction: a put is one statement, so a reader sees the old value or
// the new one.
func (s *Store) StateGet(ctx context.Context, key string) ([]byte, error) {
	var v []byte
	err := s.read.QueryRowContext(ctx, s.dialect.Rebind(`SELECT value FROM adapter_state WHERE key = ?`), key).Scan(&v)
	if err != nil {
		return nil, mapErr(err, "state get "+key, "state "+key)
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}

// StatePut implements core.StateStore as one upsert, so concurrent puts of
// one key serialize on its row and the last commit wins; on Postgres it is
// its own transaction (execOne), one round trip.
func (s *Store) StatePut(ctx context.Context, key string, value []byte, now time.Time) error {
	if value == nil {
		value = []byte{} // the column is NOT NULL; an empty value is still a value
	}
	_, err := s.execOne(ctx, s.db, "state put "+key, `INSERT INTO adapter_state (key, value, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
		nil, key, value, micros(orNow(now)))
	return err
}
