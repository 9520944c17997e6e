package engine

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// Store faults: what the engine does when the store fails under it — an
// outage, a commit whose answer is lost — on both backends, injected by
// faultStore so each case is exact. The Postgres restart test
// (restart_test.go) does the same for real.

// errInjected is what a failing store call returns: what a connection
// lost mid-statement looks like to the engine.
var errInjected = errors.New("injected store fault: unexpected EOF")

// fault is what goes wrong with one RunCheckpoint call.
type fault int

const (
	faultNone   fault = iota
	faultBefore       // the call fails and nothing commits
	faultAfter        // the checkpoint commits and its answer is lost
	faultFull         // the store answers but refuses the write: its disk is full
)

// errDiskFull is what a store whose disk is full answers a write while its
// reads still work (store/sqlite classifies SQLITE_FULL this way).
var errDiskFull = &core.StoreUnavailableError{Store: "sqlite", Reason: "disk full", Err: errors.New("database or disk is full (13)")}

// faultStore wraps a store and injects failures. down fails every call the
// engine makes (an outage); checkpoint picks a fault per RunCheckpoint.
type faultStore struct {
	core.Store
	down atomic.Bool

	mu sync.Mutex
	// checkpoint, when set, decides the fault of each RunCheckpoint call.
	checkpoint func(c core.Checkpoint) fault
	// afterCheckpoint, when set, runs after a RunCheckpoint that committed,
	// before its answer is returned.
	afterCheckpoint func(c core.Checkpoint)
	// approvalGetFails fails that many ApprovalGet calls.
	approvalGetFails int
	// failed counts the failures injected, by method.
	failed     map[string]int
	heartbeats []core.RunHeartbeatParams
}

func newFaultStore(s core.Store) *faultStore { return &faultStore{Store: s, failed: map[string]int{}} }

// onCheckpoint sets the fault picker of RunCheckpoint calls.
func (f *faultStore) onCheckpoint(pick func(core.Checkpoint) fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checkpoint = pick
}

// fail reports whether a call of method fails now, counting it.
func (f *faultStore) fail(method string) bool {
	if !f.down.Load() {
		return false
	}
	f.mu.Lock()
	f.failed[method]++
	f.mu.Unlock()
	return true
}

// failedCopy copies the failure counts, for messages.
func (f *faultStore) failedCopy() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.failed)
}

func (f *faultStore) failures(methods ...string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, m := range methods {
		n += f.failed[m]
	}
	return n
}

func (f *faultStore) RunCheckpoint(ctx context.Context, c core.Checkpoint) error {
	if f.fail("RunCheckpoint") {
		return errInjected
	}
	f.mu.Lock()
	pick, after := f.checkpoint, f.afterCheckpoint
	f.mu.Unlock()
	what := faultNone
	if pick != nil {
		what = pick(c)
	}
	if what != faultNone {
		// Counted before the commit, so a test that sees the commit's
		// effect sees the count too.
		f.mu.Lock()
		f.failed["RunCheckpoint"]++
		f.mu.Unlock()
	}
	switch what {
	case faultBefore:
		return errInjected
	case faultFull:
		return errDiskFull
	}
	if err := f.Store.RunCheckpoint(ctx, c); err != nil {
		return err
	}
	if after != nil {
		after(c)
	}
	if what == faultAfter {
		return errInjected
	}
	return nil
}

func (f *faultStore) RunGet(ctx context.Context, id string) (*core.Run, error) {
	if f.fail("RunGet") {
		return nil, errInjected
	}
	return f.Store.RunGet(ctx, id)
}

func (f *faultStore) RunClaim(ctx context.Context, p core.RunClaimParams) ([]*core.Run, error) {
	if f.fail("RunClaim") {
		return nil, errInjected
	}
	return f.Store.RunClaim(ctx, p)
}

func (f *faultStore) RunHeartbeat(ctx context.Context, p core.RunHeartbeatParams) error {
	if f.fail("RunHeartbeat") {
		return errInjected
	}
	f.mu.Lock()
	f.heartbeats = append(f.heartbeats, p)
	f.mu.Unlock()
	return f.Store.RunHeartbeat(ctx, p)
}

