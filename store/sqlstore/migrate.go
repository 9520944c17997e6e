package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Migration is one versioned schema change, read from a file named
// NNNN_description.sql.
type Migration struct {
	Version int64
	Name    string
	SQL     string
}

// ReadMigrations loads every *.sql file of dir in fsys, ordered by
// version. Versions must be unique and positive.
func ReadMigrations(fsys fs.FS, dir string) ([]Migration, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.sql"))
	if err != nil {
		return nil, fmt.Errorf("store: read migrations: %w", err)
	}
	var out []Migration
	seen := map[int64]string{}
	for _, name := range names {
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.ParseInt(num, 10, 64)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("store: migration %s: name must be NNNN_description.sql", base)
		}
		if prev, dup := seen[v]; dup {
			return nil, fmt.Errorf("store: migrations %s and %s share version %d", prev, base, v)
		}
		seen[v] = base
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("store: migration %s: %w", base, err)
		}
		out = append(out, Migration{Version: v, Name: base, SQL: string(b)})
	}
	slices.SortFunc(out, func(a, b Migration) int { return int(a.Version - b.Version) })
	return out, nil
}

// Migrate applies, on conn, every migration not yet recorded in
// schema_migrations, in version order, each in its own transaction
// together with its record, so a failure leaves the schema at the last
// good version. The caller serializes concurrent migrators (Postgres holds
// an advisory lock on conn). It returns the versions it applied.
func Migrate(ctx context.Context, conn *sql.Conn, d Dialect, migrations []Migration) ([]int64, error) {
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)`); err != nil {
		return nil, fmt.Errorf("store: migrate: create schema_migrations: %w", err)
	}
	rows, err := conn.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return nil, fmt.Errorf("store: migrate: read versions: %w", err)
	}
	done := map[int64]bool{}
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: migrate: read versions: %w", err)
		}
		done[v] = true
	}
	if err := closeRows(rows); err != nil {
		return nil, fmt.Errorf("store: migrate: read versions: %w", err)
	}
	var applied []int64
	for _, m := range migrations {
		if done[m.Version] {
			continue
		}
		if err := applyMigration(ctx, conn, d, m); err != nil {
			return applied, err
		}
		applied = append(applied, m.Version)
	}
	return applied, nil
}

func applyMigration(ctx context.Context, conn *sql.Conn, d Dialect, m Migration) error {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: migration %s: begin: %w", m.Name, err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return fmt.Errorf("store: migration %s: %w", m.Name, err)
	}
	if _, err := tx.ExecContext(ctx, d.Rebind(`INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`),
		m.Version, time.Now().UnixMicro()); err != nil {
		return fmt.Errorf("store: migration %s: record: %w", m.Name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: migration %s: commit: %w", m.Name, err)
	}
	return nil
}
