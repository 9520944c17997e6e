package postgres_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/opsgate/opsgate/store/pgtest"
	"github.com/opsgate/opsgate/store/sqlstore"
)

// TestOutboxClaimPlanWithStaleStatistics: statistics taken while nothing
// was pending — a large store whose outbox autovacuum has not reached yet
// — must not turn the claim's "older pending message in this thread?"
// into a scan of every pending row. It did when an index over all unsent
// rows existed (4 ms a claim at 1.1 M rows), and again, once only
// outbox_thread_pending could answer it, as a join whose inner side read
// that index whole for every candidate. The claim must read
// outbox_pending, and look each candidate's thread up in
// outbox_thread_pending, in the generic plan a prepared statement settles
// on.
func TestOutboxClaimPlanWithStaleStatistics(t *testing.T) {
	t.Parallel()
	db, exec := planDB(t)
	exec(`INSERT INTO outbox (id, channel, thread, kind, text, run_id, status, next_attempt_at, created_at, sent_at)
		SELECT 'sent-' || x, 'slack', 'slack:T/C' || (x % 5000), 'reply', 'ok', 'r-' || x, 'sent', x, x, x
		FROM generate_series(1, 50000) AS x`)
	exec(`ANALYZE outbox`) // nothing pending: the stale statistics
	exec(`INSERT INTO outbox (id, channel, thread, kind, text, run_id, status, next_attempt_at, created_at)
		SELECT 'pend-' || x, 'slack', 'slack:T/P' || (x % 50), 'reply', 'ok', 'r-' || x, 'pending', 0, x
		FROM generate_series(1, 2000) AS x`)

	_, claim := sqlstore.ClaimStatements(sqlstore.PostgresDialect())
	conn := genericPlans(t, db)
	plan := explain(t, conn, "claim", claim, `EXPLAIN EXECUTE claim('o', 1, 'slack', 1, 1, 16)`)
	for _, want := range []string{"outbox_pending", "outbox_thread_pending", "Index Cond: ((thread = m.thread)"} {
		if !strings.Contains(plan, want) {
			t.Errorf("claim plan lacks %q (the thread check must look up the candidate's thread):\n%s", want, plan)
		}
	}
}

// TestEscalationPlansUsePartialIndexes: with 10,000 pending approvals
// climbing ladders among 100,000, the sweeper's tick reads
// only the range of approvals_escalation_due that is due, and the /metrics
// backlog reads the pending rows through an index (approvals_pending_risk,
// or approvals_expiry's status range), never the decided ones, in the
// generic plans a prepared statement settles on.
func TestEscalationPlansUsePartialIndexes(t *testing.T) {
	t.Parallel()
	db, exec := planDB(t)
	exec(`INSERT INTO approvals (id, run_id, step_index, thread, requester, tool, destructive, risk,
		proposed_args, approved_args, executed_args, status, approvers, eligible, quorum, rule, decisions, created_at, expires_at,
		escalation_due)
		SELECT 'a-' || x, 'r-' || x, 0, 'slack:T/C' || x, 'slack:U1', 'deploy', false,
			CASE WHEN x % 3 = 0 THEN 'high_impact' ELSE 'external' END, '{}', '{}', '{}',
			CASE WHEN x <= 90000 THEN 'approved' ELSE 'pending' END, '[]', '[]', 1, 0, '[]', x, x + 7200000000,
			CASE WHEN x <= 90000 THEN NULL ELSE x + 600000000 END
		FROM generate_series(1, 100000) AS x`)
	exec(`VACUUM ANALYZE approvals`)
	conn := genericPlans(t, db)
	due, stats := sqlstore.EscalationStatements(sqlstore.PostgresDialect())
	for _, c := range []struct{ name, stmt, explain, want string }{
		{"due", due, `EXPLAIN EXECUTE due(1, 100)`, "approvals_escalation_due"},
		{"stats", stats, `EXPLAIN EXECUTE stats`, "Index"},
	} {
		plan := explain(t, conn, c.name, c.stmt, c.explain)
		if !strings.Contains(plan, c.want) || strings.Contains(plan, "Seq Scan") {
			t.Errorf("%s plan does not read through %s:\n%s", c.name, c.want, plan)
		}
	}
}

// TestRunClaimPlanSkipsExecutingRuns: the run claim reads queued runs from
// runs_queued and lapsed leases from runs_lease (migration 0031), never
// runs_claimable, whose queue order put every executing run before the
// first queued one (issue 31), in the generic plan a prepared statement
// settles on, with statistics taken while nothing was queued.
func TestRunClaimPlanSkipsExecutingRuns(t *testing.T) {
	t.Parallel()
	db, exec := planDB(t)
	exec(`INSERT INTO runs (id, flow, thread, requester, status, args, owner, lease_until, created_at, updated_at)
		SELECT 'r-' || x, 'f', 'slack:T/C' || x, 'slack:U1', CASE WHEN x <= 20000 THEN 'succeeded' ELSE 'running' END, '{}',
			CASE WHEN x <= 20000 THEN NULL ELSE 'o' END, CASE WHEN x <= 20000 THEN NULL ELSE 9000000000 END, x, x
		FROM generate_series(1, 20100) AS x`)
	exec(`ANALYZE runs`) // nothing queued: the stale statistics
	exec(`INSERT INTO runs (id, flow, thread, requester, status, args, created_at, updated_at)
		SELECT 'q-' || x, 'f', 'slack:T/Q' || x, 'slack:U1', 'queued', '{}', x, x FROM generate_series(1, 500) AS x`)

	claim, _ := sqlstore.ClaimStatements(sqlstore.PostgresDialect())
	plan := explain(t, genericPlans(t, db), "claim", claim, `EXPLAIN EXECUTE claim(16, 1, 16, 16, 'running', 'o', 1, 1)`)
	for _, want := range []string{"runs_queued", "runs_lease", "runs_thread_active"} {
		if !strings.Contains(plan, want) {
			t.Errorf("claim plan lacks %q:\n%s", want, plan)
		}
	}
	if strings.Contains(plan, "runs_claimable") || strings.Contains(plan, "Seq Scan on runs") {
		t.Errorf("claim plan walks the executing or finished runs:\n%s", plan)
	}
}

// planDB opens a migrated database of its own for a plan test, with exec
// failing the test on an error.
func planDB(t *testing.T) (*sql.DB, func(q string)) {
	t.Helper()
	dsn := pgtest.DSN(t)
	open(t, dsn) // migrated
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, func(q string) {
		t.Helper()
		if _, err := db.ExecContext(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// genericPlans is a connection whose prepared statements take the generic
// plan at once — the plan a prepared statement settles on after five runs.
func genericPlans(t *testing.T, db *sql.DB) *sql.Conn {
	t.Helper()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.ExecContext(context.Background(), `SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	return conn
}

// explain prepares stmt as name on conn and returns the plan of explainSQL.
func explain(t *testing.T, conn *sql.Conn, name, stmt, explainSQL string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := conn.ExecContext(ctx, `PREPARE `+name+` AS `+stmt); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.QueryContext(ctx, explainSQL)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan.WriteString(line + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan.String()
}
