package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// Single-statement writes (Dialect.OneStatement, Postgres).
//
// The hot writes — recording an inbound event with its run, and a run's
// checkpoint — are each one statement on Postgres: the guard (the event's
// dedup insert, the run's guarded update) is the first data-modifying CTE,
// every other write selects FROM it, so it happens only when the guard
// matched; the wake-ups follow the commit as for any write (notify.go).
// A statement outside a transaction block is its own transaction, so the
// write is as atomic as the BEGIN … COMMIT it replaces, in one round trip
// instead of six or seven. Parameters stay parameters (extended protocol),
// typed explicitly because VALUES lists do not infer types from the target.
//
// Ordering is kept: rows that take a seq (run events, outbox messages,
// pending audit entries) are inserted ORDER BY their position, and they are
// produced only after the guard row exists — for a checkpoint, after the
// guarded UPDATE holds the run's row lock — so a run's events still commit
// in seq order.

// stmtBuilder accumulates the CTEs and numbered, typed parameters of one
// statement.
type stmtBuilder struct {
	ctes []string
	args []any
	// woken collects the topics and runs to announce after commit.
	woken tx
}

// p adds a parameter and returns its typed placeholder.
func (b *stmtBuilder) p(v any, typ string) string {
	b.args = append(b.args, v)
	return "$" + strconv.Itoa(len(b.args)) + "::" + typ
}

// insert adds a CTE inserting rows (typed per types) into table for each
// row of guard, in row order.
func (b *stmtBuilder) insert(guard, table string, cols, types []string, rows [][]any, suffix string) {
	if len(rows) == 0 {
		return
	}
	var vals []string
	for i, row := range rows {
		ph := make([]string, len(row)+1)
		for j, v := range row {
			ph[j] = b.p(v, types[j])
		}
		ph[len(row)] = strconv.Itoa(i)
		vals = append(vals, "("+strings.Join(ph, ", ")+")")
	}
	sel := make([]string, len(cols))
	for i, c := range cols {
		sel[i] = "v." + c
	}
	name := "w" + strconv.Itoa(len(b.ctes))
	b.ctes = append(b.ctes, name+" AS (INSERT INTO "+table+" ("+strings.Join(cols, ", ")+") SELECT "+strings.Join(sel, ", ")+
		" FROM "+guard+", (VALUES "+strings.Join(vals, ", ")+") AS v("+strings.Join(cols, ", ")+", ord) ORDER BY v.ord "+suffix+")")
}

// wake marks topic to be announced once the statement has committed; the
// events topic is announced per run.
func (b *stmtBuilder) wake(topic, runID string) {
	if runID != "" {
		b.woken.notifyRun(runID)
		return
	}
	b.woken.notify(topic)
}

// sql renders the statement: the CTEs and a final SELECT of the guard's
// row count.
func (b *stmtBuilder) sql() string {
	return "WITH " + strings.Join(b.ctes, ",\n") + "\nSELECT count(*) FROM g"
}

// Column lists and types of the rows the single-statement writes insert.
var (
	eventCols     = []string{"run_id", "type", "data", "at"}
	eventTypes    = []string{"text", "text", "text", "bigint"}
	outboxCols    = []string{"id", "channel", "thread", "kind", "text", "approval_id", "run_id", "status", "next_attempt_at", "created_at", "replaces"}
	outboxTypes   = []string{"text", "text", "text", "text", "text", "text", "text", "text", "bigint", "bigint", "text"}
	pendingCols   = []string{"at", "kind", "actor", "run_id", "approval_id", "tool", "detail"}
	pendingTypes  = []string{"bigint", "text", "text", "text", "text", "text", "text"}
	stepCols      = []string{"run_id", "idx", "tool", "status", "args", "output", "error", "approval_id", "idempotency_key", "attempts", "started_at", "finished_at"}
	stepTypes     = []string{"text", "integer", "text", "text", "text", "text", "text", "text", "text", "integer", "bigint", "bigint"}
	approvalCols  = []string{"id", "run_id", "step_index", "thread", "requester", "tool", "destructive", "risk", "proposed_args", "approved_args", "executed_args", "preview", "reason", "status", "approvers", "eligible", "quorum", "rule", "decisions", "created_at", "expires_at", "decided_at", "digest", "rule_key", "policy_version", "escalation", "escalated", "escalation_due", "added_approvers", "card_threads", "why", "receipt"}
	approvalTypes = []string{"text", "text", "integer", "text", "text", "text", "boolean", "text", "text", "text", "text", "text", "text", "text", "text", "text", "integer", "integer", "text", "bigint", "bigint", "bigint", "text", "text", "text", "text", "integer", "bigint", "text", "text", "text", "text"}
	runInsCols    = []string{"id", "flow", "thread", "requester", "status", "args", "reason", "step_index", "event_channel", "event_id", "created_at", "updated_at", "attachments"}
	runInsTypes   = []string{"text", "text", "text", "text", "text", "text", "text", "integer", "text", "text", "bigint", "bigint", "text"}
)

