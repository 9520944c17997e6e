package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

const approvalColumns = `id, run_id, step_index, thread, requester, tool, destructive, risk, proposed_args,
	approved_args, executed_args, preview, reason, status, approvers, eligible, quorum, rule, decisions,
	created_at, expires_at, decided_at, digest, rule_key, policy_version, escalation, escalated, escalation_due,
	added_approvers, card_threads, why, receipt, seq`

// approvalRow is a's values in approvalCols' order, for an insert.
func approvalRow(a *approvals.Approval) ([]any, error) {
	j, err := approvalJSON(a)
	if err != nil {
		return nil, fmt.Errorf("store: insert approval %s: %w", a.ID, err)
	}
	status := a.Status
	if status == "" {
		status = approvals.StatusPending
	}
	return []any{a.ID, a.RunID, a.StepIndex, a.Thread, a.Requester, a.Tool, a.Destructive, string(a.Risk),
		j.proposed, j.approved, j.executed, a.Preview, a.Reason, string(status), j.approvers, j.eligible,
		a.Quorum, a.Rule, j.decisions, micros(a.CreatedAt), micros(a.ExpiresAt), nullMicros(a.DecidedAt),
		a.Digest, a.RuleKey, a.PolicyVersion, j.ladder, a.Escalated, nullMicros(a.EscalationDue), j.added, j.threads, a.Why, a.Receipt}, nil
}

func insertApproval(ctx context.Context, t *tx, a *approvals.Approval) error {
	row, err := approvalRow(a)
	if err != nil {
		return err
	}
	_, err = t.exec(ctx, `INSERT INTO approvals (`+strings.Join(approvalCols, ", ")+`)
		VALUES (`+strings.TrimSuffix(strings.Repeat("?, ", len(approvalCols)), ", ")+`)`, row...)
	if err != nil {
		return fmt.Errorf("store: insert approval %s: %w", a.ID, err)
	}
	return nil
}

// approvalJSONCols are the JSON TEXT columns of an approval.
type approvalJSONCols struct {
	proposed, approved, executed, approvers, eligible, decisions string
	ladder, added, threads                                       string
}

func approvalJSON(a *approvals.Approval) (approvalJSONCols, error) {
	var c approvalJSONCols
	for _, f := range []struct {
		dst *string
		v   any
	}{{&c.proposed, a.ProposedArgs}, {&c.approved, a.ApprovedArgs}, {&c.executed, a.ExecutedArgs},
		{&c.approvers, a.Approvers}, {&c.eligible, a.Eligible}, {&c.decisions, a.Decisions},
		{&c.ladder, orEmpty(a.Ladder)}, {&c.added, orEmpty(a.AddedApprovers)}, {&c.threads, orEmpty(a.CardThreads)}} {
		b, err := json.Marshal(f.v)
		if err != nil {
			return c, err
		}
		*f.dst = string(b)
	}
	return c, nil
}

// orEmpty keeps a nil list "[]" in the store (the columns' default).
func orEmpty[T any](l []T) []T {
	if l == nil {
		return []T{}
	}
	return l
}

type rowScanner interface{ Scan(dest ...any) error }

func scanApproval(r rowScanner) (*approvals.Approval, int64, error) {
	var a approvals.Approval
	var risk, status string
	var j approvalJSONCols
	var created, expires, seq int64
	var decided, due sql.NullInt64
	if err := r.Scan(&a.ID, &a.RunID, &a.StepIndex, &a.Thread, &a.Requester, &a.Tool, &a.Destructive, &risk,
		&j.proposed, &j.approved, &j.executed, &a.Preview, &a.Reason, &status, &j.approvers, &j.eligible,
		&a.Quorum, &a.Rule, &j.decisions, &created, &expires, &decided, &a.Digest, &a.RuleKey, &a.PolicyVersion,
		&j.ladder, &a.Escalated, &due, &j.added, &j.threads, &a.Why, &a.Receipt, &seq); err != nil {
		return nil, 0, err
	}
	for _, f := range []struct {
		src string
		dst any
	}{{j.proposed, &a.ProposedArgs}, {j.approved, &a.ApprovedArgs}, {j.executed, &a.ExecutedArgs},
		{j.approvers, &a.Approvers}, {j.eligible, &a.Eligible}, {j.decisions, &a.Decisions},
		{j.ladder, &a.Ladder}, {j.added, &a.AddedApprovers}, {j.threads, &a.CardThreads}} {
		if err := json.Unmarshal([]byte(f.src), f.dst); err != nil {
			return nil, 0, fmt.Errorf("approval %s: %w", a.ID, err)
		}
	}
	a.Risk, a.Status = approvals.Risk(risk), approvals.Status(status)
	a.CreatedAt, a.ExpiresAt, a.DecidedAt = fromMicros(created), fromMicros(expires), optMicros(decided)
	a.EscalationDue = optMicros(due)
	// Empty lists are stored "[]"; the model keeps them nil.
	if len(a.Ladder) == 0 {
		a.Ladder = nil
	}
	if len(a.AddedApprovers) == 0 {
		a.AddedApprovers = nil
	}
	if len(a.CardThreads) == 0 {
		a.CardThreads = nil
	}
	return &a, seq, nil
}

