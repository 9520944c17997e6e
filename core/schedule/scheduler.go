package schedule

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/opsgate/opsgate/core"
)

// Defaults of Options.
const (
	// DefaultMissedAfter is how late a tick may be found and still count
	// as on time: a restart or a deploy that takes less does not lose a
	// tick under missed: skip.
	DefaultMissedAfter = time.Minute
	// DefaultMaxWait bounds the wait between two looks at the stored
	// states, so a pause, resume or tick another replica handled is seen
	// well within DefaultMissedAfter.
	DefaultMaxWait = 30 * time.Second
	// retryWait is the wait after a look the store did not answer.
	retryWait = time.Second
)

// Inbox turns a tick's message into the record the engine writes for a
// chat message (core/engine implements it): judged (may the schedule
// start runs in the thread's channel: refused), then routed (a flow
// command, a prompt for the default agent, the help reply) or, with agent
// set, a turn of that agent.
type Inbox interface {
	PrepareEvent(ev core.ChannelEvent, agent string) (p core.InboxRecordParams, refused bool, err error)
}

// Options configures New. Store and Inbox are required.
type Options struct {
	Store Store
	Inbox Inbox
	// Owner names this replica on the ticks it handles.
	Owner string
	// Now and After are the clock (tests inject one); default time.Now
	// and time.After.
	Now   func() time.Time
	After func(d time.Duration) <-chan time.Time
	// MissedAfter and MaxWait: see the defaults.
	MissedAfter time.Duration
	MaxWait     time.Duration
	Logger      *slog.Logger
}

// Scheduler fires the configured schedules' ticks (Run) and serves the
// operators' list, pause, resume and manual run. It is safe for concurrent
// use; Set swaps the schedules on a configuration reload.
type Scheduler struct {
	o   Options
	log *slog.Logger
	mu  sync.Mutex
	set map[string]*entry
	// wake makes Run look again now (Set, Resume).
	wake chan struct{}
}

// entry is one configured schedule, parsed.
type entry struct {
	Schedule
	spec   Spec
	key    string
	thread core.Thread
}

