// Package pgtest gives each test its own fresh, empty Postgres database, so
// Postgres-backed tests can run in parallel without sharing rows and without
// anyone setting up a server by hand.
//
// Use it from a test package like this:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		t.Parallel()
//		pool, err := pgxpool.New(ctx, pgtest.DSN(t)) // fresh empty database, dropped at t.Cleanup
//		...
//		t.Cleanup(pool.Close)
//	}
//
// Where the server comes from, in order:
//
//  1. $OPSGATE_TEST_POSTGRES_DSN, an admin DSN (a role allowed to CREATE
//     DATABASE) of a running server. CI (.ci/run) sets it.
//  2. Otherwise a throwaway cluster that pgtest starts once per test process
//     from the initdb/postgres binaries in /usr/lib/postgresql/*/bin (newest
//     version) or $PATH, listening only on 127.0.0.1 with a temporary data
//     and socket directory. When the tests run as root it runs the binaries
//     as the "postgres" user, because initdb refuses to run as root. Main
//     stops it and removes its files after the tests; if the test process is
//     killed, a watchdog stops the server when its stdin pipe closes.
//  3. If neither works, DSN FAILS the test, saying why and how to get a
//     server — unless $OPSGATE_SKIP_POSTGRES=1, which skips it instead (and
//     Main then prints how many it skipped). Failing is the default because
//     `go test ./...` prints nothing but "ok" for a package whose tests
//     skipped: a skip would let a machine without Postgres pass the suite
//     silently. $OPSGATE_REQUIRE_POSTGRES=1 (CI sets it) overrides the skip.
//
// DSNFrom(t, tmpl) is DSN with the database a copy of a Template, filled once
// per process (testkit.PostgresDSN: migrated once, copied per test).
//
// DSN fails the test if the package has no TestMain calling Main: without it
// a locally started cluster would outlive the test process.
//
// A test that stops or restarts the server (store faults) must never do it
// to that shared one: StartCluster gives it a private cluster of its own.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Environment variables that steer pgtest. They are the only knobs, so CI and
// developers configure the harness the same way.
const (
	// EnvDSN names the variable holding an admin DSN of a running server.
	EnvDSN = "OPSGATE_TEST_POSTGRES_DSN"
	// EnvSkip names the variable that, when "1", turns "no Postgres
	// available" from a failure into a skip: for a machine without
	// Postgres, on purpose.
	EnvSkip = "OPSGATE_SKIP_POSTGRES"
	// EnvRequire names the variable that, when "1", keeps "no Postgres
	// available" a failure even when EnvSkip is set (CI sets it).
	EnvRequire = "OPSGATE_REQUIRE_POSTGRES"
)

// opTimeout bounds every admin statement, so a wedged server fails a test
// instead of hanging it until the go test timeout.
const opTimeout = 30 * time.Second

// harness is the per-process state: whether Main is running, and the lazily
// started cluster. It is package-level because a test binary has exactly one
// TestMain and the cluster must be shared by every test in the process;
// everything in it is guarded by mu.
type harness struct {
	mu      sync.Mutex
	inMain  bool
	started bool     // a cluster start was attempted (successful or not)
	cluster *cluster // nil if not started or start failed
	err     error    // why the cluster could not start; reported to every caller
	// create serializes CREATE DATABASE/DROP DATABASE from this process so
	// concurrent parallel tests never race on the template database.
	create sync.Mutex
	// skipped counts the tests skipped for want of Postgres (EnvSkip).
	skipped atomic.Int64
	// templates are the template databases made (Template), dropped when
	// Main ends.
	templates []string
}

var state harness

