package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// ErrOverlap refuses a manual run the overlap policy holds back (the
// previous run is not final under overlap: skip, or one already waits
// under overlap: queue). The API answers it 409.
var ErrOverlap = errors.New("schedule: previous run still going")

// Status is one schedule as the console, the CLI and the API list it.
type Status struct {
	Name     string
	Cron     string
	Timezone string
	Thread   core.Thread
	Agent    string
	Missed   Missed
	Overlap  Overlap
	// NextAt is the next tick; zero while paused.
	NextAt time.Time
	// LastAt is the latest tick (or manual run) that fired; zero if none.
	LastAt    time.Time
	LastRunID string
	Paused    bool
	PausedBy  string
}

// List returns the configured schedules, in name order, with their stored
// state; one not stored yet shows its next tick from now.
func (s *Scheduler) List(ctx context.Context) ([]Status, error) {
	states, err := s.o.Store.ScheduleStates(ctx)
	if err != nil {
		return nil, fmt.Errorf("schedule: list: %w", err)
	}
	byName := make(map[string]State, len(states))
	for _, st := range states {
		byName[st.Name] = st
	}
	now := s.now()
	var out []Status
	for _, en := range s.entries() {
		st, ok := byName[en.Name]
		if !ok || st.Spec != en.key {
			st = State{Name: en.Name, NextAt: en.spec.Next(now), LastAt: st.LastAt, LastRunID: st.LastRunID,
				Paused: st.Paused, PausedBy: st.PausedBy}
		}
		out = append(out, en.status(st))
	}
	return out, nil
}

func (en *entry) status(st State) Status {
	out := Status{Name: en.Name, Cron: en.Cron, Timezone: en.Timezone, Thread: en.thread, Agent: en.Agent,
		Missed: en.Missed, Overlap: en.Overlap, NextAt: st.NextAt, LastAt: st.LastAt, LastRunID: st.LastRunID,
		Paused: st.Paused, PausedBy: st.PausedBy}
	if out.Timezone == "" {
		out.Timezone = "UTC"
	}
	if st.Paused {
		out.NextAt = time.Time{}
	}
	return out
}

// Get returns one configured schedule's status, or core.ErrNotFound.
func (s *Scheduler) Get(ctx context.Context, name string) (Status, error) {
	if _, err := s.entry(name); err != nil {
		return Status{}, err
	}
	all, err := s.List(ctx)
	if err != nil {
		return Status{}, err
	}
	for _, st := range all {
		if st.Name == name {
			return st, nil
		}
	}
	return Status{}, fmt.Errorf("schedule %q: %w", name, core.ErrNotFound)
}

// RunNow fires name once, now, as by asked (audited "schedule.run" in the
// tick's transaction), whether or not it is paused; the cron's next tick
// stays. The overlap policy applies: a run it holds back is ErrOverlap and
// writes nothing. The tick's event is "schedule:<name>:<now>", its run's
// requester "schedule:<name>" like every tick's.
func (s *Scheduler) RunNow(ctx context.Context, name string, by core.Actor) (Tick, error) {
	en, err := s.entry(name)
	if err != nil {
		return Tick{}, err
	}
	now := s.now()
	st, err := s.init(ctx, en, now)
	if err != nil {
		return Tick{}, err
	}
	at := now.Truncate(time.Microsecond) // what the store keeps
	p := TickParams{Tick: Tick{Schedule: name, At: at, By: by.ID, Owner: s.o.Owner, CreatedAt: now}}
	if err := s.prepare(ctx, en, st, &p, now); err != nil {
		return Tick{}, err
	}
	if p.Tick.Status == TickSkipped {
		return p.Tick, fmt.Errorf("schedule %s: %w: %s", name, ErrOverlap, p.Tick.Reason)
	}
	ae := audit(approvals.AuditScheduleRun, by.ID, at, map[string]any{
		"schedule": name, "tick_at": at.Format(time.RFC3339Nano), "status": p.Tick.Status})
	if p.Inbox != nil && p.Inbox.Run != nil {
		ae.RunID = p.Inbox.Run.ID
	}
	p.Audit = []approvals.AuditEntry{ae}
	res, err := s.o.Store.ScheduleTick(ctx, p)
	if err != nil {
		return Tick{}, fmt.Errorf("schedule %s: run now: %w", name, err)
	}
	if res.Duplicate {
		return Tick{}, fmt.Errorf("schedule %s: run now at %s: %w: a run at this instant exists; try again", name,
			at.Format(time.RFC3339Nano), core.ErrConflict)
	}
	p.Tick.RunID = res.RunID
	s.logTick(p.Tick, res.RunID)
	return p.Tick, nil
}

// Pause stops name's ticks until Resume, as by asked (audited
// "schedule.paused"); the pause is stored, so it holds across restarts and
// on every replica. Pausing a paused schedule changes nothing.
func (s *Scheduler) Pause(ctx context.Context, name string, by core.Actor) (Status, error) {
	return s.pause(ctx, name, by, true)
}

// Resume starts name's ticks again from its next tick after now (ticks
// that passed while paused are not run), as by asked (audited
// "schedule.resumed").
func (s *Scheduler) Resume(ctx context.Context, name string, by core.Actor) (Status, error) {
	return s.pause(ctx, name, by, false)
}

func (s *Scheduler) pause(ctx context.Context, name string, by core.Actor, paused bool) (Status, error) {
	en, err := s.entry(name)
	if err != nil {
		return Status{}, err
	}
	now := s.now()
	if _, err := s.init(ctx, en, now); err != nil {
		return Status{}, err
	}
	kind := approvals.AuditScheduleResumed
	if paused {
		kind = approvals.AuditSchedulePaused
	}
	next := en.spec.Next(now)
	st, changed, err := s.o.Store.SchedulePause(ctx, PauseParams{Name: name, Paused: paused, NextAt: next, By: by.ID, Now: now,
		Audit: []approvals.AuditEntry{audit(kind, by.ID, now, map[string]any{"schedule": name})}})
	if err != nil {
		return Status{}, fmt.Errorf("schedule %s: %s: %w", name, kind, err)
	}
	if changed {
		s.log.Info("schedule state changed", "schedule", name, "kind", kind, "by", by.ID)
		s.poke()
	}
	return en.status(st), nil
}

func audit(kind approvals.AuditKind, actor string, at time.Time, detail map[string]any) approvals.AuditEntry {
	b, _ := json.Marshal(detail) // strings and a time only
	return approvals.AuditEntry{At: at, Kind: kind, Actor: actor, Detail: b}
}
