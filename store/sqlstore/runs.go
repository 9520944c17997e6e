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

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/shortid"
)

// RunClaim implements core.RunStore. The select is the whole scheduling
// rule: a queued run goes only when its thread holds no active run and no
// older queued run; a running run goes when its lease has expired.
//
// On Postgres (Dialect.OneStatement) the claim and the claimed runs' steps
// are one statement outside a transaction block: one round trip instead of
// BEGIN, the claim, the steps and COMMIT, which under load each waited for
// a turn on a busy CPU while the claimed rows stayed locked. It is a lease,
// so it commits on Config.LeaseDB.
func (s *Store) RunClaim(ctx context.Context, p core.RunClaimParams) ([]*core.Run, error) {
	if p.Limit <= 0 || p.Owner == "" {
		return nil, errors.New("store: run claim: owner and a positive limit are required")
	}
	args := []any{p.Limit, micros(p.Now), p.Limit, p.Limit, string(core.RunRunning), p.Owner, micros(p.LeaseUntil), micros(p.Now)}
	if s.dialect.OneStatement {
		rows, err := s.lease.QueryContext(ctx, s.dialect.Rebind(runClaimStatement(s.dialect)), args...)
		if err != nil {
			return nil, s.classified(fmt.Errorf("store: run claim: %w", err))
		}
		runs, err := scanRunsWithSteps(rows)
		if err != nil {
			return nil, s.classified(fmt.Errorf("store: run claim: %w", err))
		}
		return runs, nil
	}
	var runs []*core.Run
	err := s.inTx(ctx, "run claim", func(t *tx) error {
		rows, err := t.query(ctx, runClaimStatement(t.d), args...)
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

// runClaimSQL is the common table expressions of RunClaim's statement,
// which picks the runs; runClaimUpdate follows and takes them. The
// statuses are literals, not parameters: the planner uses a partial index
// only when the query's own predicate implies the index's, which a
// parameter (in a generic plan, or in SQLite) never does.
//
// Its two branches read two indexes (migration 0031): q walks runs_queued,
// which holds only queued runs, in queue order, and asks runs_thread_active
// (0016) per candidate whether its thread is busy; l reads the range of
// runs_lease, running runs by lease, that has lapsed — usually nothing —
// oldest lease first (in seq order, the planner would rather walk
// runs_claimable past every executing run to skip a sort).
// Each locks what it picks (SKIP LOCKED on Postgres, so concurrent claimers
// take different rows); pick keeps the Limit oldest of both. A claim so
// reads the queued runs it returns plus the ones behind a busy thread,
// never the runs executing: before, one index held both and every claim
// walked past each executing run (issue 31: under load, most of what a
// claim read). TestClaimLiterals checks the literals against the core's
// statuses.
func runClaimSQL(d Dialect) string {
	return `WITH q AS (SELECT r.id, r.seq FROM runs r` + d.indexedBy("runs_queued") + `
			WHERE r.status = 'queued' AND NOT EXISTS (
				SELECT 1 FROM runs o` + d.indexedBy("runs_thread_active") + ` WHERE o.thread = r.thread
				AND o.status IN ('queued', 'running', 'waiting_approval', 'waiting_input')
				AND (o.status <> 'queued' OR o.seq < r.seq))
			ORDER BY r.seq LIMIT ?` + d.SkipLocked + `),
		l AS (SELECT r.id, r.seq FROM runs r` + d.indexedBy("runs_lease") + `
			WHERE r.status = 'running' AND r.lease_until < ?
			ORDER BY r.lease_until LIMIT ?` + d.SkipLocked + `),
		pick AS (SELECT c.id FROM (SELECT id, seq FROM q UNION ALL SELECT id, seq FROM l) AS c ORDER BY c.seq LIMIT ?)`
}

// runClaimStatement is RunClaim's statement as d runs it: returning the
// claimed runs' steps too where it is one statement (runClaimStepsSQL).
// Its parameters: the limit, now, the limit twice, then runClaimUpdate's.
func runClaimStatement(d Dialect) string {
	if d.OneStatement {
		return runClaimSQL(d) + runClaimStepsSQL
	}
	return runClaimSQL(d) + "\n" + runClaimUpdate + " RETURNING " + runColumns
}

// runClaimUpdate takes the runs runClaimSQL picked.
const runClaimUpdate = `UPDATE runs SET status = ?, owner = ?, lease_until = ?, updated_at = ? WHERE id IN (SELECT id FROM pick)`

// runClaimStepsSQL ends runClaimSQL on Postgres: the claimed runs joined
// with their steps, in queue and step order (the steps as they were before
// the claim, which does not change them).
var runClaimStepsSQL = `,
	claimed AS (` + runClaimUpdate + ` RETURNING ` + runColumns + `)
	SELECT ` + stepJoinColumns + ` FROM claimed r LEFT JOIN steps st ON st.run_id = r.id ORDER BY r.seq, st.idx`

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
		// A run waiting_input that keeps its owner is one whose tool call
		// waits in flight for a person's answer (core/engine's tool
		// questions): its lease is renewed like a running one's.
		args := []any{micros(p.LeaseUntil), p.Owner, string(core.RunRunning), string(core.RunWaitingInput)}
		for _, id := range p.RunIDs {
			args = append(args, id)
		}
		if _, err := t.exec(ctx, `UPDATE runs SET lease_until = ? WHERE owner = ? AND status IN (?, ?) AND id IN (`+
			placeholders(len(p.RunIDs))+`)`, args...); err != nil {
			return fmt.Errorf("store: run heartbeat: %w", err)
		}
		return nil
	})
}

