package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

func TestWaitingRunSurvivesRestart(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b)
		rc := h.send("console:req", "console:t1", "deploy api 1")
		a := h.waitApproval(rc.RunID)
		h.shutdown() // the process goes away; only the database remains
		h.start()    // a new process, a new owner, the same database
		if _, err := h.decide("console:alice", a.ID, "approve"); err != nil {
			t.Fatal(err)
		}
		run := h.waitRun(rc.RunID, core.RunSucceeded, core.RunFailed)
		if run.Status != core.RunSucceeded {
			t.Fatalf("run %s %s", run.Status, run.ErrorMessage)
		}
		if calls := h.fx.deploy.callsFor(run.ID); len(calls) != 1 || calls[0].IdempotencyKey != run.ID+"/0" {
			t.Fatalf("dispatches: %+v", calls)
		}
	})
}

// crashMidDispatch crafts what a replica killed during a tool call leaves
// behind: the run claimed by a dead owner with a short lease, its step
// recorded dispatching with its key, and no result.
func crashMidDispatch(t *testing.T, h *harness, text, tool string) string {
	t.Helper()
	h.stop() // no live engine while we impersonate the dead one
	ctx := context.Background()
	rc := h.send("console:req", "console:crash", text)
	now := h.clk.Now()
	runs, err := h.store.RunClaim(ctx, core.RunClaimParams{Owner: "dead-replica", Limit: 10, Now: now, LeaseUntil: now.Add(100 * time.Millisecond)})
	if err != nil || len(runs) != 1 || runs[0].ID != rc.RunID {
		t.Fatalf("claim as the dead owner: %v %v", runs, err)
	}
	started := now
	err = h.store.RunCheckpoint(ctx, core.Checkpoint{
		RunID: rc.RunID, Owner: "dead-replica", Now: now,
		Step: &core.Step{Index: 0, Tool: tool, Status: core.StepDispatching, Args: map[string]any{"service": "api"},
			IdempotencyKey: rc.RunID + "/0", Attempts: 1, StartedAt: &started},
	})
	if err != nil {
		t.Fatal(err)
	}
	h.stop = h.runEngine(h.eng)
	return rc.RunID
}

func TestMidDispatchCrashNonIdempotentInterrupted(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b)
		id := crashMidDispatch(t, h, "status api", "status")
		run := h.waitRun(id, core.RunInterrupted, core.RunSucceeded, core.RunFailed)
		if run.Status != core.RunInterrupted || run.Steps[0].Status != core.StepInterrupted {
			t.Fatalf("run: %+v", run)
		}
		if n := h.fx.status.total(); n != 0 {
			t.Fatalf("non-idempotent tool re-dispatched %d times", n)
		}
		if texts := h.outboxTexts(id); len(texts) != 1 || !strings.Contains(texts[0], "outcome unknown — check before retrying") {
			t.Fatalf("reply: %q", texts)
		}
		if es := h.auditKinds(approvals.AuditListParams{RunID: id}); len(es) != 1 || es[0].Kind != "run.interrupted" {
			t.Fatalf("audit: %+v", es)
		}
	})
}

func TestMidDispatchCrashIdempotentRedispatched(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b)
		id := crashMidDispatch(t, h, "restart api", "restart")
		run := h.waitRun(id, core.RunSucceeded, core.RunInterrupted, core.RunFailed)
		if run.Status != core.RunSucceeded {
			t.Fatalf("run: %+v", run)
		}
		calls := h.fx.restart.callsFor(id)
		if len(calls) != 1 || calls[0].IdempotencyKey != id+"/0" {
			t.Fatalf("re-dispatch: %+v", calls)
		}
		if run.Steps[0].Attempts != 2 {
			t.Fatalf("attempts %d", run.Steps[0].Attempts)
		}
	})
}

func TestRunsInOneThreadAreSequential(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b)
		gate := h.fx.status.hold(10)
		first := h.send("console:req", "console:same", "status one")
		second := h.send("console:req", "console:same", "status two")
		if got := <-h.fx.status.started; got != first.RunID {
			t.Fatalf("first dispatch was %s, want %s", got, first.RunID)
		}
		// While the first holds the thread, the second must stay queued:
		// the engine looks at the queue twice more (one look may have begun
		// before the second was committed) and passes it over.
		h.waitClaims(2)
		if run, _ := h.store.RunGet(context.Background(), second.RunID); run.Status != core.RunQueued {
			t.Fatalf("second run is %s while the first runs", run.Status)
		}
		close(gate)
		h.waitRun(second.RunID, core.RunSucceeded)
		h.fx.status.mu.Lock()
		defer h.fx.status.mu.Unlock()
		if len(h.fx.status.calls) != 2 || h.fx.status.calls[0].RunID != first.RunID || h.fx.status.calls[1].RunID != second.RunID || h.fx.status.peak != 1 {
			t.Fatalf("order/overlap: %+v peak %d", h.fx.status.calls, h.fx.status.peak)
		}
	})
}

