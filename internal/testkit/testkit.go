// Package testkit is what tests across the repository share instead of
// copying: a log buffer safe for concurrent writers, and openers for
// migrated stores on both backends. It imports stores, never an adapter,
// so core's tests may use it without core depending on a platform.
package testkit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/opsgate/opsgate/store/pgtest"
	"github.com/opsgate/opsgate/store/postgres"
	"github.com/opsgate/opsgate/store/sqlite"
)

// LogBuffer is a bytes.Buffer safe for concurrent writers: a log sink for a
// server's goroutines that a test reads.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// OpenSQLite opens the SQLite database at path and migrates it; the caller
// closes it. For harnesses that reopen one database across restarts.
//
// A database that does not exist yet starts as a copy of one this process
// migrated once (migratedSQLite), so a package's hundreds of fresh stores
// cost a file write each instead of every migration with its fsyncs (under
// load, seconds a store); Migrate then finds the schema current.
func OpenSQLite(ctx context.Context, path string) (*sqlite.Store, error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) && !strings.ContainsAny(path, "?:") {
		image, err := migratedSQLite(ctx)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, image, 0o600); err != nil {
			return nil, fmt.Errorf("testkit: copy the migrated SQLite database: %w", err)
		}
	}
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	if err := s.Migrate(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("migrate: %w", err)
	}
	return s, nil
}

// sqliteImage is the file of a freshly migrated SQLite database, made once
// per process.
var sqliteImage struct {
	once  sync.Once
	bytes []byte
	err   error
}

// migratedSQLite returns the bytes of a freshly migrated SQLite database.
// It is migrated in rollback-journal mode, so the one file holds all of it
// (no write-ahead log beside it); a copy opened by sqlite.Open switches to
// WAL as any database does.
func migratedSQLite(ctx context.Context) ([]byte, error) {
	sqliteImage.once.Do(func() {
		dir, err := os.MkdirTemp("", "testkit-sqlite-")
		if err != nil {
			sqliteImage.err = fmt.Errorf("testkit: migrated SQLite image: %w", err)
			return
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, "opsgate.db")
		s, err := sqlite.Open(ctx, path+"?_pragma=journal_mode(DELETE)")
		if err != nil {
			sqliteImage.err = fmt.Errorf("testkit: migrated SQLite image: %w", err)
			return
		}
		err = s.Migrate(ctx)
		if cerr := s.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			sqliteImage.err = fmt.Errorf("testkit: migrated SQLite image: %w", err)
			return
		}
		sqliteImage.bytes, sqliteImage.err = os.ReadFile(path)
	})
	return sqliteImage.bytes, sqliteImage.err
}

// OpenPostgres opens the Postgres database at dsn and migrates it; the
// caller closes it.
func OpenPostgres(ctx context.Context, dsn string) (*postgres.Store, error) {
	s, err := postgres.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	if err := s.Migrate(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("migrate: %w", err)
	}
	return s, nil
}

// SQLite is a migrated SQLite store in the test's temporary directory,
// closed when the test ends.
func SQLite(t testing.TB) *sqlite.Store {
	t.Helper()
	s, err := OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "opsgate.db"))
	if err != nil {
		t.Fatalf("open SQLite store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Postgres is a migrated store on a fresh database from store/pgtest
// (which skips, or fails under OPSGATE_REQUIRE_POSTGRES, without a server),
// closed when the test ends. The package's TestMain must call pgtest.Main.
func Postgres(t testing.TB) *postgres.Store {
	t.Helper()
	s, err := OpenPostgres(context.Background(), PostgresDSN(t))
	if err != nil {
		t.Fatalf("open Postgres store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// migratedPostgres is the template of PostgresDSN's databases: migrated
// once per test process.
var migratedPostgres = pgtest.NewTemplate(func(ctx context.Context, dsn string) error {
	s, err := OpenPostgres(ctx, dsn)
	if err != nil {
		return err
	}
	return s.Close()
})

// PostgresDSN is pgtest.DSN with the database already migrated: a copy of
// one this process migrated once, so a package's hundreds of fresh stores
// do not each run every migration. OpenPostgres on it finds the schema
// current.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	return pgtest.DSNFrom(t, migratedPostgres)
}
