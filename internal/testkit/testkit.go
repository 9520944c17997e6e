// Package testkit is what tests across the repository share instead of
// copying: a log buffer safe for concurrent writers, and openers for
// migrated stores on both backends. It imports stores, never an adapter,
// so core's tests may use it without core depending on a platform.
package testkit

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
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
func OpenSQLite(ctx context.Context, path string) (*sqlite.Store, error) {
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
	s, err := OpenPostgres(context.Background(), pgtest.DSN(t))
	if err != nil {
		t.Fatalf("open Postgres store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