func TestRunsInDifferentThreadsOverlap(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b)
		const n = 5
		gate := h.fx.status.hold(n)
		var ids []string
		for i := range n {
			ids = append(ids, h.send("console:req", fmt.Sprintf("console:th%d", i), "status api").RunID)
		}
		// All n calls start before any is released: they run in parallel.
		for range n {
			select {
			case <-h.fx.status.started:
			case <-time.After(2 * time.Minute): // a hang backstop
				t.Fatal("runs in different threads did not overlap")
			}
		}
		close(gate)
		for _, id := range ids {
			h.waitRun(id, core.RunSucceeded)
		}
		if h.fx.status.peak != n {
			t.Fatalf("peak concurrency %d, want %d", h.fx.status.peak, n)
		}
	})
}

func TestConcurrencyBound(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b, func(o *Options) { o.Concurrency = 2 })
		gate := h.fx.status.hold(10)
		var ids []string
		for i := range 4 {
			ids = append(ids, h.send("console:req", fmt.Sprintf("console:c%d", i), "status api").RunID)
		}
		<-h.fx.status.started
		<-h.fx.status.started
		// A full engine does not look at the queue, so there is no event to
		// wait on here; the peak checked at the end covers the whole run.
		time.Sleep(100 * time.Millisecond)
		h.fx.status.mu.Lock()
		inflight := h.fx.status.inflight
		h.fx.status.mu.Unlock()
		if inflight != 2 {
			t.Fatalf("%d runs in flight with Concurrency 2", inflight)
		}
		close(gate)
		for _, id := range ids {
			h.waitRun(id, core.RunSucceeded)
		}
		h.fx.status.mu.Lock()
		defer h.fx.status.mu.Unlock()
		if h.fx.status.peak != 2 {
			t.Fatalf("peak concurrency %d with Concurrency 2", h.fx.status.peak)
		}
	})
}

// TestTwoReplicasDispatchOnce runs two engines (two stores, two owners) on
// one Postgres database and decides 100 runs alternately through each: every
// decided run resumes once, on one replica, and dispatches once.
//
// The replicas' clock stands still. On the real clock the 1 s lease of a
// replica that the machine slows past it (a claim or heartbeat statement
// taking a second under load) lapses, the other replica takes the run over
// as it would a dead one's, finds the call dispatching and ends the run
// interrupted — correct for a replica that may have died, and the subject
// of TestLapsedLeaseTakenOverNeverRunsTwice, but not what this test asserts.
func TestTwoReplicasDispatchOnce(t *testing.T) {
	t.Parallel()
	b := backends[1]
	still := &clock{}
	still.stop()
	h := setup(t, b, func(o *Options) { o.Now = still.Now })
	h.clk = still
	ctx := context.Background()
	e2, _ := h.replica()
	if e2.Owner() == h.eng.Owner() {
		t.Fatal("replicas share an owner id")
	}
	engines := []*Engine{h.eng, e2}

	const n = 100
	ids := make([]string, n)
	for i := range n {
		ev := h.event("console:req", fmt.Sprintf("console:r%d", i), fmt.Sprintf("deploy svc-%d 1.0", i))
		rc, err := engines[i%2].HandleEvent(ctx, ev)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = rc.RunID
	}
	var wg sync.WaitGroup
	for i, id := range ids {
		a := h.waitApproval(id)
		wg.Go(func() {
			approver := sre[i%3]
			if _, err := engines[i%2].Decide(ctx, core.Actor{ID: approver}, "console", core.Decision{ApprovalID: a.ID, Action: "approve"}); err != nil {
				t.Errorf("decide %s: %v", a.ID, err)
			}
		})
	}
	wg.Wait()
	for _, id := range ids {
		h.waitRun(id, core.RunSucceeded)
	}
	for _, id := range ids {
		if calls := h.fx.deploy.callsFor(id); len(calls) != 1 || calls[0].IdempotencyKey != id+"/0" {
			t.Fatalf("run %s dispatched %d times: %+v", id, len(calls), calls)
		}
	}
	if got := h.fx.deploy.total(); got != n {
		t.Fatalf("%d dispatches for %d runs", got, n)
	}
}

// stalledReplica is a replica's store whose lease renewals and claims do
// not reach the database while stalled is set: the replica's execution runs
// on but its leases lapse, as when a loaded machine holds its heartbeat
// past the lease, and it does not claim its own run back first.
type stalledReplica struct {
	core.Store
	stalled atomic.Bool
}

func (s *stalledReplica) RunHeartbeat(ctx context.Context, p core.RunHeartbeatParams) error {
	if s.stalled.Load() {
		return errInjected
	}
	return s.Store.RunHeartbeat(ctx, p)
}

func (s *stalledReplica) RunClaim(ctx context.Context, p core.RunClaimParams) ([]*core.Run, error) {
	if s.stalled.Load() {
		return nil, errInjected
	}
	return s.Store.RunClaim(ctx, p)
}

