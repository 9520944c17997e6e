package storetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/schedule"
)

// schedules is the store's schedule side; every backend must have it.
func schedules(t *testing.T, s core.Store) schedule.Store {
	t.Helper()
	ss, ok := s.(schedule.Store)
	if !ok {
		t.Fatalf("%T does not implement schedule.Store", s)
	}
	return ss
}

// initSchedule stores a schedule's state with its next tick at next.
func initSchedule(t *testing.T, ss schedule.Store, name string, next time.Time) schedule.State {
	t.Helper()
	st, err := ss.ScheduleInit(ctx(t), schedule.InitParams{Name: name, Spec: "@every 1h | UTC", NextAt: next, Now: t0})
	if err != nil {
		t.Fatalf("ScheduleInit %s: %v", name, err)
	}
	return st
}

// newSchedule stores a fresh schedule whose next tick is due at t0 (on
// the second), with a thread of its own.
func newSchedule(t *testing.T, ss schedule.Store) (name string, th core.Thread, at time.Time) {
	t.Helper()
	name, th, at = newID("sched"), thread(newID("sched-th")), t0.Truncate(time.Second)
	initSchedule(t, ss, name, at)
	return name, th, at
}

// tickRecord is the inbox record of schedule name's tick at at: the event
// "schedule:<name>:<at>" in th starting a run requested by the schedule.
func tickRecord(name string, at time.Time, th core.Thread) *core.InboxRecordParams {
	ev := core.ChannelEvent{Channel: th.Channel, EventID: schedule.EventID(name, at),
		Actor: core.Actor{ID: schedule.Identity(name)}, Thread: th, Text: "cleanup tmp", ReceivedAt: t0}
	r := newRun(th)
	r.Requester = ev.Actor.ID
	return &core.InboxRecordParams{Event: ev, Run: r}
}

// cronTick handles name's cron tick at at, expecting the stored next tick
// at and moving it on an hour.
func cronTick(name string, at time.Time, th core.Thread) schedule.TickParams {
	return schedule.TickParams{
		Tick:         schedule.Tick{Schedule: name, At: at, Status: schedule.TickFired, Owner: "replica-a", CreatedAt: t0},
		ExpectNextAt: at, NextAt: at.Add(time.Hour), Inbox: tickRecord(name, at, th),
	}
}

// schedulesRuns returns the runs schedule name requested.
func schedulesRuns(t *testing.T, s core.Store, name string) []*core.Run {
	t.Helper()
	runs, _, err := s.RunList(ctx(t), core.RunListParams{Requester: schedule.Identity(name), Limit: 100})
	if err != nil {
		t.Fatalf("RunList: %v", err)
	}
	return runs
}

func stateOf(t *testing.T, ss schedule.Store, name string) schedule.State {
	t.Helper()
	states, err := ss.ScheduleStates(ctx(t))
	if err != nil {
		t.Fatalf("ScheduleStates: %v", err)
	}
	for _, st := range states {
		if st.Name == name {
			return st
		}
	}
	t.Fatalf("no state for schedule %s in %+v", name, states)
	return schedule.State{}
}