// stepUpsert is the conflict clause of a step write (steps are upserted by
// run and index).
const stepUpsert = `ON CONFLICT (run_id, idx) DO UPDATE SET tool = excluded.tool, status = excluded.status, args = excluded.args,
		output = excluded.output, error = excluded.error, approval_id = excluded.approval_id,
		idempotency_key = excluded.idempotency_key, attempts = excluded.attempts,
		started_at = excluded.started_at, finished_at = excluded.finished_at`

// eventRows are the rows of run events, defaulting RunID and At.
func eventRows(events []core.RunEvent, runID string, now time.Time) (rows [][]any, runs []string) {
	for _, e := range events {
		if e.RunID == "" {
			e.RunID = runID
		}
		if e.At.IsZero() {
			e.At = now
		}
		var data any
		if len(e.Data) > 0 {
			data = string(e.Data)
		}
		rows = append(rows, []any{e.RunID, e.Type, data, micros(e.At)})
		if !slices.Contains(runs, e.RunID) {
			runs = append(runs, e.RunID)
		}
	}
	return rows, runs
}

// outboxRows are the rows of queued messages (due at once); an empty ID gets
// a UUIDv7, a zero CreatedAt becomes now.
func outboxRows(ms []core.OutboxMessage, now time.Time) ([][]any, error) {
	var rows [][]any
	for _, m := range ms {
		if m.ID == "" {
			id, err := uuid.NewV7()
			if err != nil {
				return nil, fmt.Errorf("store: queue outbox message: id: %w", err)
			}
			m.ID = id.String()
		}
		if m.Thread.Channel == "" {
			return nil, fmt.Errorf("store: queue outbox message %s: thread has no channel", m.ID)
		}
		if m.CreatedAt.IsZero() {
			m.CreatedAt = now
		}
		rows = append(rows, []any{m.ID, m.Thread.Channel, threadString(m.Thread), string(m.Kind), m.Text, m.ApprovalID, m.RunID,
			string(core.DeliveryPending), micros(m.CreatedAt), micros(m.CreatedAt), m.Replaces})
	}
	return rows, nil
}

// auditRows are the audit_pending rows of entries.
func auditRows(entries []approvals.AuditEntry) [][]any {
	var rows [][]any
	for _, e := range entries {
		rows = append(rows, []any{micros(orNow(e.At)), e.Kind, e.Actor, e.RunID, e.ApprovalID, e.Tool, auditDetail(e.Detail)})
	}
	return rows
}

