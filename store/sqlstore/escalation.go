package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// escalationDueSQL lists the approvals whose next step is due (parameters:
// now, the limit); pendingStatsSQL counts the pending ones by risk.
const (
	escalationDueSQL = `SELECT id FROM approvals
		WHERE status = '` + string(approvals.StatusPending) + `' AND escalation_due IS NOT NULL AND escalation_due <= ?
		ORDER BY escalation_due LIMIT ?`
	pendingStatsSQL = `SELECT risk, COUNT(*), MIN(created_at) FROM approvals
		WHERE status = '` + string(approvals.StatusPending) + `' GROUP BY risk ORDER BY risk`
)

// EscalationStatements returns ApprovalListEscalating's and
// ApprovalPendingStats's statements as d runs them, for tests that check
// their query plans read migration 0029's partial indexes.
func EscalationStatements(d Dialect) (due, stats string) {
	return d.Rebind(escalationDueSQL), d.Rebind(pendingStatsSQL)
}

// ApprovalListEscalating implements core.EscalationStore. The status is a
// literal so SQLite plans the partial index approvals_escalation_due
// (migration 0029) for it: a tick reads only the steps due.
func (s *Store) ApprovalListEscalating(ctx context.Context, now time.Time, limit int) ([]string, error) {
	rows, err := s.read.QueryContext(ctx, s.dialect.Rebind(escalationDueSQL), micros(now), pageLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("store: approval list escalating: %w", err)
	}
	ids, err := scanStrings(rows)
	if err != nil {
		return nil, fmt.Errorf("store: approval list escalating: %w", err)
	}
	return ids, nil
}

// ApprovalEscalate implements core.EscalationStore.
func (s *Store) ApprovalEscalate(ctx context.Context, p core.ApprovalEscalateParams) (*approvals.Approval, bool, error) {
	if p.Fire == nil {
		return nil, false, fmt.Errorf("store: approval escalate: Fire func is required")
	}
	var stored *approvals.Approval
	var fired bool
	err := s.inTx(ctx, "approval escalate", func(t *tx) error {
		a, err := loadApproval(ctx, t, p.ID, true)
		if err != nil {
			return err
		}
		stored, fired = a, false
		e := p.Fire(a)
		if e == nil || e.Approval == nil {
			return nil
		}
		n := e.Approval
		j, err := approvalJSON(n)
		if err != nil {
			return fmt.Errorf("store: approval escalate %s: %w", a.ID, err)
		}
		r, err := t.exec(ctx, `UPDATE approvals SET escalated = ?, escalation_due = ?, eligible = ?, added_approvers = ?,
			card_threads = ? WHERE id = ? AND status = ? AND escalated = ?`,
			n.Escalated, nullMicros(n.EscalationDue), j.eligible, j.added, j.threads, a.ID, string(approvals.StatusPending), a.Escalated)
		if err != nil {
			return fmt.Errorf("store: approval escalate %s: %w", a.ID, err)
		}
		if k, err := r.RowsAffected(); err != nil {
			return fmt.Errorf("store: approval escalate %s: %w", a.ID, err)
		} else if k != 1 {
			return nil
		}
		if err := insertOutbox(ctx, t, time.Now(), e.Outbox...); err != nil {
			return err
		}
		if err := appendAudit(ctx, t, e.Audit); err != nil {
			return err
		}
		stored, fired = n, true
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return stored, fired, nil
}

// ApprovalPendingStats implements core.EscalationStore: one pass over
// the partial index approvals_pending_risk (migration 0029).
func (s *Store) ApprovalPendingStats(ctx context.Context) ([]core.PendingStat, error) {
	rows, err := s.read.QueryContext(ctx, pendingStatsSQL)
	if err != nil {
		return nil, fmt.Errorf("store: approval pending stats: %w", err)
	}
	defer rows.Close()
	var out []core.PendingStat
	for rows.Next() {
		var risk string
		var n int
		var oldest int64
		if err := rows.Scan(&risk, &n, &oldest); err != nil {
			return nil, fmt.Errorf("store: approval pending stats: %w", err)
		}
		out = append(out, core.PendingStat{Risk: approvals.Risk(risk), Count: n, Oldest: fromMicros(oldest)})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: approval pending stats: %w", err)
	}
	return out, nil
}
