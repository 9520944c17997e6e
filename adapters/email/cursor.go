package email

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/opsgate/opsgate/core"
)

// Cursor is how far a mailbox has been handed to the sink: every message
// with a UID up to LastUID under UIDValidity was recorded (or deliberately
// skipped). It lives in the store (CursorStore), beside the events it
// summarizes, so a restart, a redeploy on a fresh volume or another
// replica starts where the last reader stopped.
type Cursor struct {
	Mailbox     string `json:"mailbox"`
	UIDValidity uint32 `json:"uidvalidity"`
	LastUID     uint32 `json:"last_uid"`
}

// CursorStore is the durable key/value state the adapter keeps its cursor
// in: core.StateStore, which every opsgate store implements, declared here
// as the two calls the adapter makes.
type CursorStore interface {
	// StateGet returns the value under key, or an error matching
	// core.ErrNotFound when there is none.
	StateGet(ctx context.Context, key string) ([]byte, error)
	// StatePut stores value under key, overwriting any previous value.
	StatePut(ctx context.Context, key string, value []byte, now time.Time) error
}

// cursorKey names this adapter's cursor: one per bot address and mailbox,
// so two mailboxes (or two bots on one database) never share a position.
func (a *Adapter) cursorKey() string {
	return "email:cursor:" + strings.ToLower(a.cfg.Address) + ":" + a.cfg.IMAP.Mailbox
}

// loadCursor reads the cursor; an absent one is the zero Cursor. A value
// that does not decode (written by something else) is treated as absent
// too: the cost is a re-read of the Backfill window, which the Message-ID
// dedup absorbs, where refusing to start would stop the mailbox.
func (a *Adapter) loadCursor(ctx context.Context) (Cursor, error) {
	b, err := a.store.StateGet(ctx, a.cursorKey())
	if errors.Is(err, core.ErrNotFound) {
		return Cursor{}, nil
	}
	if err != nil {
		return Cursor{}, fmt.Errorf("email: read cursor: %w", err)
	}
	var c Cursor
	if err := json.Unmarshal(b, &c); err != nil {
		a.log.Warn("email: stored cursor unreadable; re-reading the backfill window", "key", a.cursorKey(), "err", err)
		return Cursor{}, nil
	}
	return c, nil
}

// saveCursor writes the cursor in one store transaction: a crash leaves
// the old position or the new one.
func (a *Adapter) saveCursor(ctx context.Context, c Cursor) error {
	b, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("email: encode cursor: %w", err)
	}
	if err := a.store.StatePut(ctx, a.cursorKey(), b, a.now()); err != nil {
		return fmt.Errorf("email: save cursor: %w", err)
	}
	return nil
}