// Main runs the package's tests and then stops the throwaway cluster, if one
// was started, and removes its files. Call it from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// It returns instead of calling os.Exit so its cleanup runs; the testing
// package exits with m.Run's result when TestMain returns.
func Main(m *testing.M) {
	state.mu.Lock()
	state.inMain = true
	state.mu.Unlock()

	defer func() {
		state.mu.Lock()
		templates := state.templates
		state.templates = nil
		state.mu.Unlock()
		if admin, err := adminDSN(); len(templates) > 0 && err == nil {
			for _, name := range templates {
				if err := dropDatabase(admin, name); err != nil {
					fmt.Fprintf(os.Stderr, "pgtest: drop template: %v\n", err)
				}
			}
		}
		state.mu.Lock()
		c := state.cluster
		state.cluster, state.started, state.err, state.inMain = nil, false, nil, false
		state.mu.Unlock()
		if c != nil {
			if err := c.stop(); err != nil {
				fmt.Fprintf(os.Stderr, "pgtest: stop throwaway cluster: %v\n", err)
			}
		}
		if n := state.skipped.Swap(0); n > 0 {
			fmt.Fprintf(os.Stderr, "pgtest: SKIPPED %d Postgres test(s) in this package because %s=1 and no Postgres was available\n", n, EnvSkip)
		}
	}()
	m.Run()
}

// DSN returns the DSN of a new, empty database that exists only for this
// test and is dropped (forcibly, even with connections still open) at
// t.Cleanup. It is safe to call from parallel tests. See the package doc for
// where the server comes from and when the test is skipped instead.
func DSN(t testing.TB) string {
	t.Helper()
	return newDatabase(t, nil)
}

// Template is a database filled once per test process (by the init
// NewTemplate is given) that DSNFrom copies for each test: a package whose
// every test migrates a fresh database migrates once and copies the result
// (CREATE DATABASE … TEMPLATE, a file copy in the server) instead.
type Template struct {
	init func(ctx context.Context, dsn string) error
	once sync.Once
	name string
	err  error
}

// NewTemplate returns a template filled by init on first use; init must
// close every connection it opens, since a database being copied may have
// none.
func NewTemplate(init func(ctx context.Context, dsn string) error) *Template {
	return &Template{init: init}
}

// DSNFrom is DSN with the new database a copy of tmpl's. The template is
// made on first use and dropped when Main ends.
func DSNFrom(t testing.TB, tmpl *Template) string {
	t.Helper()
	return newDatabase(t, tmpl)
}

// make creates and fills the template database once.
func (tmpl *Template) make(admin string) (string, error) {
	tmpl.once.Do(func() {
		name, err := databaseName("template")
		if err == nil {
			err = createDatabase(admin, name, "")
		}
		if err != nil {
			tmpl.err = fmt.Errorf("template: %w", err)
			return
		}
		state.mu.Lock()
		state.templates = append(state.templates, name)
		state.mu.Unlock()
		dsn, err := withDatabase(admin, name)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*opTimeout)
			err = tmpl.init(ctx, dsn)
			cancel()
		}
		if err != nil {
			tmpl.err = fmt.Errorf("template: fill %s: %w", name, err)
			return
		}
		tmpl.name = name
	})
	return tmpl.name, tmpl.err
}

// newDatabase creates the test's database, a copy of tmpl's when tmpl is
// set, drops it at t.Cleanup and returns its DSN.
func newDatabase(t testing.TB, tmpl *Template) string {
	t.Helper()
	admin, err := adminDSN()
	if err != nil {
		var u *unavailableError
		if errors.As(err, &u) {
			unavailable(t, os.Getenv, u.Error())
			return ""
		}
		t.Fatalf("pgtest: %v", err)
		return ""
	}
	from := ""
	if tmpl != nil {
		if from, err = tmpl.make(admin); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
	}
	name, err := databaseName(t.Name())
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	if err := createDatabase(admin, name, from); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		if err := dropDatabase(admin, name); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	dsn, err := withDatabase(admin, name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return dsn
}

// unavailableError means no server can be had in this environment (as
// opposed to a broken server or a misused API), which is a skip unless
// Postgres is required.
type unavailableError struct{ reason string }

func (e *unavailableError) Error() string { return e.reason }

// adminDSN returns the admin DSN to create databases with: the environment's,
// or that of the process's throwaway cluster, starting it on first use.
func adminDSN() (string, error) {
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		return dsn, nil
	}
	state.mu.Lock()
	defer state.mu.Unlock()
	if !state.inMain {
		return "", errors.New("DSN called without pgtest.Main: add `func TestMain(m *testing.M) { pgtest.Main(m) }` " +
			"to the test package, so the throwaway Postgres cluster is stopped after the tests")
	}
	if !state.started {
		state.started = true
		c, err := startCluster(context.Background())
		if err != nil {
			state.err = &unavailableError{reason: fmt.Sprintf(
				"no Postgres for this test: $%s is not set and a throwaway cluster could not be started: %v", EnvDSN, err)}
		}
		state.cluster = c
	}
	if state.err != nil {
		return "", state.err
	}
	return state.cluster.adminDSN(), nil
}

