package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/opsgate/opsgate/adapters/console/web"
	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/config"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/api"
	"github.com/opsgate/opsgate/core/redact"
	"github.com/opsgate/opsgate/core/schedule"
	"github.com/opsgate/opsgate/store/postgres"
	"github.com/opsgate/opsgate/store/sqlite"
)

// store is what the binary needs of a backend beyond core.Store: migrating
// and verifying the audit chain. Both store/sqlite and store/postgres
// provide it; this is the only place that names them.
type store interface {
	core.Store
	// Overview backs the web console's home page.
	core.OverviewStore
	Migrate(ctx context.Context) error
	// AuditVerify is what the web console's store needs.
	AuditVerify(ctx context.Context) (badSeq int64, err error)
	// AuditVerifyReport backs `opsgate audit verify`: the first entry that
	// does not link, and the chain's head.
	AuditVerifyReport(ctx context.Context) (approvals.ChainReport, error)
	// SetAuditKey and AuditAdoptKey key the chain (audit.key_file).
	SetAuditKey(key approvals.AuditKey)
	AuditAdoptKey(ctx context.Context, key approvals.AuditKey, now time.Time) error
	// AuditAppend audits what belongs to no run (a configuration reload).
	AuditAppend(ctx context.Context, entries []approvals.AuditEntry) error
	// AgentSessionStore keeps the Agent API's sessions.
	core.AgentSessionStore
	// AttendanceStore shares who holds an Agent API stream between
	// replicas.
	api.AttendanceStore
	// SessionStore keeps the console's sign-outs for every replica.
	web.SessionStore
	// schedule.Store makes each schedule's tick fire once.
	schedule.Store
	// SigninStore keeps the console's sign-ins at the identity provider.
	web.SigninStore
}

var (
	_ store = (*sqlite.Store)(nil)
	_ store = (*postgres.Store)(nil)
)

// openStore opens the configured backend, logging through slog.Default()
// (the short-lived subcommands: migrate, audit verify).
func openStore(ctx context.Context, cfg *config.Config) (store, error) {
	return openStoreWith(ctx, cfg, slog.Default())
}

// openStoreWith opens the configured backend with log as the store's own
// logger (Postgres reconnects, audit sealer failures), so the server's
// --log-format and --log-level apply to it. A SQLite database holds every
// approval, argument and audit entry, so it is kept as private as the admin
// token beside it: see openSQLite.
func openStoreWith(ctx context.Context, cfg *config.Config, log *slog.Logger) (store, error) {
	switch cfg.Store.Driver {
	case "sqlite", "":
		return openSQLiteWith(ctx, cfg.Store.DSN, log)
	case "postgres":
		st, err := postgres.OpenWith(ctx, cfg.Store.DSN, postgres.Options{Logger: log})
		if err != nil {
			return nil, redact.Error(fmt.Errorf("open Postgres store %s: %w", redactDSN(cfg.Store.DSN), err))
		}
		return st, nil
	default:
		return nil, fmt.Errorf("store.driver %q: want sqlite or postgres", cfg.Store.Driver)
	}
}

// openSQLite opens the SQLite store at dsn with its files private to the
// service user: a missing directory is created 0700, a missing database
// file is created 0600 before SQLite opens it (SQLite then gives its -wal
// and -shm files the database file's mode), and the database and any
// -wal/-shm files are chmod 0600 once open, which also tightens a file an
// earlier version created 0644. An existing directory's mode is left
// alone: it may be shared on purpose.
func openSQLite(ctx context.Context, dsn string) (*sqlite.Store, error) {
	return openSQLiteWith(ctx, dsn, slog.Default())
}

func openSQLiteWith(ctx context.Context, dsn string, log *slog.Logger) (*sqlite.Store, error) {
	path := sqlitePath(dsn)
	if path != "" {
		if err := makePrivateDir(filepath.Dir(path)); err != nil {
			return nil, fmt.Errorf("open SQLite store %s: %w", redactDSN(dsn), err)
		}
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		switch {
		case err == nil:
			f.Close()
		case !errors.Is(err, fs.ErrExist):
			return nil, fmt.Errorf("open SQLite store %s: create database file: %w", redactDSN(dsn), err)
		}
	}
	st, err := sqlite.OpenWith(ctx, dsn, sqlite.Options{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("open SQLite store %s: %w", redactDSN(dsn), err)
	}
	if path == "" {
		return st, nil
	}
	// Connect once, so the files SQLite creates on open exist to chmod.
	if err := st.DB().PingContext(ctx); err != nil {
		st.Close()
		return nil, fmt.Errorf("open SQLite store %s: %w", redactDSN(dsn), err)
	}
	if err := chmodSQLiteFiles(path); err != nil {
		st.Close()
		return nil, fmt.Errorf("open SQLite store %s: %w", redactDSN(dsn), err)
	}
	return st, nil
}

// sqlitePath is the database file a SQLite dsn names, as store/sqlite
// reads it ("file:" prefix and "?…" parameters dropped), or "" for an
// in-memory database.
func sqlitePath(dsn string) string {
	path, _, _ := strings.Cut(strings.TrimPrefix(dsn, "file:"), "?")
	if path == ":memory:" {
		return ""
	}
	return path
}

// chmodSQLiteFiles makes the database file and its -wal and -shm files,
// where present, mode 0600.
func chmodSQLiteFiles(path string) error {
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("make %s private: %w", p, err)
		}
	}
	return nil
}

// makePrivateDir creates dir (and missing parents) mode 0700 when it does
// not exist: it will hold the database and the admin token. An existing
// directory is left as it is.
func makePrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create directory %s: %w", dir, err)
	}
	return nil
}

// redactDSN masks the credentials of a DSN (user:pass@, ?password=,
// ?sslpassword=, keyword password=…) so it can be logged and printed.
func redactDSN(dsn string) string { return redact.DSN(dsn) }