// inboxRecordOne is InboxRecord as one statement (see the file comment).
func (s *Store) inboxRecordOne(ctx context.Context, p core.InboxRecordParams, now time.Time, events []core.RunEvent, run *core.Run) (core.InboxResult, error) {
	ev := p.Event
	b := &stmtBuilder{}
	var runID string
	if run != nil {
		runID = run.ID
	}
	b.ctes = append(b.ctes, "g AS (INSERT INTO events (channel, event_id, run_id, actor, thread, received_at, raw, text, attachments) VALUES ("+
		strings.Join([]string{b.p(ev.Channel, "text"), b.p(ev.EventID, "text"), b.p(nullString(runID), "text"), b.p(ev.Actor.ID, "text"),
			b.p(threadString(ev.Thread), "text"), b.p(micros(now), "bigint"), b.p([]byte(ev.Raw), "bytea"), b.p(ev.Text, "text"),
			b.p(attachmentsJSON(ev.Attachments), "text")}, ", ")+
		") ON CONFLICT (channel, event_id) DO NOTHING RETURNING 1)")
	if run != nil {
		args, err := json.Marshal(run.Args)
		if err != nil {
			return core.InboxResult{}, fmt.Errorf("store: insert run %s: args: %w", run.ID, err)
		}
		b.insert("g", "runs", runInsCols, runInsTypes, [][]any{{run.ID, run.Flow, threadString(run.Thread), run.Requester,
			string(run.Status), string(args), run.Reason, run.StepIndex, run.EventChannel, run.EventID,
			micros(run.CreatedAt), micros(run.CreatedAt), attachmentsJSON(run.Attachments)}}, "")
		b.wake(core.TopicRuns, "")
	}
	replies, err := outboxRows(p.Replies, now)
	if err != nil {
		return core.InboxResult{}, err
	}
	b.insert("g", "outbox", outboxCols, outboxTypes, replies, "")
	if len(replies) > 0 {
		b.wake(core.TopicOutbox, "")
	}
	rows, runs := eventRows(events, runID, now)
	b.insert("g", "run_events", eventCols, eventTypes, rows, "")
	for _, id := range runs {
		b.wake(core.TopicEvents, id)
	}
	arows := auditRows(p.Audit)
	b.insert("g", "audit_pending", pendingCols, pendingTypes, arows, "")
	var n int64
	if err := s.db.QueryRowContext(ctx, b.sql(), b.args...).Scan(&n); err != nil {
		return core.InboxResult{}, fmt.Errorf("store: inbox record: %w", err)
	}
	if n == 1 {
		b.woken.audited = len(arows) > 0
		s.afterCommit(&b.woken)
		return core.InboxResult{RunID: runID}, nil
	}
	var first sql.NullString
	if err := s.db.QueryRowContext(ctx, s.dialect.Rebind(`SELECT run_id FROM events WHERE channel = ? AND event_id = ?`),
		ev.Channel, ev.EventID).Scan(&first); err != nil {
		return core.InboxResult{}, mapErr(err, "inbox record: read duplicate", "event")
	}
	return core.InboxResult{Duplicate: true, RunID: first.String}, nil
}