func loadApproval(ctx context.Context, t *tx, id string, lock bool) (*approvals.Approval, error) {
	q := `SELECT ` + approvalColumns + ` FROM approvals WHERE id = ?`
	if lock {
		q += t.d.ForUpdate
	}
	a, _, err := scanApproval(t.queryRow(ctx, q, id))
	if err != nil {
		return nil, mapErr(err, "load approval", "approval "+id)
	}
	return a, nil
}

// ApprovalGet implements approvals.Store.
func (s *Store) ApprovalGet(ctx context.Context, id string) (*approvals.Approval, error) {
	a, _, err := scanApproval(s.read.QueryRowContext(ctx, s.dialect.Rebind(`SELECT `+approvalColumns+
		` FROM approvals WHERE id = ?`), id))
	if err != nil {
		return nil, mapErr(err, "approval get", "approval "+id)
	}
	return a, nil
}

// ApprovalList implements approvals.Store: newest first.
func (s *Store) ApprovalList(ctx context.Context, p approvals.ApprovalListParams) ([]*approvals.Approval, string, error) {
	limit := pageLimit(p.Limit)
	where, args := "1 = 1", []any{}
	if p.Status != "" {
		where += " AND status = ?"
		args = append(args, string(p.Status))
	}
	if p.RunID != "" {
		where += " AND run_id = ?"
		args = append(args, p.RunID)
	}
	if p.IDPrefix != "" {
		w, a := idMatch(p.IDPrefix)
		where, args = where+w, append(args, a...)
	}
	if p.Tool != "" {
		where += " AND tool = ?"
		args = append(args, p.Tool)
	}
	if p.Decided {
		where += " AND status <> ?"
		args = append(args, string(approvals.StatusPending))
	}
	if p.Cursor != "" {
		c, err := strconv.ParseInt(p.Cursor, 10, 64)
		if err != nil {
			return nil, "", fmt.Errorf("store: approval list: bad cursor %q", p.Cursor)
		}
		where += " AND seq < ?"
		args = append(args, c)
	}
	rows, err := s.read.QueryContext(ctx, s.dialect.Rebind(`SELECT `+approvalColumns+` FROM approvals WHERE `+
		where+` ORDER BY seq DESC LIMIT ?`), append(args, limit+1)...)
	if err != nil {
		return nil, "", fmt.Errorf("store: approval list: %w", err)
	}
	defer rows.Close()
	items := []*approvals.Approval{}
	var seqs []int64
	for rows.Next() {
		a, seq, err := scanApproval(rows)
		if err != nil {
			return nil, "", fmt.Errorf("store: approval list: %w", err)
		}
		items, seqs = append(items, a), append(seqs, seq)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("store: approval list: %w", err)
	}
	items, next := page(items, seqs, limit)
	return items, next, nil
}

// ApprovalListExpired implements approvals.Store.
func (s *Store) ApprovalListExpired(ctx context.Context, now time.Time, limit int) ([]string, error) {
	rows, err := s.read.QueryContext(ctx, s.dialect.Rebind(`SELECT id FROM approvals
		WHERE status = ? AND expires_at <= ? ORDER BY expires_at, seq LIMIT ?`),
		string(approvals.StatusPending), micros(now), pageLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("store: approval list expired: %w", err)
	}
	ids, err := scanStrings(rows)
	if err != nil {
		return nil, fmt.Errorf("store: approval list expired: %w", err)
	}
	return ids, nil
}

