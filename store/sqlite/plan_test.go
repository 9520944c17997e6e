package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/store/sqlite"
	"github.com/opsgate/opsgate/store/sqlstore"
)

// TestClaimPlansUsePartialIndexes: SQLite plans RunClaim and OutboxClaim
// over the indexes of claimable rows only (migrations 0016 and 0031), so
// a claim does not walk finished runs or sent messages, nor, for runs, the
// ones executing.
func TestClaimPlansUsePartialIndexes(t *testing.T) {
	t.Parallel()
	db := migratedDB(t)
	runs, outbox := sqlstore.ClaimStatements(sqlstore.SQLiteDialect())
	checkPlans(t, db, []planCase{
		{"runs", runs, []any{16, 1, 16, 16, "running", "o", 1, 1}, []string{"runs_queued", "runs_lease", "runs_thread_active"}},
		{"outbox", outbox, []any{"o", 1, "slack", 1, 1, 16}, []string{"outbox_pending", "outbox_thread_pending"}},
	})
}

// TestReadPlansUsePartialIndexes: the reads that filter by a status list
// and count from the partial indexes (migrations 0016 and 0019), never by
// walking the finished runs or the sent messages.
func TestReadPlansUsePartialIndexes(t *testing.T) {
	t.Parallel()
	db := migratedDB(t)
	d := sqlstore.SQLiteDialect()
	var cases []planCase
	for st, idx := range map[core.RunStatus]string{
		core.RunWaitingInput: "runs_status", core.RunWaitingApproval: "runs_status", core.RunFailed: "runs_status",
		core.RunQueued: "runs_queued", core.RunRunning: "runs_claimable",
	} {
		runs, _ := sqlstore.ListStatements(d, st, core.DeliverySent)
		cases = append(cases, planCase{"run list " + string(st), runs, []any{string(st), 101}, []string{idx}})
	}
	for st, idx := range map[core.DeliveryStatus]string{core.DeliveryPending: "outbox_thread_pending", core.DeliveryDead: "outbox_dead"} {
		_, outbox := sqlstore.ListStatements(d, core.RunSucceeded, st)
		cases = append(cases, planCase{"outbox list " + string(st), outbox, []any{string(st), 101}, []string{idx}})
	}
	dead, backlog, channelDead := sqlstore.OverviewOutboxStatements(d)
	cases = append(cases,
		planCase{"overview dead letters", dead, nil, []string{"outbox_dead"}},
		planCase{"overview backlog", backlog, []any{"slack"}, []string{"outbox_pending"}},
		planCase{"overview channel dead letters", channelDead, []any{"slack"}, []string{"outbox_dead"}})
	checkPlans(t, db, cases)
}

// TestEscalationPlansUsePartialIndexes: the sweeper's tick and the
// /metrics backlog read migration 0029's partial indexes, never every
// pending approval through approvals_expiry.
func TestEscalationPlansUsePartialIndexes(t *testing.T) {
	t.Parallel()
	db := migratedDB(t)
	due, stats := sqlstore.EscalationStatements(sqlstore.SQLiteDialect())
	checkPlans(t, db, []planCase{
		{"escalation due", due, []any{1, 100}, []string{"approvals_escalation_due"}},
		{"pending stats", stats, nil, []string{"COVERING INDEX approvals_pending_risk"}},
	})
}

type planCase struct {
	name, stmt string
	args       []any
	want       []string
}

// migratedDB is a migrated store's database, opened without the store.
func migratedDB(t *testing.T) *sql.DB {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "plan.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// checkPlans fails unless each case's query plan names every wanted index.
func checkPlans(t *testing.T, db *sql.DB, cases []planCase) {
	t.Helper()
	for _, c := range cases {
		rows, err := db.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+c.stmt, c.args...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var plan strings.Builder
		for rows.Next() {
			var id, parent, notused int
			var detail string
			if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
				t.Fatal(err)
			}
			plan.WriteString(detail + "\n")
		}
		rows.Close()
		for _, idx := range c.want {
			if !strings.Contains(plan.String(), idx) {
				t.Errorf("%s plan does not use %s:\n%s", c.name, idx, plan.String())
			}
		}
	}
}