func (f *faultStore) ApprovalGet(ctx context.Context, id string) (*approvals.Approval, error) {
	f.mu.Lock()
	fails := f.approvalGetFails > 0
	if fails {
		f.approvalGetFails--
		f.failed["ApprovalGet"]++
	}
	f.mu.Unlock()
	if fails || f.fail("ApprovalGet") {
		return nil, errInjected
	}
	return f.Store.ApprovalGet(ctx, id)
}

func (f *faultStore) ApprovalListExpired(ctx context.Context, now time.Time, limit int) ([]string, error) {
	if f.fail("ApprovalListExpired") {
		return nil, errInjected
	}
	return f.Store.ApprovalListExpired(ctx, now, limit)
}

// setupFaults is setup with the engine's store wrapped in a faultStore (the
// harness's own reads go to the real store).
func setupFaults(t *testing.T, b backend, tweak ...func(*Options)) (*harness, *faultStore) {
	t.Helper()
	var fs *faultStore
	h := setup(t, b, func(o *Options) {
		fs = newFaultStore(o.Store)
		o.Store = fs
		for _, tw := range tweak {
			tw(o)
		}
	})
	return h, fs
}

// onceFault injects what on the first checkpoint match accepts, then none.
func onceFault(what fault, match func(c core.Checkpoint) bool) func(core.Checkpoint) fault {
	var done atomic.Bool
	return func(c core.Checkpoint) fault {
		if match(c) && done.CompareAndSwap(false, true) {
			return what
		}
		return faultNone
	}
}

func stepStatus(s core.StepStatus) func(c core.Checkpoint) bool {
	return func(c core.Checkpoint) bool { return c.Step != nil && c.Step.Status == s }
}

// countEvents counts a run's events of type typ.
func (h *harness) countEvents(runID, typ string) int {
	n := 0
	for _, e := range h.eventTypes(runID) {
		if e == typ {
			n++
		}
	}
	return n
}

// checkOnce asserts a run succeeded with its one step dispatched exactly
// once, one tool.started and one tool.finished event, and one reply.
func checkOnce(t *testing.T, h *harness, rec *recorder, runID string) {
	t.Helper()
	run := h.waitRun(runID, core.RunSucceeded, core.RunFailed, core.RunInterrupted, core.RunRejected)
	if run.Status != core.RunSucceeded || run.Steps[0].Status != core.StepSucceeded || run.Steps[0].Attempts != 1 {
		t.Fatalf("run %s (%s: %s), steps %+v; want succeeded, one attempt", run.Status, run.ErrorCode, run.ErrorMessage, run.Steps)
	}
	if calls := rec.callsFor(runID); len(calls) != 1 || calls[0].IdempotencyKey != runID+"/0" {
		t.Fatalf("dispatches %+v, want exactly one with key %s/0", calls, runID)
	}
	for _, typ := range []string{core.EventToolStarted, core.EventToolFinished, core.EventTurnFinished} {
		if n := h.countEvents(runID, typ); n != 1 {
			t.Errorf("%d %s events, want 1: %v", n, typ, h.eventTypes(runID))
		}
	}
	if texts := h.outboxTexts(runID); len(texts) != 1 || !strings.Contains(texts[0], "succeeded") {
		t.Errorf("replies %q, want one success", texts)
	}
}

// TestDispatchCommitAnswerLost: the dispatching checkpoint commits but its
// answer is lost. The engine reads the step back under the owner guard,
// finds its own dispatch record and calls the tool — once — instead of
// handing the run to recovery, which would have found the step dispatching
// and ended the run interrupted though the tool never ran.
func TestDispatchCommitAnswerLost(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h, fs := setupFaults(t, b)
		fs.onCheckpoint(onceFault(faultAfter, stepStatus(core.StepDispatching)))
		rc := h.send("console:req", "console:t1", "status api")
		checkOnce(t, h, h.fx.status, rc.RunID)
		if fs.failures("RunCheckpoint") != 1 {
			t.Fatalf("fault not injected: %v", fs.failedCopy())
		}
	})
}

