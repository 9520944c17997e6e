package sqlstore

import (
	"fmt"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/core"
)

// TestQualifiedRunColumns: the joined form names every run column, each
// prefixed, in the same order (RunGet scans them positionally).
func TestQualifiedRunColumns(t *testing.T) {
	plain := strings.Split(strings.Join(strings.Fields(runColumns), " "), ", ")
	q := strings.Split(qualifiedRunColumns, ", ")
	if len(q) != len(plain) || len(plain) != 18 {
		t.Fatalf("qualified %d columns, plain %d; want 18 each: %q", len(q), len(plain), qualifiedRunColumns)
	}
	for i := range plain {
		if q[i] != "r."+plain[i] {
			t.Errorf("column %d = %q, want %q", i, q[i], "r."+plain[i])
		}
	}
}

// TestClaimLiterals: the claim statements spell statuses as literals (for
// the partial indexes of migration 0016); they must be the core's.
func TestClaimLiterals(t *testing.T) {
	for _, st := range []string{string(core.RunQueued), string(core.RunRunning), string(core.RunWaitingApproval),
		string(core.RunWaitingInput)} {
		if !strings.Contains(runClaimSQL(SQLiteDialect()), "'"+st+"'") {
			t.Errorf("run claim lacks the literal %q", st)
		}
	}
	if !strings.Contains(outboxClaimSQL(SQLiteDialect()), "'"+string(core.DeliveryPending)+"'") {
		t.Errorf("outbox claim lacks the literal %q", core.DeliveryPending)
	}
}

// TestStatusLiterals: the status filters of RunList, OutboxList and
// Overview spell the partial indexes' predicates with literals (migrations
// 0016 and 0019); they must be the core's statuses, and each status must
// be listed with the predicate of the index that holds it.
func TestStatusLiterals(t *testing.T) {
	claimable := fmt.Sprintf("status IN ('%s', '%s')", core.RunQueued, core.RunRunning)
	other := fmt.Sprintf("status NOT IN ('%s', '%s', '%s')", core.RunQueued, core.RunRunning, core.RunSucceeded)
	for st, want := range map[core.RunStatus]string{
		core.RunQueued: claimable, core.RunRunning: claimable,
		core.RunWaitingApproval: other, core.RunWaitingInput: other, core.RunFailed: other,
		core.RunRejected: other, core.RunCancelled: other, core.RunInterrupted: other,
		"some_new_status": other,
		core.RunSucceeded: "",
	} {
		got := runStatusWhere(st)
		if want == "" && strings.Contains(got, "IN (") || want != "" && !strings.Contains(got, want) {
			t.Errorf("run status filter for %s = %q, want it to hold %q", st, got, want)
		}
	}
	dead, pending := "'"+string(core.DeliveryDead)+"'", "'"+string(core.DeliveryPending)+"'"
	for st, lit := range map[core.DeliveryStatus]string{core.DeliveryPending: pending, core.DeliveryDead: dead} {
		if !strings.Contains(outboxStatusWhere(st), "status = "+lit) {
			t.Errorf("outbox status filter for %s = %q, want it to hold status = %s", st, outboxStatusWhere(st), lit)
		}
	}
	if strings.Contains(outboxStatusWhere(core.DeliverySent), "'") {
		t.Errorf("outbox status filter for sent = %q, want the parameter alone", outboxStatusWhere(core.DeliverySent))
	}
	for _, c := range []struct{ stmt, status string }{
		{overviewDeadSQL, dead}, {overviewChannelDeadSQL(SQLiteDialect()), dead}, {overviewBacklogSQL, pending},
	} {
		if !strings.Contains(c.stmt, "status = "+c.status) {
			t.Errorf("overview statement lacks the literal %s: %s", c.status, c.stmt)
		}
	}
}