func testScheduleInit(t *testing.T, s core.Store) {
	ss := schedules(t, s)
	name := newID("sched")
	next := t0.Add(time.Hour).Truncate(time.Second)
	st := initSchedule(t, ss, name, next)
	if st.Name != name || !st.NextAt.Equal(next) || st.Paused || !st.LastAt.IsZero() || st.LastRunID != "" {
		t.Fatalf("new state = %+v", st)
	}
	// Same spec: a restart's init leaves the next tick alone.
	again := initSchedule(t, ss, name, next.Add(5*time.Hour))
	if !again.NextAt.Equal(next) {
		t.Errorf("init with the same spec moved the next tick to %s", again.NextAt)
	}
	// Another spec (the cron changed): it starts over.
	later := next.Add(24 * time.Hour)
	moved, err := ss.ScheduleInit(ctx(t), schedule.InitParams{Name: name, Spec: "0 3 * * * | Europe/Berlin", NextAt: later, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if moved.Spec != "0 3 * * * | Europe/Berlin" || !moved.NextAt.Equal(later) {
		t.Errorf("init with another spec = %+v", moved)
	}
	if got := stateOf(t, ss, name); !got.NextAt.Equal(later) {
		t.Errorf("ScheduleStates next = %s, want %s", got.NextAt, later)
	}
	if _, err := ss.ScheduleInit(ctx(t), schedule.InitParams{Name: name}); err == nil {
		t.Error("init without spec or next tick accepted")
	}
}

// testScheduleTickRecordsRunInSameTx: the tick's row, its event and run,
// the moved next tick and the last fire commit together; a tick handled
// before changes nothing.
func testScheduleTickRecordsRunInSameTx(t *testing.T, s core.Store) {
	ss := schedules(t, s)
	name, th, at := newSchedule(t, ss)
	p := cronTick(name, at, th)
	res, err := ss.ScheduleTick(ctx(t), p)
	if err != nil || res.Duplicate || res.RunID != p.Inbox.Run.ID {
		t.Fatalf("ScheduleTick = %+v, %v; want run %s", res, err, p.Inbox.Run.ID)
	}
	run := getRun(t, s, res.RunID)
	if run.Requester != schedule.Identity(name) || run.Status != core.RunQueued || run.EventID != schedule.EventID(name, at) {
		t.Errorf("run = requester %s status %s event %s", run.Requester, run.Status, run.EventID)
	}
	st := stateOf(t, ss, name)
	if !st.NextAt.Equal(at.Add(time.Hour)) || !st.LastAt.Equal(at) || st.LastRunID != res.RunID {
		t.Errorf("state after tick = %+v", st)
	}
	ticks, err := ss.ScheduleTickList(ctx(t), name, 10)
	if err != nil || len(ticks) != 1 || ticks[0].RunID != res.RunID || ticks[0].Status != schedule.TickFired ||
		!ticks[0].At.Equal(at) || ticks[0].Owner != "replica-a" {
		t.Fatalf("ticks = %+v, %v", ticks, err)
	}

	// The same tick again, as a replica that read the state before the
	// first commit would: the guard refuses it, nothing is written.
	again := cronTick(name, at, th)
	if _, err := ss.ScheduleTick(ctx(t), again); !errors.Is(err, core.ErrConflict) {
		t.Errorf("second handling of the tick: %v, want ErrConflict", err)
	}
	// A manual run at the same instant (no guard on the next tick): the
	// tick's row exists, so it is a duplicate and writes nothing.
	manual := cronTick(name, at, th)
	manual.ExpectNextAt, manual.NextAt = time.Time{}, time.Time{}
	if res, err := ss.ScheduleTick(ctx(t), manual); err != nil || !res.Duplicate {
		t.Errorf("tick at a handled instant = %+v, %v; want Duplicate", res, err)
	}
	if runs := schedulesRuns(t, s, name); len(runs) != 1 {
		t.Errorf("%d runs after handling one tick three times, want 1", len(runs))
	}
	if got := stateOf(t, ss, name); !got.NextAt.Equal(at.Add(time.Hour)) {
		t.Errorf("refused ticks moved the next tick to %s", got.NextAt)
	}
}

// testScheduleTickAbortedWritesNothing is the store's side of a crash at
// the tick: a tick transaction that fails after its guard (here its run
// cannot be inserted) leaves no tick, no event, no run and the next tick
// where it was, so the tick fires again later, once.
func testScheduleTickAbortedWritesNothing(t *testing.T, s core.Store) {
	ss := schedules(t, s)
	name, th, at := newSchedule(t, ss)
	taken := queueRun(t, s, thread(newID("other")))
	bad := cronTick(name, at, th)
	bad.Inbox.Run.ID = taken // the run insert fails mid-transaction
	if _, err := ss.ScheduleTick(ctx(t), bad); err == nil {
		t.Fatal("a tick whose run cannot be inserted committed")
	}
	if ticks, err := ss.ScheduleTickList(ctx(t), name, 10); err != nil || len(ticks) != 0 {
		t.Errorf("ticks after the aborted transaction = %+v, %v", ticks, err)
	}
	if st := stateOf(t, ss, name); !st.NextAt.Equal(at) || !st.LastAt.IsZero() {
		t.Errorf("state after the aborted transaction = %+v", st)
	}
	if runs := schedulesRuns(t, s, name); len(runs) != 0 {
		t.Errorf("runs after the aborted transaction: %d", len(runs))
	}
	good := cronTick(name, at, th)
	res, err := ss.ScheduleTick(ctx(t), good)
	if err != nil || res.Duplicate {
		t.Fatalf("tick after the aborted one = %+v, %v (its event must not have been kept)", res, err)
	}
	if runs := schedulesRuns(t, s, name); len(runs) != 1 || runs[0].ID != good.Inbox.Run.ID {
		t.Errorf("runs = %d, want exactly the retried tick's", len(runs))
	}
}

// testScheduleTickConcurrentOneWins: replicas handling the same tick at
// once start one run between them.
func testScheduleTickConcurrentOneWins(t *testing.T, s core.Store) {
	ss := schedules(t, s)
	name, th, at := newSchedule(t, ss)
	const n = 12
	var wg sync.WaitGroup
	var mu sync.Mutex
	won, lost := 0, 0
	for range n {
		wg.Go(func() {
			res, err := ss.ScheduleTick(ctx(t), cronTick(name, at, th))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && !res.Duplicate && res.RunID != "":
				won++
			case errors.Is(err, core.ErrConflict) || err == nil && res.Duplicate:
				lost++
			default:
				t.Errorf("ScheduleTick = %+v, %v", res, err)
			}
		})
	}
	wg.Wait()
	if won != 1 || lost != n-1 {
		t.Errorf("won %d, lost %d; want 1 and %d", won, lost, n-1)
	}
	if runs := schedulesRuns(t, s, name); len(runs) != 1 {
		t.Errorf("%d runs for one tick, want 1", len(runs))
	}
}

// testSchedulePause: a pause holds against cron ticks and is audited
// once; resume moves the next tick; unknown names are not found.
func testSchedulePause(t *testing.T, s core.Store) {
	ss := schedules(t, s)
	name, th, at := newSchedule(t, ss)
	pause := func(paused bool, next time.Time) (schedule.State, bool) {
		t.Helper()
		kind := approvals.AuditScheduleResumed
		if paused {
			kind = approvals.AuditSchedulePaused
		}
		st, changed, err := ss.SchedulePause(ctx(t), schedule.PauseParams{Name: name, Paused: paused, NextAt: next, By: "console:alice", Now: t0,
			Audit: []approvals.AuditEntry{{At: t0, Kind: kind, Actor: "console:alice", Detail: []byte(`{"schedule":"` + name + `"}`)}}})
		if err != nil {
			t.Fatalf("SchedulePause(%v): %v", paused, err)
		}
		return st, changed
	}
	if st, changed := pause(true, time.Time{}); !changed || !st.Paused || st.PausedBy != "console:alice" || !st.NextAt.Equal(at) {
		t.Errorf("pause = %+v, changed %v", st, changed)
	}
	if _, changed := pause(true, time.Time{}); changed {
		t.Error("pausing a paused schedule changed it")
	}
	if _, err := ss.ScheduleTick(ctx(t), cronTick(name, at, th)); !errors.Is(err, core.ErrConflict) {
		t.Errorf("cron tick of a paused schedule: %v, want ErrConflict", err)
	}
	if runs := schedulesRuns(t, s, name); len(runs) != 0 {
		t.Errorf("a paused schedule started %d runs", len(runs))
	}
	resumeAt := at.Add(3 * time.Hour)
	if st, changed := pause(false, resumeAt); !changed || st.Paused || st.PausedBy != "" || !st.NextAt.Equal(resumeAt) {
		t.Errorf("resume = %+v, changed %v", st, changed)
	}
	entries, err := s.AuditList(ctx(t), approvals.AuditListParams{Actor: "console:alice", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[approvals.AuditKind]int{}
	for _, e := range entries {
		kinds[e.Kind]++
	}
	if kinds[approvals.AuditSchedulePaused] != 1 || kinds[approvals.AuditScheduleResumed] != 1 {
		t.Errorf("audited %v, want one pause and one resume", kinds)
	}
	if _, _, err := ss.SchedulePause(ctx(t), schedule.PauseParams{Name: "nope-" + name, Paused: true, Now: t0}); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("pause of an unknown schedule: %v, want ErrNotFound", err)
	}
}

// testScheduleManualRun: a manual run records its run and last fire and
// leaves the next tick; an unknown schedule is not found.
func testScheduleManualRun(t *testing.T, s core.Store) {
	ss := schedules(t, s)
	name, th := newID("sched"), thread(newID("sched-th"))
	next := t0.Add(time.Hour).Truncate(time.Second)
	initSchedule(t, ss, name, next)
	at := t0.Add(90 * time.Second)
	p := cronTick(name, at, th)
	p.ExpectNextAt, p.NextAt, p.Tick.By = time.Time{}, time.Time{}, "console:alice"
	res, err := ss.ScheduleTick(ctx(t), p)
	if err != nil || res.Duplicate || res.RunID == "" {
		t.Fatalf("manual run = %+v, %v", res, err)
	}
	st := stateOf(t, ss, name)
	if !st.NextAt.Equal(next) || !st.LastAt.Equal(at) || st.LastRunID != res.RunID {
		t.Errorf("state after a manual run = %+v", st)
	}
	if ticks, _ := ss.ScheduleTickList(ctx(t), name, 10); len(ticks) != 1 || ticks[0].By != "console:alice" {
		t.Errorf("ticks = %+v", ticks)
	}
	unknown := cronTick("nope-"+name, at, th)
	unknown.ExpectNextAt, unknown.NextAt = time.Time{}, time.Time{}
	if _, err := ss.ScheduleTick(ctx(t), unknown); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("tick of an unknown schedule: %v, want ErrNotFound", err)
	}
	if runs := schedulesRuns(t, s, "nope-"+name); len(runs) != 0 {
		t.Errorf("an unknown schedule's tick started %d runs", len(runs))
	}
}

// testScheduleTickSkippedKeepsLastRun: a tick recorded without a run
// (skipped, missed) moves the next tick but not the last fire, and lists
// newest first.
func testScheduleTickSkippedKeepsLastRun(t *testing.T, s core.Store) {
	ss := schedules(t, s)
	name, th, at := newSchedule(t, ss)
	first, err := ss.ScheduleTick(ctx(t), cronTick(name, at, th))
	if err != nil {
		t.Fatal(err)
	}
	for i, status := range []schedule.TickStatus{schedule.TickSkipped, schedule.TickMissed} {
		tickAt := at.Add(time.Duration(i+1) * time.Hour)
		p := schedule.TickParams{Tick: schedule.Tick{Schedule: name, At: tickAt, Status: status, Reason: "why", Missed: i, Owner: "b", CreatedAt: t0},
			ExpectNextAt: tickAt, NextAt: tickAt.Add(time.Hour)}
		if res, err := ss.ScheduleTick(ctx(t), p); err != nil || res.RunID != "" {
			t.Fatalf("%s tick = %+v, %v", status, res, err)
		}
	}
	st := stateOf(t, ss, name)
	if !st.NextAt.Equal(at.Add(3*time.Hour)) || !st.LastAt.Equal(at) || st.LastRunID != first.RunID {
		t.Errorf("state = %+v; want next +3h and the first tick's run last", st)
	}
	ticks, err := ss.ScheduleTickList(ctx(t), name, 2)
	if err != nil || len(ticks) != 2 || ticks[0].Status != schedule.TickMissed || ticks[1].Status != schedule.TickSkipped ||
		ticks[0].Missed != 1 || ticks[1].Reason != "why" {
		t.Errorf("ticks newest first = %+v, %v", ticks, err)
	}
}
