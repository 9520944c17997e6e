package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/opsgate/opsgate/core"
)

var _ core.AgentCallStore = (*Store)(nil)

const agentCallColumns = `id, run_id, step_index, status, task, claim_id, claimed_by, claimed_at, served_by,
	result, error_code, error, created_at, updated_at, finished_at`

const receiptColumns = `call_id, tool_call_id, seq, tool_id, input, args, status, output, error, approval_id,
	idempotency_key, created_at, finished_at`

func scanAgentCall(r rowScanner) (*core.AgentCall, int64, error) {
	var c core.AgentCall
	var seq, created, updated int64
	var task string
	var claimed, finished sql.NullInt64
	var result sql.NullString
	var status string
	if err := r.Scan(&seq, &c.ID, &c.RunID, &c.StepIndex, &status, &task, &c.ClaimID, &c.ClaimedBy, &claimed, &c.ServedBy,
		&result, &c.ErrorCode, &c.Error, &created, &updated, &finished); err != nil {
		return nil, 0, err
	}
	c.Status = core.AgentCallStatus(status)
	if err := json.Unmarshal([]byte(task), &c.Task); err != nil {
		return nil, 0, fmt.Errorf("agent call %s: task: %w", c.ID, err)
	}
	if result.Valid {
		c.Result = json.RawMessage(result.String)
	}
	c.ClaimedAt, c.FinishedAt = optMicros(claimed), optMicros(finished)
	c.CreatedAt, c.UpdatedAt = fromMicros(created), fromMicros(updated)
	return &c, seq, nil
}

func nullJSON(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	return string(raw)
}

// AgentCallCreate implements core.AgentCallStore.
func (s *Store) AgentCallCreate(ctx context.Context, call *core.AgentCall, c core.Checkpoint) error {
	task, err := json.Marshal(call.Task)
	if err != nil {
		return fmt.Errorf("store: agent call create: task: %w", err)
	}
	now := orNow(c.Now)
	return s.inTx(ctx, "agent call create", func(t *tx) error {
		if err := checkpointInTx(ctx, t, c, now); err != nil {
			return err
		}
		if _, err := t.exec(ctx, `INSERT INTO agent_calls (`+agentCallColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			call.ID, call.RunID, call.StepIndex, string(call.Status), string(task), call.ClaimID, call.ClaimedBy,
			nullMicros(call.ClaimedAt), call.ServedBy, nullJSON(call.Result), call.ErrorCode, call.Error,
			micros(orNow(call.CreatedAt)), micros(orNow(call.UpdatedAt)), nullMicros(call.FinishedAt)); err != nil {
			return fmt.Errorf("store: agent call create %s: %w", call.ID, err)
		}
		return nil
	})
}

// AgentCallGet implements core.AgentCallStore.
func (s *Store) AgentCallGet(ctx context.Context, id string) (*core.AgentCall, error) {
	c, _, err := scanAgentCall(s.read.QueryRowContext(ctx, s.dialect.Rebind(`SELECT seq, `+agentCallColumns+
		` FROM agent_calls WHERE id = ?`), id))
	if err != nil {
		return nil, mapErr(err, "agent call get", "agent call "+id)
	}
	return c, nil
}

// AgentCallForStep implements core.AgentCallStore.
func (s *Store) AgentCallForStep(ctx context.Context, runID string, step int) (*core.AgentCall, error) {
	c, _, err := scanAgentCall(s.read.QueryRowContext(ctx, s.dialect.Rebind(`SELECT seq, `+agentCallColumns+
		` FROM agent_calls WHERE run_id = ? AND step_index = ? ORDER BY seq DESC LIMIT 1`), runID, step))
	if err != nil {
		return nil, mapErr(err, "agent call for step", fmt.Sprintf("agent call of run %s step %d", runID, step))
	}
	return c, nil
}

// AgentCallList implements core.AgentCallStore: newest first.
func (s *Store) AgentCallList(ctx context.Context, p core.AgentCallListParams) ([]*core.AgentCall, string, error) {
	limit := pageLimit(p.Limit)
	where, args := "1 = 1", []any{}
	if p.RunID != "" {
		where += " AND run_id = ?"
		args = append(args, p.RunID)
	}
	if p.Status != "" {
		where += " AND status = ?"
		args = append(args, string(p.Status))
	}
	if p.ClaimedBy != "" {
		where += " AND claimed_by = ?"
		args = append(args, p.ClaimedBy)
	}
	if p.Cursor != "" {
		c, err := strconv.ParseInt(p.Cursor, 10, 64)
		if err != nil {
			return nil, "", fmt.Errorf("store: agent call list: bad cursor %q", p.Cursor)
		}
		where += " AND seq < ?"
		args = append(args, c)
	}
	rows, err := s.read.QueryContext(ctx, s.dialect.Rebind(`SELECT seq, `+agentCallColumns+` FROM agent_calls WHERE `+where+
		` ORDER BY seq DESC LIMIT ?`), append(args, limit+1)...)
	if err != nil {
		return nil, "", fmt.Errorf("store: agent call list: %w", err)
	}
	defer rows.Close()
	items := []*core.AgentCall{}
	var seqs []int64
	for rows.Next() {
		c, seq, err := scanAgentCall(rows)
		if err != nil {
			return nil, "", fmt.Errorf("store: agent call list: %w", err)
		}
		items, seqs = append(items, c), append(seqs, seq)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("store: agent call list: %w", err)
	}
	items, next := page(items, seqs, limit)
	return items, next, nil
}

type rowsQuerier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

