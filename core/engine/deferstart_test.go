package engine

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core"
)

// checkpointLog records the step status of every checkpoint the engine
// writes, per run.
type checkpointLog struct {
	core.Store
	mu    sync.Mutex
	steps map[string][]core.StepStatus
}

func (c *checkpointLog) RunCheckpoint(ctx context.Context, cp core.Checkpoint) error {
	if cp.Step != nil {
		c.mu.Lock()
		c.steps[cp.RunID] = append(c.steps[cp.RunID], cp.Step.Status)
		c.mu.Unlock()
	}
	return c.Store.RunCheckpoint(ctx, cp)
}

func (c *checkpointLog) of(runID string) []core.StepStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.steps[runID])
}

// setupDeferred runs the harness with a checkpoint log and, when due is
// set, the start-record timer replaced by it.
func setupDeferred(t *testing.T, b backend, due chan time.Time) (*harness, *checkpointLog) {
	log := &checkpointLog{steps: map[string][]core.StepStatus{}}
	h := setup(t, b, func(o *Options) {
		log.Store = o.Store
		o.Store = log
		if due != nil {
			o.startRecordDue = func() <-chan time.Time { return due }
		}
	})
	return h, log
}

// A quick idempotent call is recorded once, with its start: one write
// instead of two. A non-idempotent call keeps its start record.
func TestQuickIdempotentCallRecordsItsStartWithTheResult(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h, log := setupDeferred(t, b, nil)
		rc := h.send("console:req", "console:q1", "restart api")
		run := h.waitRun(rc.RunID, core.RunSucceeded, core.RunFailed)
		if run.Status != core.RunSucceeded {
			t.Fatalf("run %s: %s", run.Status, run.ErrorMessage)
		}
		if got := log.of(rc.RunID); !slices.Equal(got, []core.StepStatus{core.StepSucceeded}) {
			t.Fatalf("idempotent call's step checkpoints: %v, want only the result", got)
		}
		st := run.Steps[0]
		if st.Attempts != 1 || st.IdempotencyKey != rc.RunID+"/0" || st.StartedAt == nil || st.FinishedAt == nil || st.StartedAt.After(*st.FinishedAt) {
			t.Fatalf("step as recorded: %+v", st)
		}
		types := h.eventTypes(rc.RunID)
		started, finished := slices.Index(types, core.EventToolStarted), slices.Index(types, core.EventToolFinished)
		if started < 0 || finished != started+1 {
			t.Fatalf("events %v: want tool.started just before tool.finished", types)
		}

		rc = h.send("console:req", "console:q2", "status api")
		h.waitRun(rc.RunID, core.RunSucceeded)
		if got := log.of(rc.RunID); !slices.Equal(got, []core.StepStatus{core.StepDispatching, core.StepSucceeded}) {
			t.Fatalf("non-idempotent call's step checkpoints: %v", got)
		}
	})
}

// An idempotent call still running when its record is due is recorded
// dispatching while it runs, then finished; the stream has one start.
func TestLongIdempotentCallIsRecordedWhileItRuns(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		due := make(chan time.Time)
		h, log := setupDeferred(t, b, due)
		gate := h.fx.restart.hold(1)
		rc := h.send("console:req", "console:l1", "restart api")
		<-h.fx.restart.started
		if run, _ := h.store.RunGet(context.Background(), rc.RunID); len(run.Steps) != 0 {
			t.Fatalf("step recorded before it was due: %+v", run.Steps)
		}
		close(due)
		waitFor(t, "the running step recorded dispatching", func() bool {
			run, err := h.store.RunGet(context.Background(), rc.RunID)
			return err == nil && len(run.Steps) == 1 && run.Steps[0].Status == core.StepDispatching
		})
		close(gate)
		run := h.waitRun(rc.RunID, core.RunSucceeded, core.RunFailed)
		if run.Status != core.RunSucceeded {
			t.Fatalf("run %s: %s", run.Status, run.ErrorMessage)
		}
		if got := log.of(rc.RunID); !slices.Equal(got, []core.StepStatus{core.StepDispatching, core.StepSucceeded}) {
			t.Fatalf("step checkpoints: %v", got)
		}
		types := h.eventTypes(rc.RunID)
		if n := countOf(types, core.EventToolStarted); n != 1 || slices.Index(types, core.EventToolStarted) > slices.Index(types, core.EventToolFinished) {
			t.Fatalf("events %v", types)
		}
	})
}

// A run cancelled while its idempotent call runs unrecorded: the record,
// when due, is refused, the call is cut, and the step says so.
func TestCancelBeforeADeferredStartRecordCutsTheCall(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		due := make(chan time.Time)
		h, _ := setupDeferred(t, b, due)
		h.fx.restart.hold(1) // the gate is never opened: only the cut ends the call
		rc := h.send("console:req", "console:c1", "restart api")
		<-h.fx.restart.started
		if _, err := h.eng.Cancel(context.Background(), rc.RunID, core.Actor{ID: "console:admin"}); err != nil {
			t.Fatal(err)
		}
		close(due)
		var run *core.Run
		waitFor(t, "the cut call recorded on the cancelled run", func() bool {
			r, err := h.store.RunGet(context.Background(), rc.RunID)
			run = r
			return err == nil && len(r.Steps) == 1 && strings.Contains(r.Steps[0].Error, "the call was cut")
		})
		st := run.Steps[0]
		if run.Status != core.RunCancelled || st.Status != core.StepCancelled || st.IdempotencyKey != rc.RunID+"/0" || st.Attempts != 1 {
			t.Fatalf("run %s, step %+v", run.Status, st)
		}
		h.fx.restart.mu.Lock()
		inflight := h.fx.restart.inflight
		h.fx.restart.mu.Unlock()
		if inflight != 0 {
			t.Fatalf("the call still runs after the cut (%d in flight)", inflight)
		}
	})
}

func countOf(xs []string, x string) int {
	n := 0
	for _, y := range xs {
		if y == x {
			n++
		}
	}
	return n
}
