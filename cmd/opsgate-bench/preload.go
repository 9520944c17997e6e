package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx" for --preload on Postgres
	_ "modernc.org/sqlite"             // registers "sqlite" for --preload on SQLite
)

// preloadOptions say what `opsgate-bench preload` writes into a migrated
// store before the server starts: finished runs with what a finished run
// leaves behind, and runs waiting on pending approvals.
type preloadOptions struct {
	driver, dsn string
	finished    int
	pending     int
}

// preload fills the store straight with SQL (one set-based INSERT per
// table, in batches), so a million runs take seconds, not a million API
// calls. Each finished run has its event, one succeeded step, two run
// events and one sent reply; each pending approval has its run (waiting
// for approval, in its own thread), the approval (expiring in 30 days) and
// its sent card. Ids start with "pre-", threads are console:pre-… .
func preload(ctx context.Context, o preloadOptions, stdout io.Writer) error {
	name := map[string]string{"postgres": "pgx", "sqlite": "sqlite"}[o.driver]
	if name == "" {
		return fmt.Errorf("--driver %q: want postgres or sqlite", o.driver)
	}
	if o.finished < 0 || o.pending < 0 || o.finished > 10_000_000 || o.pending > 1_000_000 {
		return errors.New("--finished ≤ 1e7 and --pending ≤ 1e6, both ≥ 0")
	}
	db, err := sql.Open(name, o.dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, c := range []struct {
		prefix string
		want   int
	}{{"pre-r-%", o.finished}, {"pre-w-%", o.pending}} {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM runs WHERE id LIKE '`+c.prefix+`'`).Scan(&n); err != nil {
			return fmt.Errorf("read the store (migrate it first: opsgate migrate): %w", err)
		}
		if n > 0 && c.want > 0 {
			return fmt.Errorf("the store already holds %d preloaded runs like %s", n, c.prefix)
		}
	}
	start := time.Now()
	now := time.Now().UnixMicro()
	// Numbers come from a recursive CTE (both backends); the placeholder
	// style differs, and both name one parameter that a statement uses
	// several times.
	ph := func(i int) string {
		if o.driver == "postgres" {
			return fmt.Sprintf("$%d", i)
		}
		return fmt.Sprintf("?%d", i) // numbered: used several times

	}
	series := func(from, to int) string {
		return fmt.Sprintf(`WITH RECURSIVE g(x) AS (SELECT %d UNION ALL SELECT x + 1 FROM g WHERE x < %d) `, from, to)
	}
	const batch = 50_000
	run := func(total int, stmts []string) error {
		for from := 1; from <= total; from += batch {
			to := min(from+batch-1, total)
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			for _, s := range stmts {
				var args []any
				if strings.Contains(s, ph(1)) {
					args = append(args, now)
				}
				if _, err := tx.ExecContext(ctx, series(from, to)+s, args...); err != nil {
					_ = tx.Rollback()
					return fmt.Errorf("preload: %w\n%s", err, s)
				}
			}
			if err := tx.Commit(); err != nil {
				return err
			}
		}
		return nil
	}
	t := ph(1)
	finished := []string{
		`INSERT INTO events (channel, event_id, run_id, actor, thread, received_at, text)
			SELECT 'console', 'pre-ev-' || x, 'pre-r-' || x, 'console:bench', 'console:pre-' || x, ` + t + ` - 86400000000 + x, 'ping' FROM g`,
		`INSERT INTO runs (id, flow, thread, requester, status, args, step_index, event_channel, event_id, created_at, updated_at)
			SELECT 'pre-r-' || x, 'ping', 'console:pre-' || x, 'console:bench', 'succeeded', '{}', 1, 'console', 'pre-ev-' || x,
			` + t + ` - 86400000000 + x, ` + t + ` - 86400000000 + x FROM g`,
		`INSERT INTO steps (run_id, idx, tool, status, args, output, started_at, finished_at)
			SELECT 'pre-r-' || x, 0, 'bench_ping', 'succeeded', '{}', 'ok', ` + t + ` - 86400000000 + x, ` + t + ` - 86400000000 + x FROM g`,
		`INSERT INTO run_events (run_id, type, data, at)
			SELECT 'pre-r-' || x, 'run.queued', '{}', ` + t + ` - 86400000000 + x FROM g`,
		`INSERT INTO run_events (run_id, type, data, at)
			SELECT 'pre-r-' || x, 'run.finished', '{}', ` + t + ` - 86400000000 + x FROM g`,
		`INSERT INTO outbox (id, channel, thread, kind, text, run_id, status, next_attempt_at, chunks_sent, refs, created_at, sent_at)
			SELECT 'pre-o-' || x, 'console', 'console:pre-' || x, 'reply', 'ok', 'pre-r-' || x, 'sent', ` + t + ` - 86400000000 + x, 1, '[]',
			` + t + ` - 86400000000 + x, ` + t + ` - 86400000000 + x FROM g`,
	}
	if err := run(o.finished, finished); err != nil {
		return err
	}
	pending := []string{
		`INSERT INTO runs (id, flow, thread, requester, status, args, step_index, created_at, updated_at)
			SELECT 'pre-w-' || x, 'bench', 'console:pre-w-' || x, 'console:bench', 'waiting_approval', '{}', 0, ` + t + `, ` + t + ` FROM g`,
		`INSERT INTO steps (run_id, idx, tool, status, args, approval_id)
			SELECT 'pre-w-' || x, 0, 'bench_ask', 'waiting_approval', '{}', 'pre-a-' || x FROM g`,
		`INSERT INTO approvals (id, run_id, step_index, thread, requester, tool, destructive, risk, proposed_args, approved_args,
			executed_args, status, approvers, eligible, quorum, rule, decisions, created_at, expires_at)
			SELECT 'pre-a-' || x, 'pre-w-' || x, 0, 'console:pre-w-' || x, 'console:bench', 'bench_ask', false, 'high_impact', '{}', 'null',
			'null', 'pending', '["group:bench"]', '["console:bench"]', 1, 1, '[]', ` + t + `, ` + t + ` + 2592000000000 FROM g`,
		`INSERT INTO outbox (id, channel, thread, kind, text, approval_id, run_id, status, next_attempt_at, chunks_sent, refs, created_at, sent_at)
			SELECT 'pre-c-' || x, 'console', 'console:pre-w-' || x, 'card', '', 'pre-a-' || x, 'pre-w-' || x, 'sent', ` + t + `, 1, '[]', ` + t + `, ` + t + ` FROM g`,
	}
	if err := run(o.pending, pending); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `ANALYZE`); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "preload:   %d finished runs, %d pending approvals written in %.1fs\n", o.finished, o.pending, time.Since(start).Seconds())
	return nil
}

// runPreload is `opsgate-bench preload`.
func runPreload(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o preloadOptions
	fs := flag.NewFlagSet("opsgate-bench preload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.driver, "driver", "sqlite", "store driver: sqlite | postgres")
	fs.StringVar(&o.dsn, "dsn", "", "store DSN (the server's store.dsn), already migrated (opsgate migrate)")
	fs.IntVar(&o.finished, "finished", 1_000_000, "finished runs to write")
	fs.IntVar(&o.pending, "pending", 100_000, "runs waiting on a pending approval to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.dsn == "" || fs.NArg() > 0 {
		return errors.New("preload: --dsn is required and takes no arguments")
	}
	return preload(ctx, o, stdout)
}
