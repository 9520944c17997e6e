package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/opsgate/opsgate/core"
)

func TestCancelRunningRunIgnoresLateResult(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b)
		gate := h.fx.status.hold(1)
		rc := h.send("console:req", "console:t1", "status api")
		<-h.fx.status.started
		run, err := h.eng.Cancel(context.Background(), rc.RunID, core.Actor{ID: "console:admin"})
		if err != nil || run.Status != core.RunCancelled {
			t.Fatalf("cancel: %+v %v", run, err)
		}
		if len(run.Steps) != 1 || run.Steps[0].Status != core.StepDispatching {
			t.Fatalf("a dispatching step keeps running on cancel: %+v", run.Steps)
		}
		close(gate)
		// The tool returns after the cancellation: the run stays cancelled,
		// and its step records what the tool really did.
		var cur *core.Run
		waitFor(t, "the late result recorded on the step", func() bool {
			cur, _ = h.store.RunGet(context.Background(), rc.RunID)
			return len(cur.Steps) == 1 && cur.Steps[0].Status == core.StepSucceeded
		})
		h.quiesce() // the engine's last write is done: what we read is final
		cur, _ = h.store.RunGet(context.Background(), rc.RunID)
		if cur.Status != core.RunCancelled || cur.ErrorCode != "cancelled" || cur.Steps[0].FinishedAt == nil {
			t.Fatalf("run after the late result: %s %s, steps %+v", cur.Status, cur.ErrorCode, cur.Steps)
		}
		texts := h.outboxTexts(rc.RunID)
		if len(texts) != 1 || !strings.Contains(texts[0], "cancelled") {
			t.Fatalf("replies: %q", texts)
		}
		// The thread is free again (for a restarted engine: the store says so).
		h.fx.status.mu.Lock()
		h.fx.status.gate, h.fx.status.started = nil, nil
		h.fx.status.mu.Unlock()
		h.resume()
		next := h.send("console:req", "console:t1", "status web")
		h.waitRun(next.RunID, core.RunSucceeded)
	})
}

func TestMetrics(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		reg := prometheus.NewRegistry()
		h := setup(t, b, func(o *Options) { o.Registerer = reg })
		rc := h.send("console:req", "console:t1", "deploy api 1")
		a := h.waitApproval(rc.RunID)
		if _, err := h.decide("console:alice", a.ID, "approve"); err != nil {
			t.Fatal(err)
		}
		h.waitRun(rc.RunID, core.RunSucceeded)
		// The run is seen final once its checkpoint commits; the engine
		// counts it when the store call returns, a moment later.
		want := map[string]float64{
			"opsgate_events_ingested_total": 1, "opsgate_runs_finished_total": 1,
			"opsgate_approval_decision_to_dispatch_seconds": 1, "opsgate_tool_dispatch_seconds": 1,
		}
		var got map[string]float64
		waitFor(t, "the metrics of one finished run", func() bool {
			fams, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			got = map[string]float64{}
			for _, f := range fams {
				for _, m := range f.GetMetric() {
					switch {
					case m.GetCounter() != nil:
						got[f.GetName()] += m.GetCounter().GetValue()
					case m.GetHistogram() != nil:
						got[f.GetName()] += float64(m.GetHistogram().GetSampleCount())
					}
				}
			}
			for name, w := range want {
				if got[name] < w {
					return false
				}
			}
			return true
		})
		for name, w := range want {
			if got[name] != w {
				t.Fatalf("%s = %v, want %v (all: %v)", name, got[name], w, got)
			}
		}
		// A second engine on the same registry (a restart) reuses the series.
		if _, err := New(h.fx.options(t, h.store, h.clk)); err != nil {
			t.Fatal(err)
		}
		o := h.fx.options(t, h.store, h.clk)
		o.Registerer = reg
		if _, err := New(o); err != nil {
			t.Fatalf("second engine on one registry: %v", err)
		}
	})
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	fx := newFixture()
	base := func() Options { return fx.options(t, nil, &clock{}) }
	cases := map[string]func(o *Options){
		"no store":       func(o *Options) {},
		"unknown tool":   func(o *Options) { o.Flows[0].Steps[0].Tool = "nope" },
		"bad template":   func(o *Options) { o.Flows[0].Steps[0].Args = map[string]any{"x": "{{.service"} },
		"bad pattern":    func(o *Options) { o.Flows[0].Command = "{service}" },
		"duplicate flow": func(o *Options) { o.Flows = append(o.Flows, o.Flows[0]) },
		"no runner":      func(o *Options) { o.Tools[0].Runner = nil },
	}
	for name, mod := range cases {
		t.Run(name, func(t *testing.T) {
			o := base()
			if name != "no store" {
				o.Store = fakeStore{}
			}
			mod(&o)
			if _, err := New(o); err == nil {
				t.Fatal("New accepted a bad configuration")
			}
		})
	}
}

// fakeStore satisfies core.Store for constructor tests that never touch it.
type fakeStore struct{ core.Store }

// TestLapsedLeaseNeverRunsTwice lets the lease of a run lapse while its tool
// is still running here: the replica claims the run again, and must not
// start a second execution that dispatches the tool a second time.
func TestLapsedLeaseNeverRunsTwice(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b)
		gate := h.fx.status.hold(10)
		rc := h.send("console:req", "console:t1", "status api")
		<-h.fx.status.started
		for range 5 {
			// Expire every lease this owner holds, as a stalled heartbeat would.
			if err := h.store.RunHeartbeat(context.Background(), core.RunHeartbeatParams{Owner: h.eng.Owner(), RunIDs: []string{rc.RunID},
				LeaseUntil: h.clk.Now().Add(-time.Hour)}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(60 * time.Millisecond)
		}
		close(gate)
		run := h.waitRun(rc.RunID, core.RunSucceeded, core.RunFailed, core.RunInterrupted)
		if run.Status != core.RunSucceeded {
			t.Fatalf("run %s", run.Status)
		}
		h.quiesce() // nothing can be dispatched after this
		if n := len(h.fx.status.callsFor(rc.RunID)); n != 1 {
			t.Fatalf("dispatched %d times", n)
		}
	})
}

func TestInvalidArgsFailRunBeforePolicy(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b)
		rc := h.send("console:req", "console:t1", "deploy API_Bad 1")
		run := h.waitRun(rc.RunID, core.RunFailed, core.RunWaitingApproval, core.RunSucceeded)
		if run.Status != core.RunFailed || run.ErrorCode != "invalid_args" || run.Steps[0].Status != core.StepFailed {
			t.Fatalf("run: %+v", run)
		}
		if texts := h.outboxTexts(run.ID); len(texts) != 1 || !strings.Contains(texts[0], "service") {
			t.Fatalf("reply: %q", texts)
		}
		if h.fx.deploy.total() != 0 || h.fx.deploy.previews != 0 {
			t.Fatal("invalid arguments reached the tool")
		}
	})
}

func TestPreviewFailureShownOnCard(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b)
		h.fx.deploy.mu.Lock()
		h.fx.deploy.previewErr = errors.New("dry-run script missing")
		h.fx.deploy.mu.Unlock()
		rc := h.send("console:req", "console:t1", "deploy api 1")
		a := h.waitApproval(rc.RunID)
		if a.Preview != "dry run failed: dry-run script missing" {
			t.Fatalf("preview %q", a.Preview)
		}
		if !strings.Contains(h.eng.Card(a).PlainText(), "dry run failed") {
			t.Fatal("card hides the failed dry run")
		}
	})
}
