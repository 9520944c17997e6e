package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/opsgate/opsgate/core"
)

// RunCheckpoint implements core.RunStore. Audit entries are appended last,
// so the transaction takes the audit lock after the run's row lock, the same
// order ApprovalDecide uses.
func (s *Store) RunCheckpoint(ctx context.Context, c core.Checkpoint) error {
	now := orNow(c.Now)
	if s.dialect.OneStatement {
		return s.classified(s.runCheckpointOne(ctx, c, now))
	}
	return s.inTx(ctx, "run checkpoint", func(t *tx) error { return checkpointInTx(ctx, t, c, now) })
}

// checkpointInTx is RunCheckpoint's transition inside t (the agent call
// changes apply one in their own transaction).
func checkpointInTx(ctx context.Context, t *tx, c core.Checkpoint, now time.Time) error {
	// The guarded update comes first: it is the check and it takes the
	// run's row lock (every append to the run's events happens under
	// it), in one round trip instead of a SELECT … FOR UPDATE and an
	// UPDATE.
	set, args := "updated_at = ?", []any{micros(now)}
	if c.Status != "" {
		set += ", status = ?"
		args = append(args, string(c.Status))
		if c.Status == core.RunQueued || c.Status.Final() {
			t.notify(core.TopicRuns) // a thread may have been freed
		}
	}
	if c.Release {
		set += ", owner = NULL, lease_until = NULL"
	}
	if c.StepIndex != nil {
		set += ", step_index = ?"
		args = append(args, *c.StepIndex)
	}
	if c.ErrorCode != "" || c.ErrorMessage != "" {
		set += ", error_code = ?, error_message = ?"
		args = append(args, c.ErrorCode, c.ErrorMessage)
	}
	where := "id = ?"
	args = append(args, c.RunID)
	if c.Owner != "" {
		where += " AND owner = ?"
		args = append(args, c.Owner)
	}
	if len(c.ExpectStatus) > 0 {
		where += " AND status IN (" + placeholders(len(c.ExpectStatus)) + ")"
		for _, st := range c.ExpectStatus {
			args = append(args, string(st))
		}
	}
	r, err := t.exec(ctx, `UPDATE runs SET `+set+` WHERE `+where, args...)
	if err != nil {
		return fmt.Errorf("store: run checkpoint %s: update run: %w", c.RunID, err)
	}
	if n, err := r.RowsAffected(); err != nil {
		return fmt.Errorf("store: run checkpoint %s: update run: %w", c.RunID, err)
	} else if n == 0 {
		return checkpointRefused(ctx, t, c)
	}
	if c.Step != nil {
		if err := upsertStep(ctx, t, c.RunID, c.Step); err != nil {
			return err
		}
		if executes(c.Step) {
			if err := setExecutedArgs(ctx, t, c.RunID, c.Step); err != nil {
				return err
			}
		}
	}
	if c.Approval != nil {
		if err := insertApproval(ctx, t, c.Approval); err != nil {
			return err
		}
	}
	for i := range c.MoreSteps {
		if err := upsertStep(ctx, t, c.RunID, &c.MoreSteps[i]); err != nil {
			return err
		}
	}
	for _, a := range c.MoreApprovals {
		if err := insertApproval(ctx, t, a); err != nil {
			return err
		}
	}
	for i := range c.Outbox {
		if c.Outbox[i].RunID == "" {
			c.Outbox[i].RunID = c.RunID
		}
	}
	if err := insertOutbox(ctx, t, now, c.Outbox...); err != nil {
		return err
	}
	if err := appendEvents(ctx, t, c.Events, c.RunID, now); err != nil {
		return err
	}
	return appendAudit(ctx, t, c.Audit)
}

// checkpointRefused explains why a checkpoint's guarded update matched no
// row: the run does not exist, or its owner or status is not the expected
// one (core.ErrConflict).
func checkpointRefused(ctx context.Context, t *tx, c core.Checkpoint) error {
	var status string
	var owner sql.NullString
	if err := t.queryRow(ctx, `SELECT status, owner FROM runs WHERE id = ?`, c.RunID).Scan(&status, &owner); err != nil {
		return mapErr(err, "run checkpoint: read run", "run "+c.RunID)
	}
	if c.Owner != "" && owner.String != c.Owner {
		return fmt.Errorf("store: run checkpoint %s: held by %q, not %q: %w", c.RunID, owner.String, c.Owner, core.ErrConflict)
	}
	return fmt.Errorf("store: run checkpoint %s: status %s, want one of %v: %w", c.RunID, status, c.ExpectStatus, core.ErrConflict)
}

// executes reports whether a checkpointed step is the dispatch of an
// approved call: its args are then what the approval executed.
func executes(st *core.Step) bool {
	return st.Status == core.StepDispatching && st.ApprovalID != ""
}

// setExecutedArgs records, on the approval a dispatching step carries, the
// arguments the tool is called with, in the checkpoint's transaction: the
// approval then says on its own what ran (proposed, approved and executed
// arguments stored separately), with no need to consult the run.
func setExecutedArgs(ctx context.Context, t *tx, runID string, st *core.Step) error {
	args, err := json.Marshal(st.Args)
	if err != nil {
		return fmt.Errorf("store: run checkpoint %s: executed args: %w", runID, err)
	}
	if _, err := t.exec(ctx, `UPDATE approvals SET executed_args = ? WHERE id = ? AND run_id = ?`,
		string(args), st.ApprovalID, runID); err != nil {
		return fmt.Errorf("store: run checkpoint %s: executed args of approval %s: %w", runID, st.ApprovalID, err)
	}
	return nil
}

func upsertStep(ctx context.Context, t *tx, runID string, st *core.Step) error {
	args, err := json.Marshal(st.Args)
	if err != nil {
		return fmt.Errorf("store: upsert step %s/%d: args: %w", runID, st.Index, err)
	}
	_, err = t.exec(ctx, `INSERT INTO steps (run_id, idx, tool, status, args, output, error, approval_id,
		idempotency_key, attempts, started_at, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (run_id, idx) DO UPDATE SET tool = excluded.tool, status = excluded.status, args = excluded.args,
		output = excluded.output, error = excluded.error, approval_id = excluded.approval_id,
		idempotency_key = excluded.idempotency_key, attempts = excluded.attempts,
		started_at = excluded.started_at, finished_at = excluded.finished_at`,
		runID, st.Index, st.Tool, string(st.Status), string(args), st.Output, st.Error, st.ApprovalID,
		st.IdempotencyKey, st.Attempts, nullMicros(st.StartedAt), nullMicros(st.FinishedAt))
	if err != nil {
		return fmt.Errorf("store: upsert step %s/%d: %w", runID, st.Index, err)
	}
	return nil
}
