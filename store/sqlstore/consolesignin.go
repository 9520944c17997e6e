package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/opsgate/opsgate/core"
)

// ConsoleSigninCreate stores a console session begun through the identity
// provider (migration 0023) and prunes the ones that ended, in one
// transaction.
func (s *Store) ConsoleSigninCreate(ctx context.Context, si core.ConsoleSignin, now time.Time) error {
	if si.ID == "" || si.Identity == "" {
		return fmt.Errorf("store: console sign-in create: empty id or identity")
	}
	groups := si.Groups
	if groups == nil {
		groups = []string{}
	}
	g, err := json.Marshal(groups)
	if err != nil {
		return fmt.Errorf("store: console sign-in create: %w", err)
	}
	return s.inTx(ctx, "console sign-in create", func(t *tx) error {
		if _, err := t.exec(ctx, `DELETE FROM console_signins WHERE expires_at <= ?`, micros(orNow(now))); err != nil {
			return fmt.Errorf("store: console sign-in prune: %w", err)
		}
		if _, err := t.exec(ctx, `INSERT INTO console_signins (id, identity, name, groups, created_at, expires_at)
			VALUES (?, ?, ?, ?, ?, ?)`, si.ID, si.Identity, si.Name, string(g), micros(orNow(si.CreatedAt)), micros(si.ExpiresAt)); err != nil {
			return fmt.Errorf("store: console sign-in create: %w", err)
		}
		return nil
	})
}

// ConsoleSigninGet returns the console session id if it exists and has not
// expired at now; otherwise an error matching core.ErrNotFound.
func (s *Store) ConsoleSigninGet(ctx context.Context, id string, now time.Time) (*core.ConsoleSignin, error) {
	si := core.ConsoleSignin{ID: id}
	var groups string
	var created, expires int64
	err := s.read.QueryRowContext(ctx, s.dialect.Rebind(`SELECT identity, name, groups, created_at, expires_at
		FROM console_signins WHERE id = ? AND expires_at > ?`), id, micros(orNow(now))).Scan(&si.Identity, &si.Name, &groups, &created, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: console sign-in %q: %w", id, core.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: console sign-in get: %w", err)
	}
	if err := json.Unmarshal([]byte(groups), &si.Groups); err != nil {
		return nil, fmt.Errorf("store: console sign-in %q: groups: %w", id, err)
	}
	si.CreatedAt, si.ExpiresAt = fromMicros(created), fromMicros(expires)
	return &si, nil
}

// ConsoleSigninEnd ends the console session id (sign-out) for every
// replica; ending an unknown or ended one is no error.
func (s *Store) ConsoleSigninEnd(ctx context.Context, id string) error {
	return s.inTx(ctx, "console sign-in end", func(t *tx) error {
		if _, err := t.exec(ctx, `DELETE FROM console_signins WHERE id = ?`, id); err != nil {
			return fmt.Errorf("store: console sign-in end: %w", err)
		}
		return nil
	})
}

// ConsoleStateUse records that the sign-in attempt state was answered: the
// first use returns nil, every later one (a replayed callback, on any
// replica) an error matching core.ErrConflict, until expires, when the
// attempt's cookie has expired too. Ended states are pruned in the same
// transaction.
func (s *Store) ConsoleStateUse(ctx context.Context, state string, expires, now time.Time) error {
	if state == "" {
		return fmt.Errorf("store: console state use: empty state")
	}
	return s.inTx(ctx, "console state use", func(t *tx) error {
		if _, err := t.exec(ctx, `DELETE FROM console_oidc_states WHERE expires_at <= ?`, micros(orNow(now))); err != nil {
			return fmt.Errorf("store: console state prune: %w", err)
		}
		r, err := t.exec(ctx, `INSERT INTO console_oidc_states (state, expires_at) VALUES (?, ?) ON CONFLICT (state) DO NOTHING`,
			state, micros(expires))
		if err != nil {
			return fmt.Errorf("store: console state use: %w", err)
		}
		n, err := r.RowsAffected()
		if err != nil {
			return fmt.Errorf("store: console state use: %w", err)
		}
		if n == 0 {
			return fmt.Errorf("store: console state already used: %w", core.ErrConflict)
		}
		return nil
	})
}