// runCheckpointOne is RunCheckpoint as one statement (see the file
// comment). A checkpoint with audit entries seals them later
// (Dialect.DeferAuditSeal, which OneStatement requires).
func (s *Store) runCheckpointOne(ctx context.Context, c core.Checkpoint, now time.Time) error {
	b := &stmtBuilder{}
	set := "updated_at = " + b.p(micros(now), "bigint")
	if c.Status != "" {
		set += ", status = " + b.p(string(c.Status), "text")
		if c.Status == core.RunQueued || c.Status.Final() {
			b.wake(core.TopicRuns, "") // a thread may have been freed
		}
	}
	if c.Release {
		set += ", owner = NULL, lease_until = NULL"
	}
	if c.StepIndex != nil {
		set += ", step_index = " + b.p(*c.StepIndex, "integer")
	}
	if c.ErrorCode != "" || c.ErrorMessage != "" {
		set += ", error_code = " + b.p(c.ErrorCode, "text") + ", error_message = " + b.p(c.ErrorMessage, "text")
	}
	where := "id = " + b.p(c.RunID, "text")
	if c.Owner != "" {
		where += " AND owner = " + b.p(c.Owner, "text")
	}
	if len(c.ExpectStatus) > 0 {
		var in []string
		for _, st := range c.ExpectStatus {
			in = append(in, b.p(string(st), "text"))
		}
		where += " AND status IN (" + strings.Join(in, ", ") + ")"
	}
	b.ctes = append(b.ctes, "g AS (UPDATE runs SET "+set+" WHERE "+where+" RETURNING id)")
	var steps [][]any
	for i, st := range append([]*core.Step{c.Step}, stepPtrs(c.MoreSteps)...) {
		if st == nil {
			continue
		}
		args, err := json.Marshal(st.Args)
		if err != nil {
			return fmt.Errorf("store: upsert step %s/%d: args: %w", c.RunID, st.Index, err)
		}
		steps = append(steps, []any{c.RunID, st.Index, st.Tool, string(st.Status), string(args), st.Output,
			st.Error, st.ApprovalID, st.IdempotencyKey, st.Attempts, nullMicros(st.StartedAt), nullMicros(st.FinishedAt)})
		if i == 0 && executes(st) {
			// The approval's executed args, as setExecutedArgs; only when
			// the guard matched (FROM g).
			b.ctes = append(b.ctes, "w"+strconv.Itoa(len(b.ctes))+" AS (UPDATE approvals SET executed_args = "+b.p(string(args), "text")+
				" FROM g WHERE approvals.id = "+b.p(st.ApprovalID, "text")+" AND approvals.run_id = g.id)")
		}
	}
	if len(steps) > 0 {
		b.insert("g", "steps", stepCols, stepTypes, steps, stepUpsert)
	}
	var apps [][]any
	for _, a := range append([]*approvals.Approval{c.Approval}, c.MoreApprovals...) {
		if a == nil {
			continue
		}
		row, err := approvalRow(a)
		if err != nil {
			return err
		}
		apps = append(apps, row)
	}
	if len(apps) > 0 {
		b.insert("g", "approvals", approvalCols, approvalTypes, apps, "")
	}
	outbox := slices.Clone(c.Outbox)
	for i := range outbox {
		if outbox[i].RunID == "" {
			outbox[i].RunID = c.RunID
		}
	}
	orows, err := outboxRows(outbox, now)
	if err != nil {
		return err
	}
	b.insert("g", "outbox", outboxCols, outboxTypes, orows, "")
	if len(orows) > 0 {
		b.wake(core.TopicOutbox, "")
	}
	erows, runs := eventRows(c.Events, c.RunID, now)
	b.insert("g", "run_events", eventCols, eventTypes, erows, "")
	for _, id := range runs {
		b.wake(core.TopicEvents, id)
	}
	arows := auditRows(c.Audit)
	b.insert("g", "audit_pending", pendingCols, pendingTypes, arows, "")
	var n int64
	if err := s.db.QueryRowContext(ctx, b.sql(), b.args...).Scan(&n); err != nil {
		return fmt.Errorf("store: run checkpoint %s: %w", c.RunID, err)
	}
	if n == 0 {
		var status string
		var owner sql.NullString
		err := s.db.QueryRowContext(ctx, s.dialect.Rebind(`SELECT status, owner FROM runs WHERE id = ?`), c.RunID).Scan(&status, &owner)
		if errors.Is(err, sql.ErrNoRows) {
			return mapErr(err, "run checkpoint: read run", "run "+c.RunID)
		}
		if err != nil {
			return fmt.Errorf("store: run checkpoint %s: read run: %w", c.RunID, err)
		}
		if c.Owner != "" && owner.String != c.Owner {
			return fmt.Errorf("store: run checkpoint %s: held by %q, not %q: %w", c.RunID, owner.String, c.Owner, core.ErrConflict)
		}
		return fmt.Errorf("store: run checkpoint %s: status %s, want one of %v: %w", c.RunID, status, c.ExpectStatus, core.ErrConflict)
	}
	b.woken.audited = len(arows) > 0
	s.afterCommit(&b.woken)
	return nil
}

func stepPtrs(steps []core.Step) []*core.Step {
	out := make([]*core.Step, len(steps))
	for i := range steps {
		out[i] = &steps[i]
	}
	return out
}