// TestDispatchCommitFailedIsRetried: the dispatching checkpoint fails
// without committing; read back, the step is not there, so the checkpoint
// is made again and the tool runs once.
func TestDispatchCommitFailedIsRetried(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h, fs := setupFaults(t, b)
		fs.onCheckpoint(onceFault(faultBefore, stepStatus(core.StepDispatching)))
		rc := h.send("console:req", "console:t1", "deploy api 1")
		a := h.waitApproval(rc.RunID)
		if _, err := h.decide("console:alice", a.ID, "approve"); err != nil {
			t.Fatal(err)
		}
		checkOnce(t, h, h.fx.deploy, rc.RunID)
		if got, _ := h.store.ApprovalGet(context.Background(), a.ID); got.ExecutedArgs == nil {
			t.Fatal("the approval does not record what ran")
		}
	})
}

// TestResultCheckpointRetried: the tool succeeded and the checkpoint of its
// result fails — without committing, and then with its answer lost. The
// result is recorded exactly once; the run does not end interrupted.
func TestResultCheckpointRetried(t *testing.T) {
	for _, what := range []fault{faultBefore, faultAfter} {
		name := map[fault]string{faultBefore: "NotCommitted", faultAfter: "AnswerLost"}[what]
		t.Run(name, func(t *testing.T) {
			eachBackend(t, func(t *testing.T, b backend) {
				h, fs := setupFaults(t, b)
				fs.onCheckpoint(onceFault(what, func(c core.Checkpoint) bool {
					return c.Step != nil && c.Step.Status == core.StepSucceeded
				}))
				rc := h.send("console:req", "console:t1", "status api")
				checkOnce(t, h, h.fx.status, rc.RunID)
				if fs.failures("RunCheckpoint") != 1 {
					t.Fatalf("fault not injected: %v", fs.failedCopy())
				}
			})
		})
	}
}

// TestResultKeptWhileDiskFull is issue 32's "a known result becomes
// interrupted": the tool succeeded and the store, its disk full, refuses
// the result's checkpoint many more times than a refusal is tried while
// it still answers reads. The result is kept until the store takes it and
// the run ends succeeded with the tool called once; a write the store
// refuses for another reason still gives up (TestResultRefusedGivesUp).
func TestResultKeptWhileDiskFull(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h, fs := setupFaults(t, b)
		const full = storeRefusals + 2
		var n atomic.Int32
		fs.onCheckpoint(func(c core.Checkpoint) fault {
			if c.Step != nil && c.Step.Status == core.StepSucceeded && n.Add(1) <= full {
				return faultFull
			}
			return faultNone
		})
		rc := h.send("console:req", "console:t1", "status api")
		waitFor(t, "the store to refuse the result past the refusal bound", func() bool {
			return fs.failures("RunCheckpoint") >= full
		})
		checkOnce(t, h, h.fx.status, rc.RunID)
		if got := fs.failures("RunCheckpoint"); got != full {
			t.Fatalf("%d refused checkpoints, want %d", got, full)
		}
	})
}

// TestResultRefusedGivesUp: a store that answers reads but refuses a
// write for a reason other than being unavailable is not retried forever:
// after storeRefusals attempts the execution gives up and the run, found
// dispatching, ends interrupted (its outcome cannot be recorded).
func TestResultRefusedGivesUp(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h, fs := setupFaults(t, b)
		var n atomic.Int32
		fs.onCheckpoint(func(c core.Checkpoint) fault {
			if c.Step != nil && c.Step.Status == core.StepSucceeded && n.Add(1) <= storeRefusals {
				return faultBefore
			}
			return faultNone
		})
		rc := h.send("console:req", "console:t1", "status api")
		run := h.waitRun(rc.RunID, core.RunSucceeded, core.RunFailed, core.RunInterrupted)
		if got := fs.failures("RunCheckpoint"); got != storeRefusals {
			t.Fatalf("%d refused checkpoints, want %d (then given up)", got, storeRefusals)
		}
		if run.Status != core.RunInterrupted {
			t.Fatalf("run %s, want interrupted after the store refused its result %d times", run.Status, storeRefusals)
		}
	})
}