// TestLapsedLeaseTakenOverNeverRunsTwice: replica A dispatches a decided,
// non-idempotent call; its heartbeat stalls and its lease lapses while the
// call runs; replica B takes the run over as it would a dead replica's. B
// must not call the tool again: it finds the call dispatching and ends the
// run interrupted (outcome unknown, as far as any replica may assume). A's
// result then arrives for a run no longer its own and is refused — the
// run keeps one end, one reply, and the tool ran once.
func TestLapsedLeaseTakenOverNeverRunsTwice(t *testing.T) {
	t.Parallel()
	b := backends[1]
	still := &clock{}
	still.stop()
	var a *stalledReplica
	h := setup(t, b, func(o *Options) {
		o.Now = still.Now
		a = &stalledReplica{Store: o.Store}
		o.Store = a
	})
	h.clk = still
	ctx := context.Background()
	gate := h.fx.deploy.hold(1)
	rc := h.send("console:req", "console:lapse", "deploy api 1.0")
	ap := h.waitApproval(rc.RunID)
	if _, err := h.decide("console:alice", ap.ID, "approve"); err != nil {
		t.Fatal(err)
	}
	<-h.fx.deploy.started // A holds the run, its step recorded dispatching
	if run, _ := h.store.RunGet(ctx, rc.RunID); run.Owner != h.eng.Owner() || run.Steps[0].Status != core.StepDispatching {
		t.Fatalf("before the lapse: %+v", run)
	}

	a.stalled.Store(true)
	h.clk.Advance(2 * time.Second) // past A's lease (1 s)
	h.tweak = func(o *Options) { o.Now = still.Now }
	_, stop2 := h.replica()

	run := h.waitRun(rc.RunID, core.RunInterrupted)
	if st := run.Steps[0]; st.Status != core.StepInterrupted || st.IdempotencyKey != rc.RunID+"/0" || st.Attempts != 1 {
		t.Fatalf("step after B's takeover: %+v", st)
	}
	close(gate) // A's call ends; its record is refused
	a.stalled.Store(false)
	h.stop()
	stop2()
	if calls := h.fx.deploy.callsFor(rc.RunID); len(calls) != 1 {
		t.Fatalf("the tool ran %d times across the replicas: %+v", len(calls), calls)
	}
	after, err := h.store.RunGet(ctx, rc.RunID)
	if err != nil || after.Status != core.RunInterrupted || after.Steps[0].Status != core.StepInterrupted {
		t.Fatalf("A's late result overwrote B's end: %+v, %v", after, err)
	}
	if n := h.countEvents(rc.RunID, core.EventTurnFinished); n != 1 {
		t.Errorf("%d turn.finished events, want B's one: %v", n, h.eventTypes(rc.RunID))
	}
	if texts := h.outboxTexts(rc.RunID); len(texts) != 1 || !strings.Contains(texts[0], "outcome unknown") {
		t.Fatalf("replies %q, want B's one interrupted reply", texts)
	}
}

// Deny is final on resume: a call asked for under one policy and approved
// after a restart under a policy that now denies it never runs. The
// approval itself is valid (a plain approve re-checks nothing); the engine
// re-evaluates the policy before dispatching the approved call.
func TestDenyIsFinalOnResume(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b)
		rc := h.send("console:req", "console:t1", "deploy api 1.2.3")
		a := h.waitApproval(rc.RunID)
		h.shutdown()
		// The operator adds a deny rule for the tool and restarts: a new
		// engine, the same database.
		h.tweak = func(o *Options) {
			o.Policy.Rules = append(o.Policy.Rules, approvals.Rule{Tool: "deploy", Effect: approvals.EffectDeny})
		}
		h.start()
		got, err := h.decide("console:alice", a.ID, "approve")
		if err != nil || got.Status != approvals.StatusApproved {
			t.Fatalf("approve: %+v, %v", got, err)
		}
		run := h.waitRun(rc.RunID, core.RunSucceeded, core.RunFailed, core.RunRejected, core.RunInterrupted)
		if run.Status != core.RunFailed || run.ErrorCode != "denied" {
			t.Fatalf("run %s (%s: %s), want failed: denied", run.Status, run.ErrorCode, run.ErrorMessage)
		}
		if n := h.fx.deploy.total(); n != 0 {
			t.Fatalf("a call denied on resume was dispatched %d times", n)
		}
		if len(run.Steps) != 1 || run.Steps[0].Status != core.StepDenied || run.Steps[0].ApprovalID != a.ID {
			t.Fatalf("steps: %+v", run.Steps)
		}
		var denied []approvals.AuditEntry
		for _, e := range h.auditKinds(approvals.AuditListParams{RunID: run.ID}) {
			if e.Kind == "policy.denied" {
				denied = append(denied, e)
			}
		}
		if len(denied) != 1 || denied[0].ApprovalID != a.ID || denied[0].Tool != "deploy" {
			t.Fatalf("policy.denied audit entries: %+v, want one for approval %s", denied, a.ID)
		}
		if cur, err := h.store.ApprovalGet(context.Background(), a.ID); err != nil || cur.ExecutedArgs != nil {
			t.Fatalf("approval after the deny: executed args %v, %v; want none (nothing ran)", cur.ExecutedArgs, err)
		}
		if texts := h.outboxTexts(run.ID); !slices.ContainsFunc(texts, func(s string) bool { return strings.Contains(s, "denied by policy") }) {
			t.Fatalf("replies %q: the thread is not told of the deny", texts)
		}
	})
}
