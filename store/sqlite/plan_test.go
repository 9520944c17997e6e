package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/store/sqlite"
	"github.com/opsgate/opsgate/store/sqlstore"
)

// TestClaimPlansUsePartialIndexes: SQLite plans RunClaim and OutboxClaim
// over the indexes of claimable rows only (migration 0016), so a claim
// does not walk finished runs or sent messages.
func TestClaimPlansUsePartialIndexes(t *testing.T) {
	t.Parallel()
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
	defer db.Close()
	runs, outbox := sqlstore.ClaimStatements(sqlstore.SQLiteDialect())
	for _, c := range []struct {
		name, stmt string
		args       []any
		want       []string
	}{
		{"runs", runs, []any{"running", "o", 1, 1, 1, 16}, []string{"runs_claimable", "runs_thread_active"}},
		{"outbox", outbox, []any{"o", 1, "slack", 1, "o", 1, 16}, []string{"outbox_pending", "outbox_thread_pending"}},
	} {
		rows, err := db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+c.stmt, c.args...)
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
				t.Errorf("%s claim plan does not use %s:\n%s", c.name, idx, plan.String())
			}
		}
	}
}