func (s *Store) receipts(ctx context.Context, q rowsQuerier, rebind func(string) string, callID string) ([]core.AgentReceipt, error) {
	rows, err := q.QueryContext(ctx, rebind(`SELECT `+receiptColumns+` FROM agent_receipts WHERE call_id = ? ORDER BY seq`), callID)
	if err != nil {
		return nil, fmt.Errorf("store: agent receipts %s: %w", callID, err)
	}
	defer rows.Close()
	out := []core.AgentReceipt{}
	for rows.Next() {
		var r core.AgentReceipt
		var input, status string
		var args sql.NullString
		var created int64
		var finished sql.NullInt64
		if err := rows.Scan(&r.CallID, &r.ToolCallID, &r.Seq, &r.ToolID, &input, &args, &status, &r.Output, &r.Error,
			&r.ApprovalID, &r.IdempotencyKey, &created, &finished); err != nil {
			return nil, fmt.Errorf("store: agent receipts %s: %w", callID, err)
		}
		r.Input, r.Status = json.RawMessage(input), core.AgentReceiptStatus(status)
		if args.Valid {
			if err := json.Unmarshal([]byte(args.String), &r.Args); err != nil {
				return nil, fmt.Errorf("store: agent receipt %s/%s: args: %w", callID, r.ToolCallID, err)
			}
		}
		r.CreatedAt, r.FinishedAt = fromMicros(created), optMicros(finished)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: agent receipts %s: %w", callID, err)
	}
	return out, nil
}

// AgentReceiptList implements core.AgentCallStore.
func (s *Store) AgentReceiptList(ctx context.Context, callID string) ([]core.AgentReceipt, error) {
	return s.receipts(ctx, s.read, s.dialect.Rebind, callID)
}

type txQuerier struct {
	t *tx
}

func (q txQuerier) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return q.t.tx.QueryContext(q.t.stmtCtx(ctx), query, args...)
}

// AgentCallChange implements core.AgentCallStore. The call's row is locked
// first, then the run's (by the checkpoint), the order every change of an
// agent call takes.
func (s *Store) AgentCallChange(ctx context.Context, p core.AgentCallChangeParams) (*core.AgentCall, error) {
	if p.Change == nil {
		return nil, errors.New("store: agent call change: Change func is required")
	}
	var out *core.AgentCall
	err := s.inTx(ctx, "agent call change", func(t *tx) error {
		cur, _, err := scanAgentCall(t.queryRow(ctx, `SELECT seq, `+agentCallColumns+` FROM agent_calls WHERE id = ?`+t.d.ForUpdate, p.ID))
		if err != nil {
			return mapErr(err, "agent call change", "agent call "+p.ID)
		}
		rs, err := s.receipts(ctx, txQuerier{t}, t.d.Rebind, p.ID)
		if err != nil {
			return err
		}
		ch, err := p.Change(cur, rs)
		if err != nil {
			return err
		}
		out = cur
		if ch.Checkpoint != nil {
			cp := *ch.Checkpoint
			if cp.RunID == "" {
				cp.RunID = cur.RunID
			}
			if err := checkpointInTx(ctx, t, cp, orNow(cp.Now)); err != nil {
				return err
			}
		}
		if ch.Lease != nil {
			if _, err := t.exec(ctx, `UPDATE runs SET owner = ?, lease_until = ? WHERE id = ?`,
				ch.Lease.Owner, micros(ch.Lease.Until), cur.RunID); err != nil {
				return fmt.Errorf("store: agent call change %s: lease: %w", p.ID, err)
			}
		}
		if c := ch.Call; c != nil {
			task, err := json.Marshal(c.Task)
			if err != nil {
				return fmt.Errorf("store: agent call change %s: task: %w", p.ID, err)
			}
			if _, err := t.exec(ctx, `UPDATE agent_calls SET status = ?, task = ?, claim_id = ?, claimed_by = ?, claimed_at = ?,
				served_by = ?, result = ?, error_code = ?, error = ?, updated_at = ?, finished_at = ? WHERE id = ?`,
				string(c.Status), string(task), c.ClaimID, c.ClaimedBy, nullMicros(c.ClaimedAt), c.ServedBy, nullJSON(c.Result),
				c.ErrorCode, c.Error, micros(orNow(c.UpdatedAt)), nullMicros(c.FinishedAt), p.ID); err != nil {
				return fmt.Errorf("store: agent call change %s: %w", p.ID, err)
			}
			cp := *c
			cp.ID, cp.RunID, cp.StepIndex, cp.CreatedAt = cur.ID, cur.RunID, cur.StepIndex, cur.CreatedAt
			out = &cp
		}
		if r := ch.Receipt; r != nil {
			args, err := json.Marshal(r.Args)
			if err != nil {
				return fmt.Errorf("store: agent call change %s: receipt args: %w", p.ID, err)
			}
			if r.Args == nil {
				args = nil
			}
			if _, err := t.exec(ctx, `INSERT INTO agent_receipts (`+receiptColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
				ON CONFLICT (call_id, tool_call_id) DO UPDATE SET tool_id = excluded.tool_id, input = excluded.input,
				args = excluded.args, status = excluded.status, output = excluded.output, error = excluded.error,
				approval_id = excluded.approval_id, idempotency_key = excluded.idempotency_key, finished_at = excluded.finished_at`,
				p.ID, r.ToolCallID, r.Seq, r.ToolID, string(r.Input), nullJSON(args), string(r.Status), r.Output, r.Error,
				r.ApprovalID, r.IdempotencyKey, micros(orNow(r.CreatedAt)), nullMicros(r.FinishedAt)); err != nil {
				return fmt.Errorf("store: agent call change %s: receipt %s: %w", p.ID, r.ToolCallID, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
