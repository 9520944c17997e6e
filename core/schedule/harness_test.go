package schedule_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/engine"
	"github.com/opsgate/opsgate/core/schedule"
	"github.com/opsgate/opsgate/core/tools"
	"github.com/opsgate/opsgate/internal/testkit"
	"github.com/opsgate/opsgate/store/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const waitBound = 30 * time.Second

// clock is real time plus an offset the test sets and advances, with an
// After whose waits end only when the test advances past them: the
// scheduler never waits for real time in these tests.
type clock struct {
	mu      sync.Mutex
	off     time.Duration
	waiters []waiter
	// waiting receives the fake time of each After call: the loop is idle.
	waiting chan time.Time
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

func newClock(at time.Time) *clock {
	c := &clock{waiting: make(chan time.Time, 1000)}
	c.off = time.Until(at)
	return c
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	now := time.Now().Add(c.off)
	ch := make(chan time.Time, 1)
	c.waiters = append(c.waiters, waiter{at: now.Add(d), ch: ch})
	c.mu.Unlock()
	c.waiting <- now
	return ch
}

// Set moves the clock to at (forward only) and ends the waits due by then.
func (c *clock) Set(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off = time.Until(at)
	now := time.Now().Add(c.off)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(now) {
			kept = append(kept, w)
			continue
		}
		w.ch <- now
	}
	c.waiters = kept
}

// idleAfter waits until a loop goes idle (calls After) at or after t.
func (c *clock) idleAfter(t *testing.T, at time.Time) {
	t.Helper()
	deadline := time.After(waitBound)
	for {
		select {
		case w := <-c.waiting:
			if !w.Before(at) {
				return
			}
		case <-deadline:
			t.Fatalf("the scheduler's loop did not go idle after %s", at)
		}
	}
}

// cleaner is the cleanup tool: it records every call.
type cleaner struct {
	mu    sync.Mutex
	calls []tools.Call
}

func (r *cleaner) Run(_ context.Context, c tools.Call) (tools.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
	return tools.Result{Output: fmt.Sprintf("cleaned %v", c.Args["what"])}, nil
}

func (r *cleaner) Preview(context.Context, tools.Call) (string, error) { return "would clean", nil }

func (r *cleaner) callsFor(runID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.calls {
		if c.RunID == runID {
			n++
		}
	}
	return n
}

// replica is one opsgate process: a store, an engine running runs, and a
// scheduler over them.
type replica struct {
	t     *testing.T
	store core.Store
	eng   *engine.Engine
	sched *schedule.Scheduler
	clean *cleaner
	ctx   context.Context
}

// world says what the replicas share: the clock, the schedules and the
// engine's configuration.
type world struct {
	clk       *clock
	schedules []schedule.Schedule
	// engine, when set, changes the engine's options.
	engine func(*engine.Options)
}

// newReplica starts an engine (its loop runs until the test ends) and a
// scheduler on st; the scheduler's loop is started only by the tests that
// use it.
func newReplica(t *testing.T, st core.Store, w world, owner string) *replica {
	t.Helper()
	clean := &cleaner{}
	o := engine.Options{
		Store: st,
		Flows: []engine.Flow{
			{Name: "cleanup", Command: "cleanup {what}", Steps: []engine.FlowStep{{Tool: "cleanup", Args: map[string]any{"what": "{{.what}}"}}}},
			{Name: "status", Command: "status", Steps: []engine.FlowStep{{Tool: "status"}}},
		},
		Tools: []*tools.Tool{
			{Name: "cleanup", Risk: approvals.RiskHighImpact, Destructive: true, Runner: clean},
			{Name: "status", Risk: approvals.RiskRead, Idempotent: true, Runner: clean},
		},
		Policy: &approvals.Policy{Rules: []approvals.Rule{
			{Tool: "cleanup", Effect: approvals.EffectAsk, Approvers: []string{"group:sre"}, Quorum: 1},
			{Tool: "status", Effect: approvals.EffectAllow},
		}},
		Groups:       map[string][]string{"sre": {"console:alice"}},
		ApprovalTTL:  72 * time.Hour,
		PollInterval: 50 * time.Millisecond,
		Owner:        owner,
		Now:          w.clk.Now,
		// The tests move the clock by hours while the engines run: a
		// lease computed just before such a jump must not have lapsed
		// just after it.
		Lease:  48 * time.Hour,
		Logger: slog.New(slog.DiscardHandler),
	}
	if w.engine != nil {
		w.engine(&o)
	}
	eng, err := engine.New(o)
	if err != nil {
		t.Fatalf("engine: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = eng.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	sched, err := schedule.New(schedule.Options{Store: st.(schedule.Store), Inbox: eng, Owner: owner, Now: w.clk.Now, After: w.clk.After,
		Logger: slog.New(slog.DiscardHandler)}, w.schedules)
	if err != nil {
		t.Fatalf("schedule.New: %v", err)
	}
	return &replica{t: t, store: st, eng: eng, sched: sched, clean: clean, ctx: ctx}
}