// RunGet implements core.RunStore.
//
// One statement (the run LEFT JOIN its steps), not a read transaction of
// two: RunGet serves every API read of a run and every wake-up of its event
// stream, and a transaction would cost four round trips instead of one.
func (s *Store) RunGet(ctx context.Context, id string) (*core.Run, error) {
	rows, err := s.read.QueryContext(ctx, s.dialect.Rebind(`SELECT `+stepJoinColumns+`
		FROM runs r LEFT JOIN steps st ON st.run_id = r.id WHERE r.id = ? ORDER BY st.idx`), id)
	if err != nil {
		return nil, fmt.Errorf("store: run get: %w", err)
	}
	runs, err := scanRunsWithSteps(rows)
	if err != nil {
		return nil, fmt.Errorf("store: run get: %w", err)
	}
	if len(runs) == 0 {
		return nil, mapErr(sql.ErrNoRows, "run get", "run "+id)
	}
	return runs[0], nil
}

// stepJoinColumns are the columns of runs r LEFT JOIN steps st, which
// scanRunsWithSteps reads.
var stepJoinColumns = qualifiedRunColumns + `, st.idx, st.tool, st.status, st.args, st.output, st.error, st.approval_id,
	st.idempotency_key, st.attempts, st.started_at, st.finished_at`

// scanRunsWithSteps reads runs joined with their steps (stepJoinColumns),
// each run's rows together and its steps in order, and closes rows. A run
// without steps is one row with NULL step columns.
func scanRunsWithSteps(rows *sql.Rows) ([]*core.Run, error) {
	defer rows.Close()
	var runs []*core.Run
	var run *core.Run
	for rows.Next() {
		var r core.Run
		var rc runCols
		var idx, attempts, started, finished sql.NullInt64
		var tool, status, args, output, serr, approvalID, key sql.NullString
		if err := rows.Scan(append(rc.dest(&r), &idx, &tool, &status, &args, &output, &serr, &approvalID, &key,
			&attempts, &started, &finished)...); err != nil {
			return nil, err
		}
		if run == nil || run.ID != r.ID {
			if err := rc.finish(&r); err != nil {
				return nil, err
			}
			run = &r
			runs = append(runs, run)
		}
		if !idx.Valid {
			continue
		}
		st := core.Step{Index: int(idx.Int64), Tool: tool.String, Status: core.StepStatus(status.String), Output: output.String,
			Error: serr.String, ApprovalID: approvalID.String, IdempotencyKey: key.String, Attempts: int(attempts.Int64),
			StartedAt: optMicros(started), FinishedAt: optMicros(finished)}
		if err := json.Unmarshal([]byte(args.String), &st.Args); err != nil {
			return nil, fmt.Errorf("run %s step %d args: %w", run.ID, st.Index, err)
		}
		run.Steps = append(run.Steps, st)
	}
	return runs, rows.Err()
}

const runColumns = `id, flow, thread, requester, status, args, reason, step_index, error_code, error_message,
	event_channel, event_id, owner, lease_until, created_at, updated_at, seq, attachments`

// qualifiedRunColumns is runColumns for a query that joins runs as r.
var qualifiedRunColumns = "r." + strings.Join(strings.Split(strings.Join(strings.Fields(runColumns), " "), ", "), ", r.")

// runCols holds the raw values of runColumns while a row is scanned.
type runCols struct {
	thread, status, args string
	attachments          string
	owner                sql.NullString
	lease                sql.NullInt64
	created, updated     int64
	seq                  int64
}

// dest returns the scan destinations of runColumns, in order, into r and c.
func (c *runCols) dest(r *core.Run) []any {
	return []any{&r.ID, &r.Flow, &c.thread, &r.Requester, &c.status, &c.args, &r.Reason, &r.StepIndex,
		&r.ErrorCode, &r.ErrorMessage, &r.EventChannel, &r.EventID, &c.owner, &c.lease, &c.created, &c.updated, &c.seq, &c.attachments}
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
	if r.Attachments, err = parseAttachments(c.attachments); err != nil {
		return fmt.Errorf("run %s: %w", r.ID, err)
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
		w, a := idMatch(p.IDPrefix)
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

// idMatch keeps the ids that typed names, as shortid.Matches does: ids
// that start with it, and, for shortid.MinTyped characters or more, UUIDs
// whose random last group (from character 25) starts with it. The second
// test reads every row (no index serves it); these lookups are a person's
// typed id, not a hot path.
func idMatch(typed string) (string, []any) {
	n := len([]rune(typed))
	if n < shortid.MinTyped {
		return prefixMatch("id", typed)
	}
	return " AND (substr(id, 1, ?) = ? OR (length(id) = 36 AND substr(id, 25, ?) = ?))", []any{n, typed, n, typed}
}
