package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// decideAttempts bounds how often approvalDecideOne reads an approval
// again after another decision changed it between its read and its write,
// before it falls back to the locking transaction.
const decideAttempts = 4

// approvalDecideOne is ApprovalDecide in two round trips on Postgres
// (Dialect.OneStatement) instead of a transaction of eight: it reads the
// approval with its row version (xmin), lets p.Decide judge it, and writes
// the outcome — the approval, the run requeued, its permission.decided
// event, the card update and the audit — as one statement guarded by that
// version, so it applies only to the approval as judged (a decision in
// between changes xmin; the approval is then read and judged again). The
// statement locks the run row before the event takes its seq, as the
// transaction does (the event's CTE selects FROM the run's UPDATE).
//
// handled is false when the transaction must do it instead: a decision
// keyed by a platform event (the event's dedup is the transaction's first
// write), one that creates a grant, or one that kept losing the race.
func (s *Store) approvalDecideOne(ctx context.Context, p approvals.ApprovalDecideParams) (stored *approvals.Approval, result error, handled bool) {
	if p.Event != nil {
		return nil, nil, false
	}
	for range decideAttempts {
		var version string
		a, _, err := scanApproval(versionScanner{s.db.QueryRowContext(ctx, s.dialect.Rebind(`SELECT xmin::text, `+approvalColumns+
			` FROM approvals WHERE id = ?`), p.ID), &version})
		if err != nil {
			return nil, mapErr(err, "load approval", "approval "+p.ID), true
		}
		out := p.Decide(a)
		if out.Grant != nil || (out.UpdateCard && !out.Final) {
			return nil, nil, false
		}
		if out.Approval == nil {
			if err := s.auditOne(ctx, out.Audit); err != nil {
				return nil, err, true
			}
			return a, out.Err, true
		}
		written, err := s.writeDecision(ctx, out, version)
		if err != nil {
			return nil, err, true
		}
		if written != nil {
			return written, out.Err, true
		}
	}
	return nil, nil, false
}

// versionScanner scans a row whose first column is the row version into
// *version and the rest into the wrapped scan's destinations.
type versionScanner struct {
	row     *sql.Row
	version *string
}

func (v versionScanner) Scan(dest ...any) error {
	return v.row.Scan(append([]any{v.version}, dest...)...)
}

// auditOne appends entries (pending, Dialect.DeferAuditSeal) in one
// statement outside a transaction.
func (s *Store) auditOne(ctx context.Context, entries []approvals.AuditEntry) error {
	if len(entries) == 0 {
		return nil
	}
	q, args := pendingAuditInsert(entries)
	if _, err := s.db.ExecContext(ctx, s.dialect.Rebind(q), args...); err != nil {
		return fmt.Errorf("store: audit append: %w", err)
	}
	s.afterCommit(&tx{audited: true})
	return nil
}

// writeDecision writes out (out.Approval set) if the approval's row is
// still at version; nil, nil when it is not.
func (s *Store) writeDecision(ctx context.Context, out approvals.Outcome, version string) (*approvals.Approval, error) {
	a := out.Approval
	j, err := approvalJSON(a)
	if err != nil {
		return nil, fmt.Errorf("store: approval decide %s: %w", a.ID, err)
	}
	b := &stmtBuilder{}
	b.ctes = append(b.ctes, "g AS (UPDATE approvals SET status = "+b.p(string(a.Status), "text")+
		", approved_args = "+b.p(j.approved, "text")+", executed_args = "+b.p(j.executed, "text")+
		", quorum = "+b.p(a.Quorum, "integer")+", approvers = "+b.p(j.approvers, "text")+", eligible = "+b.p(j.eligible, "text")+
		", decisions = "+b.p(j.decisions, "text")+", decided_at = "+b.p(nullMicros(a.DecidedAt), "bigint")+
		", rule = "+b.p(a.Rule, "integer")+", digest = "+b.p(a.Digest, "text")+", rule_key = "+b.p(a.RuleKey, "text")+
		", policy_version = "+b.p(a.PolicyVersion, "text")+", added_approvers = "+b.p(j.added, "text")+
		", escalated = "+b.p(a.Escalated, "integer")+", escalation_due = "+b.p(nullMicros(a.EscalationDue), "bigint")+
		", why = "+b.p(a.Why, "text")+", receipt = "+b.p(a.Receipt, "text")+
		" WHERE id = "+b.p(a.ID, "text")+" AND status = 'pending' AND xmin::text = "+b.p(version, "text")+
		runGuard(b, a, out.Final)+" RETURNING "+approvalColumns+")")
	if out.Final {
		if err := requeueFromDecision(b, a, out.Copies); err != nil {
			return nil, err
		}
	}
	arows := auditRows(out.Audit)
	b.insert("g", "audit_pending", pendingCols, pendingTypes, arows, "")
	q := "WITH " + strings.Join(b.ctes, ",\n") + "\nSELECT " + approvalColumns + " FROM g"
	written, _, err := scanApproval(s.db.QueryRowContext(ctx, q, b.args...))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: approval decide %s: %w", a.ID, err)
	}
	b.woken.audited = len(arows) > 0
	s.afterCommit(&b.woken)
	return written, nil
}

// runGuard makes a final decision's update apply only if its run exists,
// as the transaction refuses one whose run is gone (the approvals table
// has no foreign key); a run-less approval then falls back to it.
func runGuard(b *stmtBuilder, a *approvals.Approval, final bool) string {
	if !final {
		return ""
	}
	return " AND EXISTS (SELECT 1 FROM runs WHERE runs.id = " + b.p(a.RunID, "text") + ")"
}

// requeueFromDecision adds to b what resumeAfterDecision does in the
// transaction: lock the run row whatever its status and requeue it if it
// waits for this approval (CTE r, after the approval's update g), then its
// permission.decided event and the card update, both after r.
func requeueFromDecision(b *stmtBuilder, a *approvals.Approval, copies []approvals.EventCopy) error {
	at := orNow(derefTime(a.DecidedAt))
	waiting, queued := b.p(string(core.RunWaitingApproval), "text"), b.p(string(core.RunQueued), "text")
	b.ctes = append(b.ctes, "r AS (UPDATE runs SET owner = CASE WHEN runs.status = "+waiting+" THEN NULL ELSE runs.owner END, "+
		"lease_until = CASE WHEN runs.status = "+waiting+" THEN NULL ELSE runs.lease_until END, "+
		"updated_at = CASE WHEN runs.status = "+waiting+" THEN "+b.p(micros(at), "bigint")+" ELSE runs.updated_at END, "+
		"status = CASE WHEN runs.status = "+waiting+" THEN "+queued+" ELSE runs.status END "+
		"FROM g WHERE runs.id = g.run_id RETURNING runs.id)")
	b.wake(core.TopicRuns, "")
	evs, cards, err := decisionEffects(a, at, copies)
	if err != nil {
		return err
	}
	erows, runs := eventRows(evs, a.RunID, at)
	b.insert("r", "run_events", eventCols, eventTypes, erows, "")
	for _, id := range runs {
		b.wake(core.TopicEvents, id)
	}
	orows, err := outboxRows(cards, at)
	if err != nil {
		return err
	}
	b.insert("r", "outbox", outboxCols, outboxTypes, orows, "")
	b.wake(core.TopicOutbox, "")
	return nil
}
