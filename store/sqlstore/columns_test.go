package sqlstore

import (
	"strings"
	"testing"

	"github.com/opsgate/opsgate/core"
)

// TestQualifiedRunColumns: the joined form names every run column, each
// prefixed, in the same order (RunGet scans them positionally).
func TestQualifiedRunColumns(t *testing.T) {
	plain := strings.Split(strings.Join(strings.Fields(runColumns), " "), ", ")
	q := strings.Split(qualifiedRunColumns, ", ")
	if len(q) != len(plain) || len(plain) != 17 {
		t.Fatalf("qualified %d columns, plain %d; want 17 each: %q", len(q), len(plain), qualifiedRunColumns)
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