// ApprovalDecide implements approvals.Store; see the interface for the
// contract. Write order inside the transaction — approval row, run row,
// outbox, audit last — matches RunCheckpoint (run row, then audit), so the
// two never wait on each other's locks in opposite order.
//
// A duplicate Event returns the approval as stored with an error matching
// approvals.ErrDuplicateEvent. When the compare-and-set on pending finds
// the approval already final (possible only if a Decide func produced an
// outcome for a final approval), it returns a *approvals.RefusedError
// wrapping ErrAlreadyDecided with the winners, and persists nothing but
// the event record.
func (s *Store) ApprovalDecide(ctx context.Context, p approvals.ApprovalDecideParams) (*approvals.Approval, error) {
	if p.Decide == nil {
		return nil, errors.New("store: approval decide: Decide func is required")
	}
	if s.dialect.OneStatement {
		if stored, result, handled := s.approvalDecideOne(ctx, p); handled {
			return stored, s.classified(result)
		}
	}
	var stored *approvals.Approval
	var result error
	err := s.inTx(ctx, "approval decide", func(t *tx) error {
		a, err := loadApproval(ctx, t, p.ID, true)
		if err != nil {
			return err
		}
		stored = a
		if p.Event != nil {
			fresh, err := recordDecisionEvent(ctx, t, p.Event, a.RunID)
			if err != nil {
				return err
			}
			if !fresh {
				result = fmt.Errorf("store: approval decide %s: event %s/%s: %w", a.ID, p.Event.Channel, p.Event.EventID, approvals.ErrDuplicateEvent)
				return nil
			}
		}
		out := p.Decide(a)
		var written *approvals.Approval
		if out.Approval != nil {
			if written, err = casApproval(ctx, t, out.Approval); err != nil {
				return err
			}
			if written == nil {
				cur, err := loadApproval(ctx, t, p.ID, false)
				if err != nil {
					return err
				}
				stored = cur
				result = &approvals.RefusedError{Reason: approvals.ErrAlreadyDecided, By: cur.Winners(),
					Detail: fmt.Sprintf("%s by %v", cur.Status, cur.Winners()), At: derefTime(cur.DecidedAt)}
				return nil
			}
		}
		if out.Grant != nil {
			if err := insertGrant(ctx, t, out.Grant); err != nil {
				return fmt.Errorf("store: approval decide %s: %w", a.ID, err)
			}
		}
		if out.Final && out.Approval != nil {
			if err := resumeAfterDecision(ctx, t, out.Approval, out.Copies); err != nil {
				return err
			}
		} else if out.UpdateCard && written != nil {
			if err := updateCard(ctx, t, written); err != nil {
				return err
			}
		}
		if err := appendAudit(ctx, t, out.Audit); err != nil {
			return err
		}
		if written != nil {
			stored = written
		}
		result = out.Err
		return nil
	})
	if err != nil {
		return nil, err
	}
	return stored, result
}

// recordDecisionEvent inserts the event key; false means it was seen before.
// The key carries no message text (approvals.EventKey has none), so the
// event's text is stored empty: ThreadMessages shows the decision's effect
// through the card update, not the click itself.
func recordDecisionEvent(ctx context.Context, t *tx, e *approvals.EventKey, runID string) (bool, error) {
	r, err := t.exec(ctx, `INSERT INTO events (channel, event_id, run_id, actor, thread, received_at, raw, text)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (channel, event_id) DO NOTHING`,
		e.Channel, e.EventID, nullString(runID), e.Actor, e.Thread, micros(orNow(e.At)), e.Raw, e.Text)
	if err != nil {
		return false, fmt.Errorf("store: approval decide: record event: %w", err)
	}
	n, err := r.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("store: approval decide: record event: %w", err)
	}
	return n == 1, nil
}

