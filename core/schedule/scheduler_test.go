package schedule_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	llm "github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/engine"
	"github.com/opsgate/opsgate/core/schedule"
	"github.com/opsgate/opsgate/internal/fakellm"
	"github.com/opsgate/opsgate/internal/testkit"
	"github.com/opsgate/opsgate/store/pgtest"
)

var nightlyThread = core.Thread{Channel: "console", Key: "nightly"}

// nightly is the schedule most tests use: at 03:00 UTC, into the console
// thread "nightly".
func nightly(text string) schedule.Schedule {
	return schedule.Schedule{Name: "nightly", Cron: "0 3 * * *", Thread: nightlyThread.String(), Text: text}
}

// hourly is nightly every hour.
func hourly(text string, missed schedule.Missed, overlap schedule.Overlap) schedule.Schedule {
	return schedule.Schedule{Name: "hourly", Cron: "0 * * * *", Thread: nightlyThread.String(), Text: text, Missed: missed, Overlap: overlap}
}

// threadMessages returns the thread's messages, oldest first.
func threadMessages(t *testing.T, st core.Store, th core.Thread) []core.ThreadMessage {
	t.Helper()
	ms, _, err := st.ThreadMessages(context.Background(), core.ThreadMessagesParams{Thread: th, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for i, j := 0, len(ms)-1; i < j; i, j = i+1, j-1 {
		ms[i], ms[j] = ms[j], ms[i]
	}
	return ms
}

// TestTickIsAChatMessageFromTheSchedule: at its tick a schedule's text is
// handled like a chat message from "schedule:<name>" in its thread — here
// a flow command whose run succeeds and answers in the thread — and a
// second look at the same tick starts nothing.
func TestTickIsAChatMessageFromTheSchedule(t *testing.T) {
	t.Parallel()
	clk := newClock(at(2, 59, 30))
	r := sqliteReplica(t, world{clk: clk, schedules: []schedule.Schedule{nightly("status")}})
	r.pass()
	if runs := r.runs("nightly"); len(runs) != 0 {
		t.Fatalf("%d runs before the tick", len(runs))
	}
	clk.Set(at(3, 0, 2))
	r.pass()
	r.pass()
	runs := r.runs("nightly")
	if len(runs) != 1 {
		t.Fatalf("%d runs after the tick, want 1", len(runs))
	}
	run := r.waitStatus(runs[0].ID, core.RunSucceeded)
	if run.Flow != "status" || run.Requester != "schedule:nightly" || run.Thread != nightlyThread ||
		run.EventID != "schedule:nightly:2030-01-02T03:00:00Z" || run.EventChannel != "console" {
		t.Errorf("run = flow %s requester %s thread %s event %s/%s", run.Flow, run.Requester, run.Thread, run.EventChannel, run.EventID)
	}
	ticks := r.ticks("nightly")
	if len(ticks) != 1 || ticks[0].Status != schedule.TickFired || ticks[0].RunID != run.ID || !ticks[0].At.Equal(at(3, 0, 0)) {
		t.Errorf("ticks = %+v", ticks)
	}
	var in, out bool
	for _, m := range threadMessages(t, r.store, nightlyThread) {
		in = in || m.Direction == core.MessageIn && m.Actor == "schedule:nightly" && m.Text == "status"
		out = out || m.Direction == core.MessageOut && m.RunID == run.ID && strings.Contains(m.Text, "cleaned")
	}
	if !in || !out {
		t.Errorf("thread holds the schedule's message %v and the run's answer %v", in, out)
	}
	st, err := r.sched.Get(context.Background(), "nightly")
	if err != nil || !st.NextAt.Equal(at(3, 0, 0).Add(24*time.Hour)) || !st.LastAt.Equal(at(3, 0, 0)) || st.LastRunID != run.ID {
		t.Errorf("status = %+v, %v", st, err)
	}
}

// TestApprovalInItsThreadAnsweredLater: the schedule's run asks; the card
// goes to the schedule's thread; the schedule itself can never answer it;
// hours later (ticks skipped meanwhile under overlap: skip) a person
// approves in the console and the run continues, dispatching once.
func TestApprovalInItsThreadAnsweredLater(t *testing.T) {
	t.Parallel()
	clk := newClock(at(2, 59, 30))
	r := sqliteReplica(t, world{clk: clk, schedules: []schedule.Schedule{hourly("cleanup tmp", "", "")}})
	r.passTheTick(clk)
	runs := r.runs("hourly")
	if len(runs) != 1 {
		t.Fatalf("%d runs, want 1", len(runs))
	}
	id := runs[0].ID
	r.waitStatus(id, core.RunWaitingApproval)
	var card *core.ThreadMessage
	for _, m := range threadMessages(t, r.store, nightlyThread) {
		if m.Kind == core.KindCard {
			card = &m
		}
	}
	if card == nil || card.RunID != id || card.ApprovalID == "" {
		t.Fatalf("no approval card in the schedule's thread: %+v", card)
	}
	a, err := r.store.ApprovalGet(context.Background(), card.ApprovalID)
	if err != nil || a.Requester != "schedule:hourly" || a.Status != approvals.StatusPending {
		t.Fatalf("approval = %+v, %v", a, err)
	}
	// The schedule is a requester, never an approver.
	_, err = r.eng.Decide(context.Background(), core.Actor{ID: "schedule:hourly"}, "console",
		core.Decision{ApprovalID: a.ID, Action: approvals.ActionApprove})
	if de, ok := core.Refusal(err); !ok || de.Code != core.DecisionHumanRequired {
		t.Fatalf("the schedule approving its own run: %v, want human_confirmation_required", err)
	}

	// Hours pass: the next ticks find the run waiting and are skipped.
	for h := 4; h <= 6; h++ {
		clk.Set(at(h, 0, 1))
		r.pass()
	}
	ticks := r.ticks("hourly")
	if len(ticks) != 4 || ticks[0].Status != schedule.TickSkipped || !strings.Contains(ticks[0].Reason, id) {
		t.Fatalf("ticks = %+v; want the three later ticks skipped for run %s", ticks, id)
	}
	if runs := r.runs("hourly"); len(runs) != 1 {
		t.Fatalf("%d runs while the first waits under overlap: skip", len(runs))
	}

	clk.Set(at(6, 30, 0))
	r.approve(id)
	run := r.waitStatus(id, core.RunSucceeded)
	if n := r.clean.callsFor(id); n != 1 {
		t.Errorf("cleanup dispatched %d times, want 1", n)
	}
	if len(run.Steps) != 1 || run.Steps[0].Output != "cleaned tmp" {
		t.Errorf("steps = %+v", run.Steps)
	}
	// The run is final: the next tick fires again.
	clk.Set(at(7, 0, 1))
	r.pass()
	if runs := r.runs("hourly"); len(runs) != 2 {
		t.Errorf("%d runs after the first finished and the next tick came, want 2", len(runs))
	}
}

// TestMissedTicks: ticks that passed while no replica was up are dropped
// under missed: skip and fired once under run_once; a short outage (less
// than MissedAfter) loses nothing under either.
func TestMissedTicks(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		missed schedule.Missed
		runs   int
		status schedule.TickStatus
		count  int
	}{
		{schedule.MissedSkip, 0, schedule.TickMissed, 4},
		{schedule.MissedRunOnce, 1, schedule.TickFired, 3},
	} {
		t.Run(string(c.missed), func(t *testing.T) {
			t.Parallel()
			clk := newClock(at(2, 59, 30))
			r := sqliteReplica(t, world{clk: clk, schedules: []schedule.Schedule{hourly("status", c.missed, "")}})
			r.pass()
			// Down from before 03:00 until 06:30: 03, 04, 05 and 06 passed.
			clk.Set(at(6, 30, 0))
			r.pass()
			runs := r.runs("hourly")
			if len(runs) != c.runs {
				t.Fatalf("%d runs after the outage, want %d", len(runs), c.runs)
			}
			ticks := r.ticks("hourly")
			if len(ticks) != 1 || ticks[0].Status != c.status || !ticks[0].At.Equal(at(6, 0, 0)) || ticks[0].Missed != c.count {
				t.Fatalf("ticks = %+v; want one %s at 06:00 counting %d", ticks, c.status, c.count)
			}
			if c.runs == 1 {
				if runs[0].EventID != "schedule:hourly:2030-01-02T06:00:00Z" {
					t.Errorf("run_once fired %s, want the latest tick", runs[0].EventID)
				}
				r.waitStatus(runs[0].ID, core.RunSucceeded) // so overlap: skip lets the next tick run
			}
			st, _ := r.sched.Get(context.Background(), "hourly")
			if !st.NextAt.Equal(at(7, 0, 0)) {
				t.Errorf("next tick %s, want 07:00", st.NextAt)
			}
			// A restart 40 s after the 07:00 tick is on time.
			clk.Set(at(7, 0, 40))
			r.pass()
			if runs := r.runs("hourly"); len(runs) != c.runs+1 {
				t.Errorf("%d runs after a short outage, want %d", len(runs), c.runs+1)
			}
		})
	}
}

// TestOverlapQueue: a tick while the previous run waits starts a run
// queued behind it in the thread; a further tick while that one is still
// queued is skipped; once the first is answered the queued one proceeds.
func TestOverlapQueue(t *testing.T) {
	t.Parallel()
	clk := newClock(at(2, 59, 30))
	r := sqliteReplica(t, world{clk: clk, schedules: []schedule.Schedule{hourly("cleanup tmp", "", schedule.OverlapQueue)}})
	r.passTheTick(clk)
	first := r.runs("hourly")[0].ID
	r.waitStatus(first, core.RunWaitingApproval)
	clk.Set(at(4, 0, 1))
	r.pass()
	runs := r.runs("hourly")
	if len(runs) != 2 {
		t.Fatalf("%d runs under overlap: queue, want 2", len(runs))
	}
	second := runs[0].ID
	clk.Set(at(5, 0, 1))
	r.pass()
	ticks := r.ticks("hourly")
	if len(r.runs("hourly")) != 2 || ticks[0].Status != schedule.TickSkipped || !strings.Contains(ticks[0].Reason, second) {
		t.Fatalf("a third tick while one waits queued: ticks %+v", ticks)
	}
	if run, _ := r.store.RunGet(context.Background(), second); run.Status != core.RunQueued {
		t.Fatalf("second run is %s while the first waits, want queued", run.Status)
	}
	r.approve(first)
	r.waitStatus(first, core.RunSucceeded)
	r.waitStatus(second, core.RunWaitingApproval)
	r.approve(second)
	r.waitStatus(second, core.RunSucceeded)
	if r.clean.callsFor(first) != 1 || r.clean.callsFor(second) != 1 {
		t.Errorf("dispatches: first %d, second %d", r.clean.callsFor(first), r.clean.callsFor(second))
	}
}

// TestTwoReplicasOnePostgres: two replicas on one Postgres look at every
// tick at the same moment; each tick starts exactly one run, and each run
// is executed once.
func TestTwoReplicasOnePostgres(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	clk := newClock(at(2, 59, 30))
	w := world{clk: clk, schedules: []schedule.Schedule{hourly("status", "", ""), nightly("status")}}
	var reps []*replica
	for _, owner := range []string{"replica-a", "replica-b"} {
		st, err := testkit.OpenPostgres(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		reps = append(reps, newReplica(t, st, w, owner))
	}
	both := func() {
		t.Helper()
		var wg sync.WaitGroup
		start := make(chan struct{})
		for _, r := range reps {
			wg.Go(func() {
				<-start
				if _, err := schedule.Pass(context.Background(), r.sched); err != nil {
					t.Errorf("pass: %v", err)
				}
			})
		}
		close(start)
		wg.Wait()
	}
	both()
	const hours = 6
	a := reps[0]
	for h := 3; h < 3+hours; h++ {
		clk.Set(at(h, 0, 1))
		both()
		runs := a.runs("hourly")
		if len(runs) != h-2 {
			t.Fatalf("%d runs after %d ticks on two replicas", len(runs), h-2)
		}
		// Every run finishes before the clock jumps an hour: a jump
		// past a running run's lease would hand it to the other replica
		// (and overlap: skip would skip the next tick).
		for _, run := range append(runs, a.runs("nightly")...) {
			a.waitStatus(run.ID, core.RunSucceeded)
		}
	}
	runs := a.runs("hourly")
	events := map[string]bool{}
	for _, run := range runs {
		events[run.EventID] = true
		if n := reps[0].clean.callsFor(run.ID) + reps[1].clean.callsFor(run.ID); n != 1 {
			t.Errorf("run %s executed %d times", run.ID, n)
		}
	}
	if len(events) != hours {
		t.Errorf("runs share ticks: %v", events)
	}
	if n := len(a.runs("nightly")); n != 1 {
		t.Errorf("nightly: %d runs, want 1", n)
	}
	owners := map[string]int{}
	for _, tk := range a.ticks("hourly") {
		if tk.Status != schedule.TickFired {
			t.Errorf("tick %+v", tk)
		}
		owners[tk.Owner]++
	}
	t.Logf("ticks handled per replica: %v", owners)
}

// TestLoopFiresAtTheTick: the scheduler's own loop, on the injected clock,
// fires a tick when the clock reaches it, and takes a schedule added by a
// reload.
func TestLoopFiresAtTheTick(t *testing.T) {
	t.Parallel()
	clk := newClock(at(2, 59, 30))
	r := sqliteReplica(t, world{clk: clk, schedules: []schedule.Schedule{nightly("status")}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.sched.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	clk.idleAfter(t, at(2, 59, 30))
	clk.Set(at(3, 0, 1))
	clk.idleAfter(t, at(3, 0, 1))
	if runs := r.runs("nightly"); len(runs) != 1 {
		t.Fatalf("%d runs after the loop passed the tick", len(runs))
	}
	more := hourly("status", "", "")
	if err := r.sched.Set([]schedule.Schedule{nightly("status"), more}); err != nil {
		t.Fatal(err)
	}
	clk.Set(at(3, 0, 10)) // the reload's wake-up has run by the time the loop is idle again
	clk.idleAfter(t, at(3, 0, 10))
	clk.Set(at(4, 0, 1))
	clk.idleAfter(t, at(4, 0, 1))
	if runs := r.runs("hourly"); len(runs) != 1 {
		t.Errorf("the reloaded schedule started %d runs at its tick, want 1", len(runs))
	}
}

// TestPauseResumeRunNow: a pause holds across a restart, a manual run
// works while paused and is audited, resuming skips the ticks that passed
// while paused; every operation refuses an unknown schedule.
func TestPauseResumeRunNow(t *testing.T) {
	t.Parallel()
	clk := newClock(at(2, 59, 30))
	w := world{clk: clk, schedules: []schedule.Schedule{hourly("status", schedule.MissedRunOnce, "")}}
	st := testkit.SQLite(t)
	r := newReplica(t, st, w, "replica-a")
	alice := core.Actor{ID: "console:alice"}
	ctx := context.Background()
	r.pass()
	s, err := r.sched.Pause(ctx, "hourly", alice)
	if err != nil || !s.Paused || s.PausedBy != "console:alice" || !s.NextAt.IsZero() {
		t.Fatalf("Pause = %+v, %v", s, err)
	}
	clk.Set(at(3, 0, 1))
	r.pass()
	// A restart: a new scheduler on the same store.
	r2 := newReplica(t, st, w, "replica-b")
	clk.Set(at(4, 0, 1))
	r2.pass()
	if runs := r2.runs("hourly"); len(runs) != 0 || len(r2.ticks("hourly")) != 0 {
		t.Fatalf("a paused schedule fired: %d runs", len(runs))
	}
	if s, _ := r2.sched.Get(ctx, "hourly"); !s.Paused {
		t.Fatal("the pause did not survive the restart")
	}
	tk, err := r2.sched.RunNow(ctx, "hourly", alice)
	if err != nil || tk.Status != schedule.TickFired || tk.RunID == "" || tk.By != "console:alice" {
		t.Fatalf("RunNow while paused = %+v, %v", tk, err)
	}
	run := r2.waitStatus(tk.RunID, core.RunSucceeded)
	if run.Requester != "schedule:hourly" || run.EventID != schedule.EventID("hourly", tk.At) {
		t.Errorf("manual run: requester %s event %s", run.Requester, run.EventID)
	}
	clk.Set(at(5, 30, 0))
	s, err = r2.sched.Resume(ctx, "hourly", alice)
	if err != nil || s.Paused || !s.NextAt.Equal(at(6, 0, 0)) {
		t.Fatalf("Resume = %+v, %v; want next 06:00 (03:00..05:00 passed while paused)", s, err)
	}
	r2.pass()
	if runs := r2.runs("hourly"); len(runs) != 1 {
		t.Errorf("resuming ran %d ticks that passed while paused, even under run_once", len(runs)-1)
	}
	clk.Set(at(6, 0, 1))
	r2.pass()
	if runs := r2.runs("hourly"); len(runs) != 2 {
		t.Errorf("%d runs after the first tick since resuming, want 2", len(runs))
	}
	entries, err := st.AuditList(ctx, approvals.AuditListParams{Actor: "console:alice", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[approvals.AuditKind]int{}
	for _, e := range entries {
		kinds[e.Kind]++
		if e.Kind == approvals.AuditScheduleRun && e.RunID != tk.RunID {
			t.Errorf("schedule.run audited run %q, want %s", e.RunID, tk.RunID)
		}
	}
	if kinds[approvals.AuditSchedulePaused] != 1 || kinds[approvals.AuditScheduleResumed] != 1 || kinds[approvals.AuditScheduleRun] != 1 {
		t.Errorf("audited %v", kinds)
	}
	for name, op := range map[string]func() error{
		"Pause":  func() error { _, err := r2.sched.Pause(ctx, "nope", alice); return err },
		"Resume": func() error { _, err := r2.sched.Resume(ctx, "nope", alice); return err },
		"RunNow": func() error { _, err := r2.sched.RunNow(ctx, "nope", alice); return err },
		"Get":    func() error { _, err := r2.sched.Get(ctx, "nope"); return err },
	} {
		if err := op(); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("%s of an unknown schedule: %v, want ErrNotFound", name, err)
		}
	}
}

// TestRunNowRefusedByOverlap: a manual run the overlap policy holds back
// is ErrOverlap and writes nothing.
func TestRunNowRefusedByOverlap(t *testing.T) {
	t.Parallel()
	clk := newClock(at(2, 59, 30))
	r := sqliteReplica(t, world{clk: clk, schedules: []schedule.Schedule{hourly("cleanup tmp", "", "")}})
	r.passTheTick(clk)
	r.waitStatus(r.runs("hourly")[0].ID, core.RunWaitingApproval)
	tk, err := r.sched.RunNow(context.Background(), "hourly", core.Actor{ID: "console:alice"})
	if !errors.Is(err, schedule.ErrOverlap) || tk.Status != schedule.TickSkipped {
		t.Fatalf("RunNow = %+v, %v; want ErrOverlap", tk, err)
	}
	if len(r.runs("hourly")) != 1 || len(r.ticks("hourly")) != 1 {
		t.Error("a refused manual run wrote something")
	}
	entries, _ := r.store.AuditList(context.Background(), approvals.AuditListParams{Kind: string(approvals.AuditScheduleRun), Limit: 10})
	if len(entries) != 0 {
		t.Errorf("a refused manual run was audited as run: %+v", entries)
	}
}

// TestRefusedWhereItMayNotRequest: a schedule is a requester like any
// other: where channels.<name>.requesters leaves it out its tick is
// refused (recorded, answered, audited, nothing started); named there, it
// runs.
func TestRefusedWhereItMayNotRequest(t *testing.T) {
	t.Parallel()
	clk := newClock(at(2, 59, 30))
	r := sqliteReplica(t, world{clk: clk, schedules: []schedule.Schedule{hourly("status", "", "")}, engine: func(o *engine.Options) {
		o.Requesters = map[string]engine.Requesters{"console": {Entries: []string{"group:sre"}}}
	}})
	r.passTheTick(clk)
	ticks := r.ticks("hourly")
	if len(ticks) != 1 || ticks[0].Status != schedule.TickRefused || len(r.runs("hourly")) != 0 {
		t.Fatalf("ticks = %+v, runs %d", ticks, len(r.runs("hourly")))
	}
	refused, _ := r.store.AuditList(context.Background(), approvals.AuditListParams{Kind: string(approvals.AuditRequestRefused), Limit: 10})
	if len(refused) != 1 || refused[0].Actor != "schedule:hourly" {
		t.Errorf("request.refused audit = %+v", refused)
	}
	var told bool
	for _, m := range threadMessages(t, r.store, nightlyThread) {
		told = told || m.Direction == core.MessageOut && strings.Contains(m.Text, "schedule:hourly may not start runs")
	}
	if !told {
		t.Error("the thread was not told why nothing ran")
	}
	r.eng.Reload(engine.Trust{Policy: &approvals.Policy{Rules: []approvals.Rule{{Tool: "status", Effect: approvals.EffectAllow}}},
		Groups:     map[string][]string{"sre": {"console:alice"}},
		Requesters: map[string]engine.Requesters{"console": {Entries: []string{"group:sre", "schedule:hourly"}}}})
	clk.Set(at(4, 0, 1))
	r.pass()
	if runs := r.runs("hourly"); len(runs) != 1 {
		t.Errorf("named among the requesters, the schedule started %d runs, want 1", len(runs))
	}
}

// TestAgentPrompt: agent + prompt makes each tick a turn of that agent,
// the prompt reaching the model as the schedule's external content.
func TestAgentPrompt(t *testing.T) {
	t.Parallel()
	model := fakellm.Replies(&llm.Response{Text: "disks are fine"})
	clk := newClock(at(2, 59, 30))
	sc := schedule.Schedule{Name: "disks", Cron: "@hourly", Thread: nightlyThread.String(), Agent: "ops", Prompt: "check the disks"}
	r := sqliteReplica(t, world{clk: clk, schedules: []schedule.Schedule{sc}, engine: func(o *engine.Options) {
		o.Agents = []engine.Agent{{Name: "ops", ModelName: "default", Model: model, Tools: []string{"status"}, MaxSteps: 3}}
	}})
	r.passTheTick(clk)
	runs := r.runs("disks")
	if len(runs) != 1 {
		t.Fatalf("%d runs, want 1", len(runs))
	}
	run := r.waitStatus(runs[0].ID, core.RunSucceeded)
	if run.Flow != core.AgentFlow("ops") || run.Requester != "schedule:disks" {
		t.Errorf("run flow %s requester %s", run.Flow, run.Requester)
	}
	reqs := model.Requests()
	if len(reqs) != 1 {
		t.Fatalf("model asked %d times", len(reqs))
	}
	var sent string
	for _, m := range reqs[0].Messages {
		sent += m.Text
	}
	if !strings.Contains(sent, "check the disks") || !strings.Contains(sent, `actor="schedule:disks"`) {
		t.Errorf("the model was sent %q", sent)
	}
}

// TestReloadChangesTheSchedules: a changed cron starts over from its next
// tick; a removed schedule is no longer listed or fired.
func TestReloadChangesTheSchedules(t *testing.T) {
	t.Parallel()
	clk := newClock(at(2, 59, 30))
	r := sqliteReplica(t, world{clk: clk, schedules: []schedule.Schedule{nightly("status"), hourly("status", "", "")}})
	r.pass()
	changed := nightly("status")
	changed.Cron, changed.Timezone = "30 4 * * *", "Europe/Berlin"
	if err := r.sched.Set([]schedule.Schedule{changed}); err != nil {
		t.Fatal(err)
	}
	r.pass()
	list, err := r.sched.List(context.Background())
	if err != nil || len(list) != 1 || list[0].Name != "nightly" || !list[0].NextAt.Equal(at(3, 30, 0)) || list[0].Timezone != "Europe/Berlin" {
		t.Fatalf("List after reload = %+v, %v; want nightly next at 03:30 UTC", list, err)
	}
	clk.Set(at(4, 0, 1))
	r.pass()
	if n := len(r.runs("hourly")); n != 0 {
		t.Errorf("a removed schedule fired %d times", n)
	}
	bad := nightly("status")
	bad.Cron = "every night"
	if err := r.sched.Set([]schedule.Schedule{bad}); !errors.Is(err, schedule.ErrConfig) {
		t.Errorf("Set with a bad cron: %v, want ErrConfig", err)
	}
	if list, _ := r.sched.List(context.Background()); len(list) != 1 || list[0].Cron != "30 4 * * *" {
		t.Errorf("a refused Set changed the schedules: %+v", list)
	}
}
