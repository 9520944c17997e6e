package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/opsgate/opsgate/core"
)

// InboxRecord implements core.RunStore. The (channel, event id) insert is
// the deduplication: ON CONFLICT DO NOTHING makes a concurrent duplicate wait
// for the first transaction and then insert nothing. When Run is set and
// Events holds no run.queued event for it, one is appended, so every run's
// stream starts with run.queued.
func (s *Store) InboxRecord(ctx context.Context, p core.InboxRecordParams) (core.InboxResult, error) {
	in, err := prepareInbox(p)
	if err != nil {
		return core.InboxResult{}, err
	}
	if s.dialect.OneStatement {
		return s.inboxRecordOne(ctx, p, in.now, in.events, in.run)
	}
	var res core.InboxResult
	err = s.inTx(ctx, "inbox record", func(t *tx) error {
		var err error
		res, err = in.write(ctx, t)
		return err
	})
	return res, err
}

// inbox is one InboxRecord prepared for writing: what the event starts,
// prepared before the write so every write path stores the same rows.
type inbox struct {
	p      core.InboxRecordParams
	now    time.Time
	run    *core.Run
	events []core.RunEvent
}

func prepareInbox(p core.InboxRecordParams) (*inbox, error) {
	ev := p.Event
	if ev.Channel == "" || ev.EventID == "" {
		return nil, errors.New("store: inbox record: event channel and id are required")
	}
	in := &inbox{p: p, now: orNow(ev.ReceivedAt), events: p.Events}
	if p.Run != nil {
		r := *p.Run
		r.Status = core.RunQueued
		if r.CreatedAt.IsZero() {
			r.CreatedAt = in.now
		}
		r.EventChannel, r.EventID = ev.Channel, ev.EventID
		in.run = &r
		if !slices.ContainsFunc(in.events, func(e core.RunEvent) bool {
			return e.Type == core.EventRunQueued && (e.RunID == "" || e.RunID == r.ID)
		}) {
			data, _ := json.Marshal(map[string]any{"flow": r.Flow, "thread": threadString(r.Thread)})
			in.events = append(slices.Clip(in.events), core.RunEvent{RunID: r.ID, Type: core.EventRunQueued, Data: data, At: r.CreatedAt})
		}
	}
	return in, nil
}

// write records the event and what it starts inside t: the event insert
// deduplicates, then the run, replies, audit entries and run events.
// A schedule's tick writes its inbox record this way, in its own
// transaction (schedules.go).
func (in *inbox) write(ctx context.Context, t *tx) (core.InboxResult, error) {
	ev, p := in.p.Event, in.p
	var runID string
	if in.run != nil {
		runID = in.run.ID
	}
	r, err := t.exec(ctx, `INSERT INTO events (channel, event_id, run_id, actor, thread, received_at, raw, text)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (channel, event_id) DO NOTHING`,
		ev.Channel, ev.EventID, nullString(runID), ev.Actor.ID, threadString(ev.Thread), micros(in.now), []byte(ev.Raw), ev.Text)
	if err != nil {
		return core.InboxResult{}, fmt.Errorf("store: inbox record: insert event: %w", err)
	}
	if n, err := r.RowsAffected(); err != nil {
		return core.InboxResult{}, fmt.Errorf("store: inbox record: %w", err)
	} else if n == 0 {
		var first sql.NullString
		if err := t.queryRow(ctx, `SELECT run_id FROM events WHERE channel = ? AND event_id = ?`,
			ev.Channel, ev.EventID).Scan(&first); err != nil {
			return core.InboxResult{}, mapErr(err, "inbox record: read duplicate", "event")
		}
		return core.InboxResult{Duplicate: true, RunID: first.String}, nil
	}
	if in.run != nil {
		if err := insertRun(ctx, t, in.run); err != nil {
			return core.InboxResult{}, err
		}
		t.notify(core.TopicRuns)
	}
	if err := insertOutbox(ctx, t, in.now, p.Replies...); err != nil {
		return core.InboxResult{}, err
	}
	if err := appendAudit(ctx, t, p.Audit); err != nil {
		return core.InboxResult{}, err
	}
	if err := appendEvents(ctx, t, in.events, runID, in.now); err != nil {
		return core.InboxResult{}, err
	}
	return core.InboxResult{RunID: runID}, nil
}

