// Package sqlite is opsgate's embedded store: one file, no server, the
// quickstart default. It serves one process: writers are serialized on one
// connection (BEGIN IMMEDIATE, so a transaction never has to upgrade a read
// lock and deadlock), readers run beside it in WAL mode, and Subscribe
// wakes only subscribers in this process. Beyond one machine, use
// store/postgres.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" driver

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/store/sqlstore"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

var _ core.Store = (*Store)(nil)

// Store is core.Store on a SQLite file; every query is sqlstore's.
type Store struct {
	*sqlstore.Store
	write, read *sql.DB
}

// maxReaders bounds the read connections; WAL readers never block the
// writer, and a handful covers API listing beside the engine.
const maxReaders = 4

// Options are Open's optional settings.
type Options struct {
	// Logger receives the store's own reports (audit sealer failures);
	// default slog.Default(). cmd passes the server's logger, so
	// --log-format and --log-level apply.
	Logger *slog.Logger
}

// Open is OpenWith with the default Options.
func Open(ctx context.Context, dsn string) (*Store, error) { return OpenWith(ctx, dsn, Options{}) }

// OpenWith opens (creating if needed, with its parent directory) the
// database at dsn: a file path, optionally with modernc.org/sqlite query
// parameters ("./data/opsgate.db?_pragma=synchronous(NORMAL)"), which
// override the defaults here. ":memory:" gives a private in-memory database
// (tests). It does not migrate; call Migrate.
func OpenWith(ctx context.Context, dsn string, o Options) (*Store, error) {
	path, query, _ := strings.Cut(strings.TrimPrefix(dsn, "file:"), "?")
	if path == "" {
		return nil, errors.New("sqlite: open: empty database path")
	}
	user, err := url.ParseQuery(query)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open: parse dsn parameters: %w", err)
	}
	memory := path == ":memory:"
	if !memory {
		if dir := filepath.Dir(path); dir != "." {
			if err := os.MkdirAll(dir, 0o750); err != nil {
				return nil, fmt.Errorf("sqlite: open: create directory %s: %w", dir, err)
			}
		}
	}
	write, err := sql.Open("sqlite", path+"?"+params(user, memory, false))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	// One writer: transactions queue in database/sql instead of spinning in
	// SQLite's busy handler, and a write is never refused as SQLITE_BUSY.
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)
	read := write
	if !memory {
		if read, err = sql.Open("sqlite", path+"?"+params(user, memory, true)); err != nil {
			write.Close()
			return nil, fmt.Errorf("sqlite: open %s for reading: %w", path, err)
		}
		read.SetMaxOpenConns(maxReaders)
		read.SetMaxIdleConns(maxReaders)
	}
	s := &Store{write: write, read: read}
	// Group commit: concurrent writers share one transaction and one fsync
	// (synchronous=FULL stays the default), instead of queueing for the one
	// connection and paying an fsync each.
	s.Store = sqlstore.New(sqlstore.Config{DB: write, ReadDB: read, Dialect: sqlstore.SQLiteDialect(), GroupCommit: true, Logger: o.Logger, Classify: classify})
	if err := s.Ping(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	return s, nil
}

// params builds the connection parameters: WAL, a 5 s busy timeout (for
// other processes, e.g. `opsgate migrate` beside a server), foreign keys,
// immediate write transactions; read connections are query-only. User
// parameters win over these defaults.
func params(user url.Values, memory, readOnly bool) string {
	q := url.Values{}
	pragmas := []string{"busy_timeout(5000)", "foreign_keys(1)"}
	if !memory {
		pragmas = append(pragmas, "journal_mode(WAL)")
	}
	if readOnly {
		pragmas = append(pragmas, "query_only(1)")
	} else {
		q.Set("_txlock", "immediate")
	}
	q["_pragma"] = pragmas
	for k, vs := range user {
		if k == "_pragma" {
			q[k] = append(q[k], vs...)
			continue
		}
		q[k] = vs
	}
	return q.Encode()
}

// Migrate brings the schema up to date. Safe to call on every start.
func (s *Store) Migrate(ctx context.Context) error {
	ms, err := sqlstore.ReadMigrations(migrationFiles, "migrations")
	if err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	conn, err := s.write.Conn(ctx)
	if err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	defer conn.Close()
	if _, err := sqlstore.Migrate(ctx, conn, sqlstore.SQLiteDialect(), ms); err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	return nil
}

// Close releases subscribers and closes the database.
func (s *Store) Close() error {
	_ = s.Store.Close()
	err := s.write.Close()
	if s.read != s.write {
		err = errors.Join(err, s.read.Close())
	}
	return err
}
