package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/schedule"
)

var _ schedule.Store = (*Store)(nil)

const scheduleColumns = `name, spec, next_at, last_at, last_run_id, paused, paused_by, updated_at`

func scanSchedule(r rowScanner) (schedule.State, error) {
	var st schedule.State
	var next, updated int64
	var last sql.NullInt64
	var lastRun sql.NullString
	if err := r.Scan(&st.Name, &st.Spec, &next, &last, &lastRun, &st.Paused, &st.PausedBy, &updated); err != nil {
		return schedule.State{}, err
	}
	st.NextAt, st.UpdatedAt, st.LastRunID = fromMicros(next), fromMicros(updated), lastRun.String
	if last.Valid {
		st.LastAt = fromMicros(last.Int64)
	}
	return st, nil
}

// ScheduleStates implements schedule.Store.
func (s *Store) ScheduleStates(ctx context.Context) ([]schedule.State, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+scheduleColumns+` FROM schedules ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("store: schedule states: %w", err)
	}
	defer rows.Close()
	var out []schedule.State
	for rows.Next() {
		st, err := scanSchedule(rows)
		if err != nil {
			return nil, fmt.Errorf("store: schedule states: %w", err)
		}
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: schedule states: %w", err)
	}
	return out, nil
}

func getSchedule(ctx context.Context, t *tx, name string) (schedule.State, error) {
	st, err := scanSchedule(t.queryRow(ctx, `SELECT `+scheduleColumns+` FROM schedules WHERE name = ?`, name))
	if err != nil {
		return schedule.State{}, mapErr(err, "schedule get", "schedule "+name)
	}
	return st, nil
}

// ScheduleInit implements schedule.Store: one upsert that changes an
// existing row only when its spec differs.
func (s *Store) ScheduleInit(ctx context.Context, p schedule.InitParams) (schedule.State, error) {
	if p.Name == "" || p.Spec == "" || p.NextAt.IsZero() {
		return schedule.State{}, errors.New("store: schedule init: name, spec and next tick are required")
	}
	var st schedule.State
	err := s.inTx(ctx, "schedule init", func(t *tx) error {
		if _, err := t.exec(ctx, `INSERT INTO schedules (name, spec, next_at, updated_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET spec = excluded.spec, next_at = excluded.next_at, updated_at = excluded.updated_at
			WHERE schedules.spec <> excluded.spec`,
			p.Name, p.Spec, micros(p.NextAt), micros(orNow(p.Now))); err != nil {
			return fmt.Errorf("store: schedule init %s: %w", p.Name, err)
		}
		var err error
		st, err = getSchedule(ctx, t, p.Name)
		return err
	})
	return st, err
}

// errTickHandled rolls a ScheduleTick transaction back when its tick's row
// exists: the tick was handled before.
var errTickHandled = errors.New("store: schedule tick handled before")

// ScheduleTick implements schedule.Store. The guarded update of the
// schedule's row comes first: it is the compare-and-set and it takes the
// row's lock, so replicas handling the same schedule queue there and the
// later ones find the tick handled.
func (s *Store) ScheduleTick(ctx context.Context, p schedule.TickParams) (schedule.TickResult, error) {
	tk := p.Tick
	if tk.Schedule == "" || tk.At.IsZero() || tk.Status == "" {
		return schedule.TickResult{}, errors.New("store: schedule tick: schedule, tick time and status are required")
	}
	var in *inbox
	if p.Inbox != nil {
		var err error
		if in, err = prepareInbox(*p.Inbox); err != nil {
			return schedule.TickResult{}, err
		}
	}
	now := orNow(tk.CreatedAt)
	var res schedule.TickResult
	err := s.inTx(ctx, "schedule tick", func(t *tx) error {
		if err := guardTick(ctx, t, p, now); err != nil {
			return err
		}
		if in != nil {
			r, err := in.write(ctx, t)
			if err != nil {
				return err
			}
			res.RunID = r.RunID
		}
		r, err := t.exec(ctx, `INSERT INTO schedule_ticks (schedule, tick_at, status, reason, run_id, missed, by_actor, owner, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (schedule, tick_at) DO NOTHING`,
			tk.Schedule, micros(tk.At), string(tk.Status), tk.Reason, nullString(res.RunID), tk.Missed, tk.By, tk.Owner, micros(now))
		if err != nil {
			return fmt.Errorf("store: schedule tick %s: insert tick: %w", tk.Schedule, err)
		}
		if n, err := r.RowsAffected(); err != nil {
			return fmt.Errorf("store: schedule tick %s: %w", tk.Schedule, err)
		} else if n == 0 {
			return errTickHandled
		}
		if tk.Status == schedule.TickFired {
			if _, err := t.exec(ctx, `UPDATE schedules SET last_at = ?, last_run_id = COALESCE(?, last_run_id) WHERE name = ?`,
				micros(tk.At), nullString(res.RunID), tk.Schedule); err != nil {
				return fmt.Errorf("store: schedule tick %s: last fire: %w", tk.Schedule, err)
			}
		}
		return appendAudit(ctx, t, p.Audit)
	})
	if errors.Is(err, errTickHandled) {
		return schedule.TickResult{Duplicate: true}, nil
	}
	if err != nil {
		return schedule.TickResult{}, err
	}
	return res, nil
}

// guardTick is ScheduleTick's compare-and-set: a cron tick moves next_at
// on only from the tick it expects and only while not paused; a manual
// run only touches the row (taking its lock).
func guardTick(ctx context.Context, t *tx, p schedule.TickParams, now time.Time) error {
	name := p.Tick.Schedule
	var r sql.Result
	var err error
	if p.ExpectNextAt.IsZero() {
		r, err = t.exec(ctx, `UPDATE schedules SET updated_at = ? WHERE name = ?`, micros(now), name)
	} else {
		if p.NextAt.IsZero() {
			return fmt.Errorf("store: schedule tick %s: a cron tick needs the next tick", name)
		}
		r, err = t.exec(ctx, `UPDATE schedules SET next_at = ?, updated_at = ? WHERE name = ? AND next_at = ? AND NOT paused`,
			micros(p.NextAt), micros(now), name, micros(p.ExpectNextAt))
	}
	if err != nil {
		return fmt.Errorf("store: schedule tick %s: update schedule: %w", name, err)
	}
	if n, err := r.RowsAffected(); err != nil {
		return fmt.Errorf("store: schedule tick %s: %w", name, err)
	} else if n > 0 {
		return nil
	}
	st, err := getSchedule(ctx, t, name)
	if err != nil {
		return err
	}
	return fmt.Errorf("store: schedule tick %s: next tick %s (paused %v), not %s: %w", name,
		st.NextAt.Format(time.RFC3339Nano), st.Paused, p.ExpectNextAt.Format(time.RFC3339Nano), core.ErrConflict)
}

// SchedulePause implements schedule.Store.
func (s *Store) SchedulePause(ctx context.Context, p schedule.PauseParams) (schedule.State, bool, error) {
	if p.Name == "" || (!p.Paused && p.NextAt.IsZero()) {
		return schedule.State{}, false, errors.New("store: schedule pause: name (and a next tick to resume at) required")
	}
	now := orNow(p.Now)
	var st schedule.State
	var changed bool
	err := s.inTx(ctx, "schedule pause", func(t *tx) error {
		var r sql.Result
		var err error
		if p.Paused {
			r, err = t.exec(ctx, `UPDATE schedules SET paused = ?, paused_by = ?, updated_at = ? WHERE name = ? AND paused <> ?`,
				true, p.By, micros(now), p.Name, true)
		} else {
			r, err = t.exec(ctx, `UPDATE schedules SET paused = ?, paused_by = '', next_at = ?, updated_at = ? WHERE name = ? AND paused <> ?`,
				false, micros(p.NextAt), micros(now), p.Name, false)
		}
		if err != nil {
			return fmt.Errorf("store: schedule pause %s: %w", p.Name, err)
		}
		n, err := r.RowsAffected()
		if err != nil {
			return fmt.Errorf("store: schedule pause %s: %w", p.Name, err)
		}
		if changed = n > 0; changed {
			if err := appendAudit(ctx, t, p.Audit); err != nil {
				return err
			}
		}
		st, err = getSchedule(ctx, t, p.Name)
		return err
	})
	if err != nil {
		return schedule.State{}, false, err
	}
	return st, changed, nil
}

// ScheduleTickList implements schedule.Store.
func (s *Store) ScheduleTickList(ctx context.Context, name string, limit int) ([]schedule.Tick, error) {
	rows, err := s.read.QueryContext(ctx, s.dialect.Rebind(`SELECT schedule, tick_at, status, reason, run_id, missed, by_actor, owner, created_at
		FROM schedule_ticks WHERE schedule = ? ORDER BY tick_at DESC LIMIT ?`), name, pageLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("store: schedule tick list: %w", err)
	}
	defer rows.Close()
	var out []schedule.Tick
	for rows.Next() {
		var tk schedule.Tick
		var at, created int64
		var status string
		var runID sql.NullString
		if err := rows.Scan(&tk.Schedule, &at, &status, &tk.Reason, &runID, &tk.Missed, &tk.By, &tk.Owner, &created); err != nil {
			return nil, fmt.Errorf("store: schedule tick list: %w", err)
		}
		tk.At, tk.CreatedAt, tk.Status, tk.RunID = fromMicros(at), fromMicros(created), schedule.TickStatus(status), runID.String
		out = append(out, tk)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: schedule tick list: %w", err)
	}
	return out, nil
}