func insertRun(ctx context.Context, t *tx, r *core.Run) error {
	args, err := json.Marshal(r.Args)
	if err != nil {
		return fmt.Errorf("store: insert run %s: args: %w", r.ID, err)
	}
	_, err = t.exec(ctx, `INSERT INTO runs (id, flow, thread, requester, status, args, reason, step_index,
		event_channel, event_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.ID, r.Flow, threadString(r.Thread), r.Requester, string(r.Status), string(args), r.Reason, r.StepIndex,
		r.EventChannel, r.EventID, micros(r.CreatedAt), micros(r.CreatedAt))
	if err != nil {
		return fmt.Errorf("store: insert run %s: %w", r.ID, err)
	}
	return nil
}

// appendEvents inserts run events (defaulting RunID and At) in one
// statement and marks each run's stream to be announced.
func appendEvents(ctx context.Context, t *tx, events []core.RunEvent, runID string, now time.Time) error {
	if len(events) == 0 {
		return nil
	}
	args := make([]any, 0, len(events)*4)
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
		args = append(args, e.RunID, e.Type, data, micros(e.At))
		t.notifyRun(e.RunID)
	}
	// Rows get their seq in VALUES order, so a stream keeps its order.
	if _, err := t.exec(ctx, `INSERT INTO run_events (run_id, type, data, at) VALUES `+valueRows(len(events), 4), args...); err != nil {
		return fmt.Errorf("store: append %d run events (%s…): %w", len(events), events[0].Type, err)
	}
	return nil
}

// RunClaim implements core.RunStore. The select is the whole scheduling
// rule: a queued run goes only when its thread holds no active run and no
// older queued run; a running run goes when its lease has expired.
func (s *Store) RunClaim(ctx context.Context, p core.RunClaimParams) ([]*core.Run, error) {
	if p.Limit <= 0 || p.Owner == "" {
		return nil, errors.New("store: run claim: owner and a positive limit are required")
	}
	var runs []*core.Run
	err := s.inTx(ctx, "run claim", func(t *tx) error {
		// Select and take in one statement; the subquery's row locks (SKIP
		// LOCKED on Postgres) keep concurrent claimers off the same rows.
		rows, err := t.query(ctx, runClaimSQL(t.d),
			string(core.RunRunning), p.Owner, micros(p.LeaseUntil), micros(p.Now), micros(p.Now), p.Limit)
		if err != nil {
			return fmt.Errorf("store: run claim: %w", err)
		}
		seqs := map[*core.Run]int64{}
		for rows.Next() {
			r, seq, err := scanRun(rows)
			if err != nil {
				rows.Close()
				return fmt.Errorf("store: run claim: %w", err)
			}
			runs = append(runs, r)
			seqs[r] = seq
		}
		if err := closeRows(rows); err != nil {
			return fmt.Errorf("store: run claim: %w", err)
		}
		if len(runs) == 0 {
			return nil
		}
		slices.SortFunc(runs, func(a, b *core.Run) int { return cmp.Compare(seqs[a], seqs[b]) })
		return loadSteps(ctx, t, runs)
	})
	if err != nil {
		return nil, err
	}
	return runs, nil
}

// runClaimSQL is RunClaim's statement. The statuses are literals, not
// parameters: the planner uses a partial index only when the query's own
// predicate implies the index's, which a parameter (in a generic plan, or
// in SQLite) never does. runs_claimable (migration 0016) then holds only
// queued and running runs, and runs_thread_active only a thread's active
// and queued ones, so a claim reads the same few index entries whether 10
// or 10 million finished runs lie behind them. TestClaimLiterals checks the
// literals against the core's statuses.
func runClaimSQL(d Dialect) string {
	return `UPDATE runs SET status = ?, owner = ?, lease_until = ?, updated_at = ?
		WHERE id IN (SELECT r.id FROM runs r` + d.indexedBy("runs_claimable") + `
			WHERE r.status IN ('queued', 'running')
			  AND ((r.status = 'queued' AND NOT EXISTS (
					SELECT 1 FROM runs o` + d.indexedBy("runs_thread_active") + ` WHERE o.thread = r.thread
					AND o.status IN ('queued', 'running', 'waiting_approval', 'waiting_input')
					AND (o.status <> 'queued' OR o.seq < r.seq)))
			   OR (r.status = 'running' AND r.lease_until < ?))
			ORDER BY r.seq LIMIT ?` + d.SkipLocked + `)
		RETURNING ` + runColumns
}

// RunHeartbeat implements core.RunStore: one statement for every listed
// run, guarded by owner and status, so a run that moved on (released,
// cancelled, taken over after its lease lapsed) is not touched.
func (s *Store) RunHeartbeat(ctx context.Context, p core.RunHeartbeatParams) error {
	if p.Owner == "" {
		return errors.New("store: run heartbeat: owner is required")
	}
	if len(p.RunIDs) == 0 {
		return nil
	}
	return s.inTx(ctx, "run heartbeat", func(t *tx) error {
		args := []any{micros(p.LeaseUntil), p.Owner, string(core.RunRunning)}
		for _, id := range p.RunIDs {
			args = append(args, id)
		}
		if _, err := t.exec(ctx, `UPDATE runs SET lease_until = ? WHERE owner = ? AND status = ? AND id IN (`+
			placeholders(len(p.RunIDs))+`)`, args...); err != nil {
			return fmt.Errorf("store: run heartbeat: %w", err)
		}
		return nil
	})
}

// RunCheckpoint implements core.RunStore. Audit entries are appended last,
// so the transaction takes the audit lock after the run's row lock, the same
// order ApprovalDecide uses.
func (s *Store) RunCheckpoint(ctx context.Context, c core.Checkpoint) error {
	now := orNow(c.Now)
	if s.dialect.OneStatement {
		return s.runCheckpointOne(ctx, c, now)
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

// RunGet implements core.RunStore.
//
// One statement (the run LEFT JOIN its steps), not a read transaction of
// two: RunGet serves every API read of a run and every wake-up of its event
// stream, and a transaction would cost four round trips instead of one.
func (s *Store) RunGet(ctx context.Context, id string) (*core.Run, error) {
	rows, err := s.read.QueryContext(ctx, s.dialect.Rebind(`SELECT `+qualifiedRunColumns+`,
		st.idx, st.tool, st.status, st.args, st.output, st.error, st.approval_id, st.idempotency_key,
		st.attempts, st.started_at, st.finished_at
		FROM runs r LEFT JOIN steps st ON st.run_id = r.id WHERE r.id = ? ORDER BY st.idx`), id)
	if err != nil {
		return nil, fmt.Errorf("store: run get: %w", err)
	}
	defer rows.Close()
	var run *core.Run
	for rows.Next() {
		var r core.Run
		var rc runCols
		var idx, attempts, started, finished sql.NullInt64
		var tool, status, args, output, serr, approvalID, key sql.NullString
		if err := rows.Scan(append(rc.dest(&r), &idx, &tool, &status, &args, &output, &serr, &approvalID, &key,
			&attempts, &started, &finished)...); err != nil {
			return nil, fmt.Errorf("store: run get: %w", err)
		}
		if run == nil {
			if err := rc.finish(&r); err != nil {
				return nil, fmt.Errorf("store: run get: %w", err)
			}
			run = &r
		}
		if !idx.Valid {
			continue // a run without steps: the one row has NULL step columns
		}
		st := core.Step{Index: int(idx.Int64), Tool: tool.String, Status: core.StepStatus(status.String), Output: output.String,
			Error: serr.String, ApprovalID: approvalID.String, IdempotencyKey: key.String, Attempts: int(attempts.Int64),
			StartedAt: optMicros(started), FinishedAt: optMicros(finished)}
		if err := json.Unmarshal([]byte(args.String), &st.Args); err != nil {
			return nil, fmt.Errorf("store: run get: run %s step %d args: %w", id, st.Index, err)
		}
		run.Steps = append(run.Steps, st)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: run get: %w", err)
	}
	if run == nil {
		return nil, mapErr(sql.ErrNoRows, "run get", "run "+id)
	}
	return run, nil
}

const runColumns = `id, flow, thread, requester, status, args, reason, step_index, error_code, error_message,
	event_channel, event_id, owner, lease_until, created_at, updated_at, seq`

// qualifiedRunColumns is runColumns for a query that joins runs as r.
var qualifiedRunColumns = "r." + strings.Join(strings.Split(strings.Join(strings.Fields(runColumns), " "), ", "), ", r.")

// runCols holds the raw values of runColumns while a row is scanned.
type runCols struct {
	thread, status, args string
	owner                sql.NullString
	lease                sql.NullInt64
	created, updated     int64
	seq                  int64
}

// dest returns the scan destinations of runColumns, in order, into r and c.
func (c *runCols) dest(r *core.Run) []any {
	return []any{&r.ID, &r.Flow, &c.thread, &r.Requester, &c.status, &c.args, &r.Reason, &r.StepIndex,
		&r.ErrorCode, &r.ErrorMessage, &r.EventChannel, &r.EventID, &c.owner, &c.lease, &c.created, &c.updated, &c.seq}
}

// finish decodes the raw values into r.
func (c *runCols) finish(r *core.Run) error {
	th, err := parseThread(c.thread)
	if err != nil {
		return fmt.Errorf("run %s: %w", r.ID, err)
	}
	if err := json.Unmarshal([]byte(c.args), &r.Args); err != nil {
		return fmt.Errorf("run %s: args: %w", r.ID, err)
	}
	r.Thread, r.Status, r.Owner = th, core.RunStatus(c.status), c.owner.String
	if c.lease.Valid {
		r.LeaseUntil = fromMicros(c.lease.Int64)
	}
	r.CreatedAt, r.UpdatedAt = fromMicros(c.created), fromMicros(c.updated)
	r.Steps = []core.Step{}
	return nil
}

// scanRun reads one row of runColumns.
func scanRun(rows *sql.Rows) (*core.Run, int64, error) {
	var r core.Run
	var c runCols
	if err := rows.Scan(c.dest(&r)...); err != nil {
		return nil, 0, err
	}
	if err := c.finish(&r); err != nil {
		return nil, 0, err
	}
	return &r, c.seq, nil
}

// loadSteps reads the steps of runs, in index order, into each run.
func loadSteps(ctx context.Context, t *tx, runs []*core.Run) error {
	args := make([]any, len(runs))
	byID := make(map[string]*core.Run, len(runs))
	for i, r := range runs {
		args[i], byID[r.ID] = r.ID, r
	}
	rows, err := t.query(ctx, `SELECT run_id, idx, tool, status, args, output, error, approval_id, idempotency_key,
		attempts, started_at, finished_at FROM steps WHERE run_id IN (`+placeholders(len(runs))+`) ORDER BY run_id, idx`, args...)
	if err != nil {
		return fmt.Errorf("store: load steps: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var runID, status, stepArgs string
		var st core.Step
		var started, finished sql.NullInt64
		if err := rows.Scan(&runID, &st.Index, &st.Tool, &status, &stepArgs, &st.Output, &st.Error, &st.ApprovalID,
			&st.IdempotencyKey, &st.Attempts, &started, &finished); err != nil {
			return fmt.Errorf("store: load steps: %w", err)
		}
		if err := json.Unmarshal([]byte(stepArgs), &st.Args); err != nil {
			return fmt.Errorf("store: load steps: run %s step %d args: %w", runID, st.Index, err)
		}
		st.Status, st.StartedAt, st.FinishedAt = core.StepStatus(status), optMicros(started), optMicros(finished)
		if r := byID[runID]; r != nil {
			r.Steps = append(r.Steps, st)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: load steps: %w", err)
	}
	return nil
}

// RunList implements core.RunStore: newest first; the cursor is the last
// item's queue position. Runs are listed without their steps (RunGet has
// them), keeping a page one query.
func (s *Store) RunList(ctx context.Context, p core.RunListParams) ([]*core.Run, string, error) {
	limit := pageLimit(p.Limit)
	where, args := "1 = 1", []any{}
	if p.Status != "" {
		where += runStatusWhere(p.Status)
		args = append(args, string(p.Status))
	}
	if p.Thread != "" {
		where += " AND thread = ?"
		args = append(args, p.Thread)
	}
	if p.IDPrefix != "" {
		w, a := prefixMatch("id", p.IDPrefix)
		where, args = where+w, append(args, a...)
	}
	if p.Channel != "" {
		w, a := prefixMatch("thread", p.Channel+":")
		where, args = where+w, append(args, a...)
	}
	if p.Flow != "" {
		where += " AND flow = ?"
		args = append(args, p.Flow)
	}
	if p.Requester != "" {
		where += " AND requester = ?"
		args = append(args, p.Requester)
	}
	if p.Cursor != "" {
		c, err := strconv.ParseInt(p.Cursor, 10, 64)
		if err != nil {
			return nil, "", fmt.Errorf("store: run list: bad cursor %q", p.Cursor)
		}
		where += " AND seq < ?"
		args = append(args, c)
	}
	rows, err := s.read.QueryContext(ctx, s.dialect.Rebind(runListSQL(where)), append(args, limit+1)...)
	if err != nil {
		return nil, "", fmt.Errorf("store: run list: %w", err)
	}
	defer rows.Close()
	items := []*core.Run{}
	var seqs []int64
	for rows.Next() {
		r, seq, err := scanRun(rows)
		if err != nil {
			return nil, "", fmt.Errorf("store: run list: %w", err)
		}
		items, seqs = append(items, r), append(seqs, seq)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("store: run list: %w", err)
	}
	items, next := page(items, seqs, limit)
	return items, next, nil
}

// runListSQL is RunList's statement for a WHERE clause.
func runListSQL(where string) string {
	return `SELECT ` + runColumns + ` FROM runs WHERE ` + where + ` ORDER BY seq DESC LIMIT ?`
}

// runStatusWhere is RunList's status filter. Besides the status (a
// parameter), it spells the predicate of the partial index that holds runs
// of that status, exactly as the migrations do: a parameter never implies a
// partial index's predicate (not in a Postgres generic plan, not in SQLite,
// which matches the predicate's text), so without it a list of queued runs
// or the question sweep's waiting_input runs would walk the primary key
// through every finished run. Queued and running runs are listed from
// runs_claimable (migration 0016), every other status but succeeded from
// runs_status (migration 0019); succeeded runs, the bulk of the table, from
// the primary key, where a page is the newest rows. TestStatusLiterals
// checks the literals against the core's statuses.
func runStatusWhere(st core.RunStatus) string {
	switch st {
	case core.RunQueued, core.RunRunning:
		return " AND status = ? AND status IN ('queued', 'running')"
	case core.RunSucceeded:
		return " AND status = ?"
	}
	return " AND status = ? AND status NOT IN ('queued', 'running', 'succeeded')"
}

// RunEventList implements core.RunStore. Every append to a run's stream
// holds that run's row lock (InboxRecord creates the row, RunCheckpoint and
// ApprovalDecide lock it), so within one run events commit in seq order and
// resuming after a seq never skips an event committed later.
func (s *Store) RunEventList(ctx context.Context, runID string, after int64, limit int) ([]core.RunEvent, error) {
	rows, err := s.read.QueryContext(ctx, s.dialect.Rebind(`SELECT seq, run_id, type, data, at FROM run_events
		WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?`), runID, after, pageLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("store: run event list: %w", err)
	}
	defer rows.Close()
	out := []core.RunEvent{}
	for rows.Next() {
		var e core.RunEvent
		var data sql.NullString
		var at int64
		if err := rows.Scan(&e.Seq, &e.RunID, &e.Type, &data, &at); err != nil {
			return nil, fmt.Errorf("store: run event list: %w", err)
		}
		if data.Valid {
			e.Data = json.RawMessage(data.String)
		}
		e.At = fromMicros(at)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: run event list: %w", err)
	}
	return out, nil
}

// Page sizes: a caller's 0 means the default; larger asks are capped so one
// request cannot pull a whole table.
const (
	defaultPage = 100
	maxPage     = 1000
)

func pageLimit(n int) int {
	if n <= 0 {
		return defaultPage
	}
	return min(n, maxPage)
}

// page trims a limit+1 result to limit and returns the cursor of the next
// page ("" when this is the last).
func page[T any](items []T, seqs []int64, limit int) ([]T, string) {
	if len(items) <= limit {
		return items, ""
	}
	return items[:limit], strconv.FormatInt(seqs[limit-1], 10)
}

func scanStrings(rows *sql.Rows) ([]string, error) {
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

func closeRows(rows *sql.Rows) error {
	err := rows.Err()
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	return err
}

// prefixMatch is a WHERE fragment keeping rows whose col starts with
// prefix: an exact, case-sensitive comparison of the first characters on
// both backends (LIKE is case-insensitive in SQLite and treats _ and % as
// wildcards), with no escaping to get wrong.
func prefixMatch(col, prefix string) (string, []any) {
	return " AND substr(" + col + ", 1, ?) = ?", []any{len([]rune(prefix)), prefix}
}
