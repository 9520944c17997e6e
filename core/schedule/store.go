package schedule

import (
	"context"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// Store is what the scheduler keeps in the database (store/sqlite and
// store/postgres implement it; store/storetest holds its cases). Every
// method that changes state does so in one transaction.
type Store interface {
	// ScheduleStates returns the stored state of every schedule ever
	// configured, in name order.
	ScheduleStates(ctx context.Context) ([]State, error)
	// ScheduleInit creates a schedule's state with p.NextAt unless it
	// exists. A state computed from another Spec (the cron or timezone
	// changed) takes p.Spec and p.NextAt; otherwise it is left alone, so
	// its next tick, pause and last run survive restarts. It returns the
	// state as stored.
	ScheduleInit(ctx context.Context, p InitParams) (State, error)
	// ScheduleTick handles one tick in one transaction: the guard (for a
	// cron tick: the state still expects p.ExpectNextAt and is not
	// paused, else core.ErrConflict; a manual run only needs the state,
	// else core.ErrNotFound), then p.Inbox recorded exactly as
	// core.RunStore.InboxRecord records it, the tick's row (unique on
	// schedule and tick time: a tick handled before changes nothing and
	// returns Duplicate), the state moved on (next tick, last fire and
	// run) and p.Audit appended.
	ScheduleTick(ctx context.Context, p TickParams) (TickResult, error)
	// SchedulePause pauses or resumes a schedule, with p.Audit, in one
	// transaction; resuming sets the next tick to p.NextAt. A schedule
	// already so changes nothing and reports changed false;
	// core.ErrNotFound for a schedule without state.
	SchedulePause(ctx context.Context, p PauseParams) (st State, changed bool, err error)
	// ScheduleTickList returns a schedule's latest ticks, newest first.
	ScheduleTickList(ctx context.Context, name string, limit int) ([]Tick, error)
	// RunGet reads a schedule's previous run for the overlap policy.
	RunGet(ctx context.Context, id string) (*core.Run, error)
}

// State is what the store keeps of one schedule.
type State struct {
	Name string
	// Spec is the cron and timezone NextAt was computed from (specKey).
	Spec string
	// NextAt is the first tick not yet handled.
	NextAt time.Time
	// LastAt is the latest tick (or manual run) that fired; zero if none.
	LastAt time.Time
	// LastRunID is the run the latest firing tick started, if any.
	LastRunID string
	Paused    bool
	// PausedBy is who paused it (while Paused).
	PausedBy  string
	UpdatedAt time.Time
}

// TickStatus says what became of a tick.
type TickStatus string

// The tick statuses.
const (
	// TickFired: its event was recorded (RunID is the run it started; a
	// text that matches no flow and no default agent gets the help reply
	// and starts none).
	TickFired TickStatus = "fired"
	// TickRefused: the schedule may not start runs in its thread's
	// channel (channels.<name>.requesters), or its agent is gone; the
	// refusal was recorded and nothing started.
	TickRefused TickStatus = "refused"
	// TickSkipped: the overlap policy skipped it (Reason says why).
	TickSkipped TickStatus = "skipped"
	// TickMissed: found too late under missed: skip.
	TickMissed TickStatus = "missed"
)

// Tick is one handled tick: the row that makes it happen once.
type Tick struct {
	Schedule string     `json:"schedule"`
	At       time.Time  `json:"at"`
	Status   TickStatus `json:"status"`
	Reason   string     `json:"reason,omitempty"`
	RunID    string     `json:"run_id,omitempty"`
	// Missed counts the earlier ticks this one passed over (they were
	// due while no replica was up).
	Missed int `json:"missed,omitempty"`
	// By is who ran it by hand; "" for a cron tick.
	By string `json:"by,omitempty"`
	// Owner is the replica that handled it.
	Owner     string    `json:"owner"`
	CreatedAt time.Time `json:"created_at"`
}

// InitParams creates or resets a schedule's state.
type InitParams struct {
	Name, Spec string
	NextAt     time.Time
	Now        time.Time
}

// TickParams handles one tick (see Store.ScheduleTick).
type TickParams struct {
	Tick Tick
	// ExpectNextAt guards a cron tick: the stored next tick must still be
	// it. Zero for a manual run, which leaves the next tick alone.
	ExpectNextAt time.Time
	// NextAt is the stored next tick after a cron tick.
	NextAt time.Time
	// Inbox, when set, is the tick's event and what it starts.
	Inbox *core.InboxRecordParams
	Audit []approvals.AuditEntry
}

// TickResult says what ScheduleTick did.
type TickResult struct {
	// Duplicate: the tick was handled before; nothing was written.
	Duplicate bool
	// RunID is the run the tick started, if any.
	RunID string
}

// PauseParams pauses (Paused) or resumes a schedule.
type PauseParams struct {
	Name   string
	Paused bool
	// NextAt is the next tick after a resume: ticks that passed while
	// paused are not run.
	NextAt time.Time
	By     string
	Audit  []approvals.AuditEntry
	Now    time.Time
}
