package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestMain(m *testing.M) { Main(m) }

// connect opens a connection to dsn that is closed at the end of the test.
func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func currentDatabase(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	var name string
	if err := conn.QueryRow(t.Context(), "SELECT current_database()").Scan(&name); err != nil {
		t.Fatalf("current_database: %v", err)
	}
	return name
}

func userTables(t *testing.T, conn *pgx.Conn) int {
	t.Helper()
	var n int
	err := conn.QueryRow(t.Context(),
		`SELECT count(*) FROM pg_catalog.pg_class c
		 JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		 WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'`).Scan(&n)
	if err != nil {
		t.Fatalf("count relations: %v", err)
	}
	return n
}

func TestDSN(t *testing.T) {
	t.Run("GivesTwoDistinctEmptyDatabases", func(t *testing.T) {
		a := connect(t, DSN(t))
		b := connect(t, DSN(t))
		nameA, nameB := currentDatabase(t, a), currentDatabase(t, b)
		if nameA == nameB {
			t.Fatalf("both DSNs point at database %q", nameA)
		}
		for _, name := range []string{nameA, nameB} {
			if !strings.HasPrefix(name, "pgtest_") {
				t.Errorf("database %q is not one pgtest made", name)
			}
		}
		if n := userTables(t, a); n != 0 {
			t.Errorf("fresh database %s has %d relations, want 0", nameA, n)
		}
		if n := userTables(t, b); n != 0 {
			t.Errorf("fresh database %s has %d relations, want 0", nameB, n)
		}

		if _, err := a.Exec(t.Context(), "CREATE TABLE marker (id int); INSERT INTO marker VALUES (1)"); err != nil {
			t.Fatalf("create table: %v", err)
		}
		if n := userTables(t, a); n != 1 {
			t.Errorf("after CREATE TABLE, %s has %d relations, want 1", nameA, n)
		}
		if n := userTables(t, b); n != 0 {
			t.Errorf("table created in %s is visible in %s (%d relations)", nameA, nameB, n)
		}
	})

	t.Run("DropsDatabaseAtCleanupEvenWithOpenConnection", func(t *testing.T) {
		var dsn string
		t.Run("inner", func(t *testing.T) {
			dsn = DSN(t)
			conn, err := pgx.Connect(t.Context(), dsn)
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			// Deliberately leaked: the drop must still succeed.
			_ = conn
		})
		if t.Failed() || t.Skipped() || dsn == "" {
			return
		}
		_, err := pgx.Connect(t.Context(), dsn)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "3D000" { // invalid_catalog_name
			t.Fatalf("connecting after cleanup: got %v, want database does not exist (3D000)", err)
		}
	})

	t.Run("ConcurrentCallersGetDistinctDatabases", func(t *testing.T) {
		const n = 8
		var (
			mu    sync.Mutex
			names = map[string]bool{}
		)
		for i := range n {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				name := currentDatabase(t, connect(t, DSN(t)))
				mu.Lock()
				defer mu.Unlock()
				if names[name] {
					t.Errorf("database %q handed out twice", name)
				}
				names[name] = true
			})
		}
	})
}

// TestDSNFromTemplate: each database DSNFrom hands out is a copy of the
// template as its init left it, filled once, and the copies are
// independent of each other.
func TestDSNFromTemplate(t *testing.T) {
	fills := 0
	tmpl := NewTemplate(func(ctx context.Context, dsn string) error {
		fills++
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(ctx, "CREATE TABLE marker (id int); INSERT INTO marker VALUES (1)")
		return err
	})
	a := connect(t, DSNFrom(t, tmpl))
	b := connect(t, DSNFrom(t, tmpl))
	if nameA, nameB := currentDatabase(t, a), currentDatabase(t, b); nameA == nameB {
		t.Fatalf("both DSNs point at database %q", nameA)
	}
	if fills != 1 {
		t.Fatalf("template filled %d times, want once", fills)
	}
	if _, err := a.Exec(t.Context(), "INSERT INTO marker VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	for db, want := range map[*pgx.Conn]int{a: 2, b: 1} {
		var n int
		if err := db.QueryRow(t.Context(), "SELECT count(*) FROM marker").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Errorf("%s has %d marker rows, want %d", currentDatabase(t, db), n, want)
		}
	}
}