// casApproval writes a decided approval only if it is still pending, and
// returns it as stored (nil when it was not pending), in one statement.
func casApproval(ctx context.Context, t *tx, a *approvals.Approval) (*approvals.Approval, error) {
	j, err := approvalJSON(a)
	if err != nil {
		return nil, fmt.Errorf("store: approval decide %s: %w", a.ID, err)
	}
	stored, _, err := scanApproval(t.queryRow(ctx, `UPDATE approvals SET status = ?, approved_args = ?, executed_args = ?, quorum = ?,
		approvers = ?, eligible = ?, decisions = ?, decided_at = ?, rule = ?, digest = ?, rule_key = ?, policy_version = ?,
		added_approvers = ?, escalated = ?, escalation_due = ?, why = ?, receipt = ?
		WHERE id = ? AND status = ? RETURNING `+approvalColumns,
		string(a.Status), j.approved, j.executed, a.Quorum, j.approvers, j.eligible, j.decisions,
		nullMicros(a.DecidedAt), a.Rule, a.Digest, a.RuleKey, a.PolicyVersion, j.added, a.Escalated, nullMicros(a.EscalationDue),
		a.Why, a.Receipt, a.ID, string(approvals.StatusPending)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: approval decide %s: update: %w", a.ID, err)
	}
	return stored, nil
}

// resumeAfterDecision requeues the waiting run, records permission.decided
// and queues the card update, all in the deciding transaction.
func resumeAfterDecision(ctx context.Context, t *tx, a *approvals.Approval, copies []approvals.EventCopy) error {
	at := orNow(derefTime(a.DecidedAt))
	// Lock the run row whatever its status (every append to a run's event
	// stream happens under it, so a run's events commit in seq order and an
	// SSE reader resuming after seq N never misses one), and requeue it if
	// it waits for this approval: one statement for both.
	r, err := t.exec(ctx, `UPDATE runs SET
			owner = CASE WHEN status = ? THEN NULL ELSE owner END,
			lease_until = CASE WHEN status = ? THEN NULL ELSE lease_until END,
			updated_at = CASE WHEN status = ? THEN ? ELSE updated_at END,
			status = CASE WHEN status = ? THEN ? ELSE status END
		WHERE id = ?`,
		string(core.RunWaitingApproval), string(core.RunWaitingApproval), string(core.RunWaitingApproval), micros(at),
		string(core.RunWaitingApproval), string(core.RunQueued), a.RunID)
	if err != nil {
		return fmt.Errorf("store: approval decide %s: requeue run: %w", a.ID, err)
	}
	if n, err := r.RowsAffected(); err != nil {
		return fmt.Errorf("store: approval decide %s: requeue run: %w", a.ID, err)
	} else if n == 0 {
		return mapErr(sql.ErrNoRows, "approval decide: lock run", "run "+a.RunID)
	}
	// Announced whether or not the run was waiting: a spurious wake-up
	// costs a claimer one empty query.
	t.notify(core.TopicRuns)
	evs, cards, err := decisionEffects(a, at, copies)
	if err != nil {
		return err
	}
	if err := appendEvents(ctx, t, evs, a.RunID, at); err != nil {
		return err
	}
	return insertOutbox(ctx, t, at, cards...)
}

// updateCard queues an update of a's card in its thread, stamped with its
// newest decision record: a change to a pending approval (a delegation)
// that its card shows.
func updateCard(ctx context.Context, t *tx, a *approvals.Approval) error {
	thread, err := core.ParseThread(a.Thread)
	if err != nil {
		return fmt.Errorf("store: approval %s: %w", a.ID, err)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return fmt.Errorf("store: approval %s: outbox id: %w", a.ID, err)
	}
	at := time.Now().UTC()
	if n := len(a.Decisions); n > 0 {
		at = a.Decisions[n-1].At // the change that the card shows
	}
	return insertOutbox(ctx, t, at, core.OutboxMessage{ID: id.String(), Thread: thread, Kind: core.KindCardUpdate, ApprovalID: a.ID,
		RunID: a.RunID, CreatedAt: at})
}

// decisionEffects are what a final decision adds besides the requeue, on
// either write path: the run's permission.decided event (and its copies
// for other runs: approvals.Outcome.Copies) and the update of the
// approval's card in its thread and in every other thread its card went
// to (escalated approvers' direct messages).
func decisionEffects(a *approvals.Approval, at time.Time, copies []approvals.EventCopy) ([]core.RunEvent, []core.OutboxMessage, error) {
	base := map[string]any{"approval_id": a.ID, "status": a.Status, "by": a.Winners()}
	data, err := json.Marshal(base)
	if err != nil {
		return nil, nil, fmt.Errorf("store: approval decide %s: event: %w", a.ID, err)
	}
	evs := []core.RunEvent{{RunID: a.RunID, Type: core.EventPermissionDecided, Data: data, At: at}}
	for _, c := range copies {
		m := maps.Clone(base)
		maps.Copy(m, c.Data)
		d, err := json.Marshal(m)
		if err != nil {
			return nil, nil, fmt.Errorf("store: approval decide %s: event copy: %w", a.ID, err)
		}
		evs = append(evs, core.RunEvent{RunID: c.RunID, Type: core.EventPermissionDecided, Data: d, At: at})
	}
	var cards []core.OutboxMessage
	for _, th := range append([]string{a.Thread}, a.CardThreads...) {
		thread, err := core.ParseThread(th)
		if err != nil {
			return nil, nil, fmt.Errorf("store: approval decide %s: %w", a.ID, err)
		}
		id, err := uuid.NewV7()
		if err != nil {
			return nil, nil, fmt.Errorf("store: approval decide %s: outbox id: %w", a.ID, err)
		}
		cards = append(cards, core.OutboxMessage{ID: id.String(), Thread: thread, Kind: core.KindCardUpdate, ApprovalID: a.ID, RunID: a.RunID, CreatedAt: at})
	}
	return evs, cards, nil
}

func derefTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}