// TestIntermediateResultAnswerLost: in a two-step flow the first step's
// result checkpoint (which advances the step index and keeps the run)
// commits with its answer lost: the second step runs next, and no event
// or step is written twice.
func TestIntermediateResultAnswerLost(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h, fs := setupFaults(t, b)
		fs.onCheckpoint(onceFault(faultAfter, func(c core.Checkpoint) bool {
			return c.Step != nil && c.Step.Index == 0 && c.Step.Status == core.StepSucceeded
		}))
		rc := h.send("console:req", "console:t1", "check api")
		run := h.waitRun(rc.RunID, core.RunSucceeded, core.RunFailed, core.RunInterrupted)
		if run.Status != core.RunSucceeded || len(run.Steps) != 2 {
			t.Fatalf("run %s, steps %+v", run.Status, run.Steps)
		}
		if s, r := len(h.fx.status.callsFor(rc.RunID)), len(h.fx.restart.callsFor(rc.RunID)); s != 1 || r != 1 {
			t.Fatalf("dispatches: status %d, restart %d; want one each", s, r)
		}
		if n := h.countEvents(rc.RunID, core.EventToolFinished); n != 2 {
			t.Fatalf("%d tool.finished events for two steps: %v", n, h.eventTypes(rc.RunID))
		}
		if n := h.countEvents(rc.RunID, core.EventTurnStarted); n != 1 {
			t.Fatalf("%d turn.started events, want 1 (the run never left this execution): %v", n, h.eventTypes(rc.RunID))
		}
	})
}

// TestStoreOutageRunNotKept is issue 16's first defect: the store goes away
// while a tool runs, for longer than the engine used to retry (it gave up
// after six attempts, about 1.5 s, and the heartbeat then renewed the
// lease of the run nothing executed any more, so it stayed running and the
// run queued behind it never started). Now the result checkpoint is tried
// until the store answers, the run succeeds, and the next one starts.
func TestStoreOutageRunNotKept(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h, fs := setupFaults(t, b)
		gate := h.fx.status.hold(10)
		first := h.send("console:req", "console:same", "status api")
		second := h.send("console:req", "console:same", "status web")
		if got := <-h.fx.status.started; got != first.RunID {
			t.Fatalf("first dispatch was %s", got)
		}
		fs.down.Store(true)
		close(gate)
		// More failed attempts than the old give-up: the engine still tries.
		waitFor(t, "the engine to keep trying through the outage", func() bool {
			return fs.failures("RunCheckpoint", "RunGet") >= 8
		})
		fs.down.Store(false)
		checkOnce(t, h, h.fx.status, first.RunID)
		if run := h.waitRun(second.RunID, core.RunSucceeded, core.RunFailed, core.RunInterrupted); run.Status != core.RunSucceeded {
			t.Fatalf("the run queued behind: %s", run.Status)
		}
	})
}

// TestAbandonedRunIsHandedBack: a read the execution needs fails (the
// approval, on resume): the run is handed back to the queue, not kept, and
// the next claim finishes it.
func TestAbandonedRunIsHandedBack(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h, fs := setupFaults(t, b)
		rc := h.send("console:req", "console:t1", "deploy api 1")
		a := h.waitApproval(rc.RunID)
		fs.mu.Lock()
		fs.approvalGetFails = 3
		fs.mu.Unlock()
		if _, err := h.decide("console:alice", a.ID, "approve"); err != nil {
			t.Fatal(err)
		}
		checkOnce(t, h, h.fx.deploy, rc.RunID)
		if n := fs.failures("ApprovalGet"); n != 3 {
			t.Fatalf("%d ApprovalGet failures injected, want 3", n)
		}
	})
}