// New validates the schedules and builds a Scheduler.
func New(o Options, schedules []Schedule) (*Scheduler, error) {
	if o.Store == nil || o.Inbox == nil {
		return nil, errors.New("schedule: Options.Store and Options.Inbox are required")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.After == nil {
		o.After = time.After
	}
	if o.MissedAfter <= 0 {
		o.MissedAfter = DefaultMissedAfter
	}
	if o.MaxWait <= 0 {
		o.MaxWait = DefaultMaxWait
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Scheduler{o: o, log: o.Logger.With("component", "schedule"), wake: make(chan struct{}, 1)}
	if err := s.Set(schedules); err != nil {
		return nil, err
	}
	return s, nil
}

// Set replaces the schedules (a configuration reload): new ones start at
// their next tick, removed ones stop, a changed cron or timezone starts
// over from its next tick. Stored states stay, so a schedule removed and
// added back keeps its pause. Nothing changes if any schedule is invalid.
func (s *Scheduler) Set(schedules []Schedule) error {
	set := make(map[string]*entry, len(schedules))
	for i, sc := range schedules {
		if err := sc.Validate(); err != nil {
			return fmt.Errorf("schedule %d (%q): %w", i, sc.Name, err)
		}
		if _, dup := set[sc.Name]; dup {
			return fmt.Errorf("schedule %q: %w: duplicate name", sc.Name, ErrConfig)
		}
		loc, _ := LoadLocation(sc.Timezone)
		spec, _ := ParseCron(sc.Cron, loc)
		th, _ := core.ParseThread(sc.Thread)
		if sc.Missed == "" {
			sc.Missed = MissedSkip
		}
		if sc.Overlap == "" {
			sc.Overlap = OverlapSkip
		}
		set[sc.Name] = &entry{Schedule: sc, spec: spec, key: specKey(sc), thread: th}
	}
	s.mu.Lock()
	s.set = set
	s.mu.Unlock()
	s.poke()
	return nil
}

// specKey is what a stored state's next tick was computed from.
func specKey(sc Schedule) string { return sc.Cron + " | " + cmp.Or(sc.Timezone, "UTC") }

func (s *Scheduler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// entries returns the schedules in name order.
func (s *Scheduler) entries() []*entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*entry, 0, len(s.set))
	for _, en := range s.set {
		out = append(out, en)
	}
	slices.SortFunc(out, func(a, b *entry) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

func (s *Scheduler) entry(name string) (*entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if en := s.set[name]; en != nil {
		return en, nil
	}
	return nil, fmt.Errorf("schedule %q: %w", name, core.ErrNotFound)
}

func (s *Scheduler) now() time.Time { return s.o.Now().UTC() }

// Run fires ticks until ctx ends. Every replica runs it; the store makes
// each tick fire once.
func (s *Scheduler) Run(ctx context.Context) error {
	for {
		wait, err := s.pass(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			s.log.Error("schedules: look at the stored states", "err", err)
			wait = retryWait
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
		case <-s.o.After(wait):
		}
	}
}

// pass handles every due tick once and returns how long to wait for the
// next one (at most MaxWait).
func (s *Scheduler) pass(ctx context.Context) (time.Duration, error) {
	states, err := s.o.Store.ScheduleStates(ctx)
	if err != nil {
		return 0, err
	}
	byName := make(map[string]State, len(states))
	for _, st := range states {
		byName[st.Name] = st
	}
	now := s.now()
	next := now.Add(s.o.MaxWait)
	var errs []error
	for _, en := range s.entries() {
		st, ok := byName[en.Name]
		if ok && st.Spec != en.key {
			s.log.Warn("schedule's cron or timezone changed: starting over from its next tick (every replica must have the same schedules)",
				"schedule", en.Name, "stored", st.Spec, "here", en.key)
		}
		if !ok || st.Spec != en.key {
			if st, err = s.init(ctx, en, now); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if st.Paused {
			continue
		}
		if !now.Before(st.NextAt) {
			if st, err = s.fire(ctx, en, st, now); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if st.NextAt.Before(next) {
			next = st.NextAt
		}
	}
	return max(next.Sub(s.now()), 0), errors.Join(errs...)
}

// init returns en's stored state, storing it first at its next tick after
// now when it is missing or was computed from another cron or timezone.
func (s *Scheduler) init(ctx context.Context, en *entry, now time.Time) (State, error) {
	st, err := s.o.Store.ScheduleInit(ctx, InitParams{Name: en.Name, Spec: en.key, NextAt: en.spec.Next(now), Now: now})
	if err != nil {
		return State{}, fmt.Errorf("schedule %s: init: %w", en.Name, err)
	}
	return st, nil
}

// fire handles the due ticks of en (the state's next tick is at or before
// now) and returns the state as it now stands. A tick another replica
// handled meanwhile is no error: the state is read again.
func (s *Scheduler) fire(ctx context.Context, en *entry, st State, now time.Time) (State, error) {
	latest, passed, more := en.spec.due(st.NextAt, now)
	p := TickParams{
		Tick:         Tick{Schedule: en.Name, At: latest, Missed: passed, Owner: s.o.Owner, CreatedAt: now},
		ExpectNextAt: st.NextAt,
		NextAt:       en.spec.Next(latest),
	}
	late := now.Sub(latest) > s.o.MissedAfter
	switch {
	case late && en.Missed == MissedSkip:
		p.Tick.Status, p.Tick.Missed = TickMissed, passed+1
		p.Tick.Reason = fmt.Sprintf("found %s after its time, later than %s, with no replica up (missed: skip)",
			now.Sub(latest).Round(time.Second), s.o.MissedAfter)
	default:
		if err := s.prepare(ctx, en, st, &p, now); err != nil {
			return st, err
		}
	}
	if more {
		p.Tick.Reason = joinReason(p.Tick.Reason, fmt.Sprintf("at least %d earlier ticks passed while no replica was up", passed))
	}
	res, err := s.o.Store.ScheduleTick(ctx, p)
	switch {
	case errors.Is(err, core.ErrConflict) || err == nil && res.Duplicate:
		s.log.Debug("schedule tick handled elsewhere", "schedule", en.Name, "tick", latest)
		return s.reread(ctx, en.Name, st)
	case err != nil:
		return st, fmt.Errorf("schedule %s: tick %s: %w", en.Name, latest.Format(time.RFC3339), err)
	}
	s.logTick(p.Tick, res.RunID)
	st.NextAt, st.UpdatedAt = p.NextAt, now
	if p.Tick.Status == TickFired {
		st.LastAt = latest
		if res.RunID != "" {
			st.LastRunID = res.RunID
		}
	}
	return st, nil
}

func joinReason(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// reread returns name's stored state after another replica moved it.
func (s *Scheduler) reread(ctx context.Context, name string, old State) (State, error) {
	states, err := s.o.Store.ScheduleStates(ctx)
	if err != nil {
		return old, err
	}
	for _, st := range states {
		if st.Name == name {
			return st, nil
		}
	}
	return old, fmt.Errorf("schedule %s: state vanished: %w", name, core.ErrNotFound)
}

// prepare fills p with what the tick does under the overlap policy: skip
// it, or record its event and the run it starts.
func (s *Scheduler) prepare(ctx context.Context, en *entry, st State, p *TickParams, now time.Time) error {
	if why, err := s.overlaps(ctx, en, st); err != nil {
		return err
	} else if why != "" {
		p.Tick.Status, p.Tick.Reason = TickSkipped, why
		return nil
	}
	text := en.Text
	if en.Agent != "" {
		text = en.Prompt
	}
	ev := core.ChannelEvent{Channel: en.thread.Channel, EventID: EventID(en.Name, p.Tick.At),
		Actor: core.Actor{ID: Identity(en.Name), Name: en.Name}, Thread: en.thread, Text: text, ReceivedAt: now}
	rec, refused, err := s.o.Inbox.PrepareEvent(ev, en.Agent)
	switch {
	case errors.Is(err, core.ErrNotFound):
		// Its agent is gone (a reload removed it): say so on the tick
		// rather than fail every look.
		p.Tick.Status, p.Tick.Reason = TickRefused, err.Error()
		return nil
	case err != nil:
		return fmt.Errorf("schedule %s: prepare tick: %w", en.Name, err)
	case refused:
		p.Tick.Status, p.Tick.Reason = TickRefused, Identity(en.Name)+" may not start runs in channel "+en.thread.Channel+" (channels."+en.thread.Channel+".requesters)"
	default:
		p.Tick.Status = TickFired
	}
	p.Inbox = &rec
	return nil
}

// overlaps says why the overlap policy holds a tick back, or "".
func (s *Scheduler) overlaps(ctx context.Context, en *entry, st State) (string, error) {
	if st.LastRunID == "" {
		return "", nil
	}
	run, err := s.o.Store.RunGet(ctx, st.LastRunID)
	switch {
	case errors.Is(err, core.ErrNotFound):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("schedule %s: read previous run %s: %w", en.Name, st.LastRunID, err)
	case run.Status.Final():
		return "", nil
	case en.Overlap == OverlapQueue && run.Status != core.RunQueued:
		return "", nil
	case en.Overlap == OverlapQueue:
		return fmt.Sprintf("previous run %s is still queued (overlap: queue keeps one waiting)", run.ID), nil
	}
	return fmt.Sprintf("previous run %s is still %s (overlap: skip)", run.ID, run.Status), nil
}

func (s *Scheduler) logTick(t Tick, runID string) {
	attrs := []any{"schedule", t.Schedule, "tick", t.At.Format(time.RFC3339Nano), "status", t.Status}
	if runID != "" {
		attrs = append(attrs, "run", runID)
	}
	if t.Reason != "" {
		attrs = append(attrs, "reason", t.Reason)
	}
	if t.Missed > 0 {
		attrs = append(attrs, "missed", t.Missed)
	}
	if t.By != "" {
		attrs = append(attrs, "by", t.By)
	}
	switch t.Status {
	case TickFired:
		s.log.Info("schedule tick fired", attrs...)
	default:
		s.log.Warn("schedule tick did not start a run", attrs...)
	}
}