// TestDSNFromEnvironment drives path (a): an admin DSN in the environment.
// It reuses this process's server (the environment's or the throwaway one)
// so it runs wherever the other tests run. Not parallel: it sets env.
func TestDSNFromEnvironment(t *testing.T) {
	admin, err := adminDSN()
	if err != nil {
		t.Skipf("no server: %v", err) // TestDSN reports the reason loudly (or fails under CI)
	}
	t.Setenv(EnvDSN, admin)
	conn := connect(t, DSN(t))
	if got := currentDatabase(t, conn); !strings.HasPrefix(got, "pgtest_testdsnfromenvironment_") {
		t.Fatalf("database %q, want a fresh pgtest database named after the test", got)
	}
}

func TestUnavailable(t *testing.T) {
	env := func(skip, require string) func(string) string {
		return func(k string) string {
			switch k {
			case EnvSkip:
				return skip
			case EnvRequire:
				return require
			}
			return ""
		}
	}
	for _, tc := range []struct {
		skip, require string
		wantSkip      bool
	}{
		{"", "", false}, {"0", "", false}, {"1", "", true}, {"1", "1", false}, {"", "1", false},
	} {
		t.Run("skip="+tc.skip+",require="+tc.require, func(t *testing.T) {
			rec := &recorder{TB: t}
			done := make(chan struct{})
			// Skip and Fatal end the goroutine with runtime.Goexit, as in a real test.
			go func() { defer close(done); unavailable(rec, env(tc.skip, tc.require), "no binaries") }()
			<-done
			if rec.skipped != tc.wantSkip || rec.fatal == tc.wantSkip {
				t.Fatalf("skipped=%v fatal=%v, want skipped=%v", rec.skipped, rec.fatal, tc.wantSkip)
			}
			if !strings.Contains(rec.msg, "no binaries") {
				t.Errorf("message %q does not carry the reason", rec.msg)
			}
			if rec.fatal && tc.require == "" && !strings.Contains(rec.msg, EnvSkip+"=1") {
				t.Errorf("failure %q does not say how to skip on purpose", rec.msg)
			}
		})
	}
	state.skipped.Store(0) // the recorder's skips were not real ones
}

// recorder captures Skip/Fatal instead of ending the real test.
type recorder struct {
	testing.TB
	skipped, fatal bool
	msg            string
}

func (r *recorder) Helper() {}
func (r *recorder) Skipf(format string, args ...any) {
	r.skipped, r.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal, r.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestWithDatabase(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ admin, want string }{
		{"postgres://u:p@127.0.0.1:5432/postgres?sslmode=disable", "postgres://u:p@127.0.0.1:5432/db1?sslmode=disable"},
		{"postgresql://u@h:1", "postgresql://u@h:1/db1"},
		{"postgres://u@h/postgres?dbname=other&sslmode=disable", "postgres://u@h/db1?sslmode=disable"},
		{"host=127.0.0.1 port=5 user=u dbname=postgres ", "host=127.0.0.1 port=5 user=u dbname=postgres dbname=db1"},
	} {
		got, err := withDatabase(tc.admin, "db1")
		if err != nil {
			t.Fatalf("withDatabase(%q): %v", tc.admin, err)
		}
		if got != tc.want {
			t.Errorf("withDatabase(%q) = %q, want %q", tc.admin, got, tc.want)
		}
		// The driver must read the new database from it, whatever the form.
		cfg, err := pgconn.ParseConfig(got)
		if err != nil {
			t.Fatalf("parse %q: %v", got, err)
		}
		if cfg.Database != "db1" {
			t.Errorf("pgx reads database %q from %q, want db1", cfg.Database, got)
		}
	}
}