// TestHeartbeatRenewsOnlyRunsExecutingHere: a run this owner holds in the
// store but does not execute (what a store outage used to leave behind) is
// not renewed by the heartbeat, which renews the runs executing here; its
// lease lapses and the claim loop takes it and finishes it.
func TestHeartbeatRenewsOnlyRunsExecutingHere(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h, fs := setupFaults(t, b, func(o *Options) { o.Owner = "replica-a" })
		h.stop()
		ctx := context.Background()
		orphan := h.send("console:req", "console:orphan", "restart api")
		now := h.clk.Now()
		runs, err := h.store.RunClaim(ctx, core.RunClaimParams{Owner: "replica-a", Limit: 1, Now: now, LeaseUntil: now.Add(time.Minute)})
		if err != nil || len(runs) != 1 {
			t.Fatalf("claim as replica-a: %v %v", runs, err)
		}
		lease := runs[0].LeaseUntil

		gate := make(chan struct{})
		defer func() {
			select {
			case <-gate:
			default:
				close(gate)
			}
		}()
		h.fx.status.mu.Lock()
		h.fx.status.gate, h.fx.status.started = gate, make(chan string, 1)
		h.fx.status.mu.Unlock()
		h.stop = h.runEngine(h.eng)
		busy := h.send("console:req", "console:busy", "status api")
		<-h.fx.status.started
		// Two heartbeats while the busy run executes: they name it alone.
		waitFor(t, "two heartbeats", func() bool {
			fs.mu.Lock()
			defer fs.mu.Unlock()
			return len(fs.heartbeats) >= 2
		})
		fs.mu.Lock()
		for _, hb := range fs.heartbeats {
			if len(hb.RunIDs) != 1 || hb.RunIDs[0] != busy.RunID || hb.Owner != "replica-a" {
				t.Errorf("heartbeat %+v, want only the executing run %s", hb, busy.RunID)
			}
		}
		fs.mu.Unlock()
		if r, err := h.store.RunGet(ctx, orphan.RunID); err != nil || !r.LeaseUntil.Equal(lease) || r.Status != core.RunRunning {
			t.Fatalf("orphaned run after the heartbeats: %+v, %v; want its lease untouched (%s)", r, err, lease)
		}
		h.clk.Advance(2 * time.Minute) // the orphan's lease lapses
		if run := h.waitRun(orphan.RunID, core.RunSucceeded, core.RunFailed, core.RunInterrupted); run.Status != core.RunSucceeded {
			t.Fatalf("orphaned run ended %s", run.Status)
		}
		close(gate)
		h.waitRun(busy.RunID, core.RunSucceeded)
	})
}

// logBuffer collects log output for assertions.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestQuickDecisionIsNotALapsedLease: a decision that requeues a run the
// moment its suspend commits gets the run claimed again before the
// suspending execution has returned. That is no lapsed lease, and the log
// must not say so; the run continues once the execution returns.
func TestQuickDecisionIsNotALapsedLease(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		logs := &logBuffer{}
		var h *harness
		var fs *faultStore
		h, fs = setupFaults(t, b, func(o *Options) {
			o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		})
		var decided atomic.Bool
		fs.mu.Lock()
		fs.afterCheckpoint = func(c core.Checkpoint) {
			if c.Status != core.RunWaitingApproval || c.Approval == nil || !decided.CompareAndSwap(false, true) {
				return
			}
			// Inside the suspending execution's checkpoint call: decide,
			// and hold the execution until the run is claimed again.
			if _, err := h.decide("console:alice", c.Approval.ID, "approve"); err != nil {
				t.Errorf("decide: %v", err)
				return
			}
			waitFor(t, "the requeued run claimed again while this execution is still active", func() bool {
				h.eng.mu.Lock()
				defer h.eng.mu.Unlock()
				return h.eng.reclaimed[c.RunID]
			})
		}
		fs.mu.Unlock()
		rc := h.send("console:req", "console:t1", "deploy api 1")
		checkOnce(t, h, h.fx.deploy, rc.RunID)
		out := logs.String()
		if strings.Contains(out, "lease lapsed") {
			t.Fatalf("a requeue was logged as a lapsed lease:\n%s", out)
		}
		if !strings.Contains(out, "run requeued while its last execution here was returning") {
			t.Fatalf("the requeue claim was not seen (the test did not provoke it):\n%s", out)
		}
	})
}
