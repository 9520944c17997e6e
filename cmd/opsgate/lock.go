package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/opsgate/opsgate/config"
)

// SQLite is one process's store: two servers on one file would each claim
// runs, send each outbox message and sweep expiries under their own
// in-process locks. serve therefore holds an exclusive flock(2) on
// <database>.lock for as long as it runs; a second serve on the same file
// is refused at once, naming the holder. The kernel drops the lock when
// the process ends, however it ends (SIGKILL included), so a stale lock
// file never blocks a restart. Several replicas need Postgres.
//
// migrate and audit verify do not take the lock: SQLite's own locking
// keeps them safe beside a running server.

// sqliteLock is a held lock; release drops it.
type sqliteLock struct{ f *os.File }

func (l *sqliteLock) release() {
	if l != nil && l.f != nil {
		_ = l.f.Close() // closing the descriptor drops the flock
	}
}

// lockStore takes the SQLite file's lock for serve; it is a no-op for
// Postgres and in-memory databases.
func lockStore(cfg *config.Config) (*sqliteLock, error) {
	if cfg.Store.Driver != "sqlite" && cfg.Store.Driver != "" {
		return &sqliteLock{}, nil
	}
	db := sqlitePath(cfg.Store.DSN)
	if db == "" {
		return &sqliteLock{}, nil
	}
	if err := makePrivateDir(filepath.Dir(db)); err != nil {
		return nil, fmt.Errorf("lock SQLite store: %w", err)
	}
	path := db + ".lock"
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock SQLite store: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := ""
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 0 {
				holder = fmt.Sprintf(" (pid %d)", pid)
			}
		}
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another opsgate serve%s is already running on the SQLite database %s (it holds %s): "+
				"SQLite takes one server per file; stop that one, or use store.driver: postgres to run several replicas",
				holder, db, path)
		}
		return nil, fmt.Errorf("lock SQLite store %s: %w", path, err)
	}
	// Say who holds it, for the message above; the lock is the flock, not
	// the content.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &sqliteLock{f: f}, nil
}
