package email

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Cursor is how far a mailbox has been handed to the sink: every message
// with a UID up to LastUID under UIDValidity was recorded (or deliberately
// skipped). The core store has no table for it, so it lives in a small
// file; losing the file costs only re-reads within Config.Backfill, which
// the store's Message-ID dedup absorbs.
type Cursor struct {
	Mailbox     string `json:"mailbox"`
	UIDValidity uint32 `json:"uidvalidity"`
	LastUID     uint32 `json:"last_uid"`
}

// cursorPath names the file for this account and mailbox, so two adapters
// sharing a state dir never share a cursor.
func (a *Adapter) cursorPath() string {
	sum := sha256.Sum256([]byte(a.cfg.IMAP.Username + "\x00" + a.cfg.IMAP.Addr + "\x00" + a.cfg.IMAP.Mailbox))
	return filepath.Join(a.cfg.StateDir, "cursor-"+hex.EncodeToString(sum[:6])+".json")
}

// loadCursor reads the cursor; a missing file is the zero Cursor.
func loadCursor(path string) (Cursor, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Cursor{}, nil
	}
	if err != nil {
		return Cursor{}, fmt.Errorf("email: read cursor: %w", err)
	}
	var c Cursor
	if err := json.Unmarshal(b, &c); err != nil {
		// A torn or foreign file is as good as none: re-reading is safe.
		return Cursor{}, nil
	}
	return c, nil
}

// saveCursor writes the cursor atomically: a temporary file, fsync,
// rename over the old one, fsync of the directory. A crash leaves either
// the old cursor or the new one, never a torn file.
func saveCursor(path string, c Cursor) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("email: cursor dir: %w", err)
	}
	b, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("email: encode cursor: %w", err)
	}
	f, err := os.CreateTemp(dir, ".cursor-*")
	if err != nil {
		return fmt.Errorf("email: write cursor: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("email: write cursor: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("email: sync cursor: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("email: close cursor: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("email: replace cursor: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