func TestDatabaseName(t *testing.T) {
	t.Parallel()
	a, err := databaseName("TestStore/Runs/Claim-ALL_the things, really long name indeed")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := databaseName("TestStore/Runs/Claim-ALL_the things, really long name indeed")
	if a == b {
		t.Errorf("two calls gave the same name %q", a)
	}
	if len(a) > 63 {
		t.Errorf("name %q is %d bytes, over Postgres's 63", a, len(a))
	}
	if !strings.HasPrefix(a, "pgtest_teststore_runs_claim_all_") {
		t.Errorf("name %q does not start with the sanitized test name", a)
	}
	for _, r := range a {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			t.Fatalf("name %q has character %q that needs quoting", a, r)
		}
	}
}

func TestFindBinaries(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for _, v := range []string{"9.6", "16", "15", "not-a-version"} {
		dir := filepath.Join(root, v, "bin")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, b := range []string{"initdb", "postgres"} {
			if err := os.WriteFile(filepath.Join(dir, b), []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	// 17 is incomplete (no postgres) and must not be chosen.
	if err := os.MkdirAll(filepath.Join(root, "17", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "17", "bin", "initdb"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	noPath := func(string) (string, error) { return "", errors.New("not in PATH") }

	got, err := findBinaries(root, noPath)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "16", "bin", "initdb"); got.initdb != want {
		t.Errorf("initdb = %q, want newest complete version %q", got.initdb, want)
	}

	if _, err := findBinaries(filepath.Join(root, "missing"), noPath); err == nil {
		t.Error("no binaries anywhere: want an error")
	}
	fromPath, err := findBinaries(filepath.Join(root, "missing"), func(name string) (string, error) {
		return "/opt/pg/bin/" + name, nil
	})
	if err != nil || fromPath.postgres != "/opt/pg/bin/postgres" {
		t.Errorf("PATH fallback = %+v, %v", fromPath, err)
	}
}

// BenchmarkCreateDropDatabase measures what one fresh database costs a test.
func BenchmarkCreateDropDatabase(b *testing.B) {
	admin, err := adminDSN()
	if err != nil {
		b.Skipf("no server: %v", err)
	}
	for b.Loop() {
		name, err := databaseName(b.Name())
		if err != nil {
			b.Fatal(err)
		}
		if err := createDatabase(admin, name, ""); err != nil {
			b.Fatal(err)
		}
		if err := dropDatabase(admin, name); err != nil {
			b.Fatal(err)
		}
	}
}

// TestClusterRestartKeepsData: a private cluster stops (connections break,
// new ones are refused) and starts again on the same port with its data.
func TestClusterRestartKeepsData(t *testing.T) {
	t.Parallel()
	cl := StartCluster(t)
	dsn := cl.DSN()
	conn := connect(t, dsn)
	if _, err := conn.Exec(t.Context(), "CREATE TABLE kept (id int); INSERT INTO kept VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	if err := cl.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), "SELECT 1"); err == nil {
		t.Fatal("a connection survived the stop")
	}
	if c, err := pgx.Connect(t.Context(), dsn); err == nil {
		c.Close(context.Background())
		t.Fatal("a stopped cluster accepted a connection")
	}
	if err := cl.Stop(); err == nil {
		t.Fatal("a second Stop succeeded")
	}
	if err := cl.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if cl.DSN() != dsn {
		t.Fatalf("DSN changed across the restart: %s, then %s", dsn, cl.DSN())
	}
	var v int
	if err := connect(t, dsn).QueryRow(t.Context(), "SELECT id FROM kept").Scan(&v); err != nil || v != 42 {
		t.Fatalf("after the restart: %d, %v; want the row written before", v, err)
	}
}