// sqliteReplica is a replica on a fresh SQLite store.
func sqliteReplica(t *testing.T, w world) *replica {
	t.Helper()
	return newReplica(t, testkit.SQLite(t), w, "replica-a")
}

// passTheTick looks at the schedules before 03:00 (storing their state),
// then just after it.
func (r *replica) passTheTick(clk *clock) {
	r.t.Helper()
	r.pass()
	clk.Set(at(3, 0, 1))
	r.pass()
}

// pass looks at the schedules once at the clock's time.
func (r *replica) pass() {
	r.t.Helper()
	if _, err := schedule.Pass(context.Background(), r.sched); err != nil {
		r.t.Fatalf("pass: %v", err)
	}
}

func (r *replica) ticks(name string) []schedule.Tick {
	r.t.Helper()
	ts, err := r.store.(schedule.Store).ScheduleTickList(context.Background(), name, 100)
	if err != nil {
		r.t.Fatal(err)
	}
	return ts
}

// runs returns the runs schedule name requested, newest first.
func (r *replica) runs(name string) []*core.Run {
	r.t.Helper()
	runs, _, err := r.store.RunList(context.Background(), core.RunListParams{Requester: schedule.Identity(name), Limit: 100})
	if err != nil {
		r.t.Fatal(err)
	}
	return runs
}

// waitRun waits, on the store's wake-ups, until run id satisfies cond.
func (r *replica) waitRun(id, what string, cond func(*core.Run) bool) *core.Run {
	r.t.Helper()
	wake, cancel := r.store.Subscribe(core.TopicEvents)
	defer cancel()
	deadline := time.After(waitBound)
	for {
		run, err := r.store.RunGet(context.Background(), id)
		if err != nil {
			r.t.Fatalf("RunGet %s: %v", id, err)
		}
		if cond(run) {
			return run
		}
		select {
		case <-wake:
		case <-time.After(100 * time.Millisecond): // a fallback look, not a wait for time
		case <-deadline:
			r.t.Fatalf("run %s not %s after %s: status %s", id, what, waitBound, run.Status)
		}
	}
}

func (r *replica) waitStatus(id string, status core.RunStatus) *core.Run {
	r.t.Helper()
	return r.waitRun(id, string(status), func(run *core.Run) bool { return run.Status == status })
}

// approve decides the run's pending approval as alice, in the console.
func (r *replica) approve(runID string) {
	r.t.Helper()
	as, _, err := r.store.ApprovalList(context.Background(), approvals.ApprovalListParams{RunID: runID, Status: approvals.StatusPending, Limit: 10})
	if err != nil || len(as) != 1 {
		r.t.Fatalf("pending approvals of %s: %d, %v", runID, len(as), err)
	}
	if _, err := r.eng.Decide(context.Background(), core.Actor{ID: "console:alice"}, "console",
		core.Decision{ApprovalID: as[0].ID, Action: approvals.ActionApprove}); err != nil {
		r.t.Fatalf("approve: %v", err)
	}
}

// at is a time on the suite's day: 2030-01-02 hh:mm:ss UTC.
func at(hh, mm, ss int) time.Time { return time.Date(2030, 1, 2, hh, mm, ss, 0, time.UTC) }