// unavailable fails t with what to do about it, or skips it when the
// environment says so (EnvSkip, not overridden by EnvRequire): a test
// command that passes while silently skipping the Postgres suites would
// prove nothing, and `go test` shows a skip only with -v.
func unavailable(t testing.TB, getenv func(string) string, reason string) {
	t.Helper()
	if getenv(EnvSkip) == "1" && getenv(EnvRequire) != "1" {
		state.skipped.Add(1)
		t.Skipf("pgtest: SKIPPING POSTGRES TEST because %s=1: %s", EnvSkip, reason)
		return
	}
	how := fmt.Sprintf("this test needs Postgres: install the server binaries (Debian: apt-get install postgresql; "+
		"a throwaway cluster is then started on a loopback port), or set %s to an admin DSN of a running server, "+
		"or set %s=1 to skip the Postgres tests on purpose", EnvDSN, EnvSkip)
	if getenv(EnvRequire) == "1" {
		how = EnvRequire + "=1 requires Postgres"
	}
	t.Fatalf("pgtest: %s (%s)", reason, how)
}

// createDatabase creates the database name: empty, or a copy of the
// database from when from is set.
func createDatabase(admin, name, from string) error {
	stmt := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	if from != "" {
		stmt += " TEMPLATE " + pgx.Identifier{from}.Sanitize()
	}
	if err := execAdmin(admin, stmt); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// dropDatabase drops name. WITH (FORCE) (Postgres 13+) ends sessions a test
// left open, so a leaked connection can neither fail the drop nor leave the
// database behind.
func dropDatabase(admin, name string) error {
	if err := execAdmin(admin, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

// execAdmin runs one statement over a short-lived admin connection. A fresh
// connection per call keeps no shared connection state between tests; the
// mutex keeps this process's CREATE/DROP DATABASE statements one at a time.
func execAdmin(admin, sql string) error {
	state.create.Lock()
	defer state.create.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return fmt.Errorf("connect admin: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	return nil
}

// databaseName makes a unique, valid database name that also says which test
// made it, so a database left behind by a killed run can be traced.
func databaseName(testName string) (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("random database name: %w", err)
	}
	var label strings.Builder
	for _, r := range strings.ToLower(testName) {
		if label.Len() >= 24 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			label.WriteRune(r)
		default:
			label.WriteByte('_')
		}
	}
	// Well under Postgres's 63-byte identifier limit: 8 + 24 + 1 + 16.
	return "pgtest_" + label.String() + "_" + hex.EncodeToString(b[:]), nil
}

// withDatabase returns admin with its database replaced by name, keeping every
// other setting (host, port, user, password, sslmode). It accepts both DSN
// forms pgx accepts: URLs and keyword/value strings.
func withDatabase(admin, name string) (string, error) {
	if strings.HasPrefix(admin, "postgres://") || strings.HasPrefix(admin, "postgresql://") {
		u, err := url.Parse(admin)
		if err != nil {
			return "", fmt.Errorf("parse %s: %w", EnvDSN, err)
		}
		u.Path = "/" + name
		u.RawPath = ""
		// A dbname query parameter would override the path; drop it.
		q := u.Query()
		if q.Has("dbname") {
			q.Del("dbname")
			u.RawQuery = q.Encode()
		}
		return u.String(), nil
	}
	// Keyword/value form: a later keyword overrides an earlier one.
	return strings.TrimSpace(admin) + " dbname=" + name, nil
}
