package engine

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/tools"
)

// slowTool writes its first lines to the progress sink, then waits for the
// test to let it finish.
type slowTool struct {
	release chan struct{}
}

func (s *slowTool) Run(ctx context.Context, c tools.Call) (tools.Result, error) {
	if c.Output != nil {
		c.Output([]byte("compiling api\n"))
		c.Output([]byte("auth token=s3cr3t-t0ken password=hunter2\n"))
		c.Output([]byte("[####      ] 40%\r[########  ] 80%"))
	}
	select {
	case <-s.release:
	case <-ctx.Done():
		return tools.Result{}, ctx.Err()
	}
	return tools.Result{Output: "built api"}, nil
}

func (s *slowTool) Preview(context.Context, tools.Call) (string, error) { return "", nil }

func withSlowBuild(st *slowTool) func(*Options) {
	return func(o *Options) {
		o.Tools = append(o.Tools, &tools.Tool{Name: "build", Risk: approvals.RiskRead, Runner: st})
		o.Flows = append(o.Flows, Flow{Name: "build", Command: "build {service}", Steps: []FlowStep{
			{Tool: "build", Args: map[string]any{"service": "{{.service}}"}},
			{Tool: "status", Args: map[string]any{"service": "{{.service}}"}},
		}})
		o.Policy = &approvals.Policy{Rules: append(o.Policy.Rules, approvals.Rule{Tool: "build", Effect: approvals.EffectAllow})}
		o.Progress = ProgressOptions{Every: 10 * time.Millisecond, StatusAfter: time.Nanosecond, StatusEvery: 10 * time.Millisecond}
	}
}

// TestLongStepShowsProgress: while a step runs, its output reaches the
// run's events as tool.output (newest lines, redacted, with the elapsed
// time) and, in a thread whose channel edits replies, a status message
// edited in place; when the step ends the status shows its result line,
// queued before the run's reply, and the last output event comes before
// tool.finished. Without an editing channel there is no status message.
func TestLongStepShowsProgress(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		for _, edits := range []bool{true, false} {
			st := &slowTool{release: make(chan struct{})}
			h := setup(t, b, withSlowBuild(st))
			if edits {
				h.eng.StreamInto("console")
			}
			rc := h.send("console:req", "console:build", "build api")
			var lines []string
			waitFor(t, "a tool.output event", func() bool {
				for _, ev := range h.events(rc.RunID) {
					if ev.Type == core.EventToolOutput {
						var d struct {
							Lines   []string `json:"lines"`
							Elapsed *int64   `json:"elapsed_ms"`
							Tool    string   `json:"tool"`
						}
						if json.Unmarshal(ev.Data, &d) == nil && d.Tool == "build" && d.Elapsed != nil && len(d.Lines) == 3 {
							lines = d.Lines
							return true
						}
					}
				}
				return false
			})
			if lines[0] != "compiling api" || strings.Contains(strings.Join(lines, "\n"), "s3cr3t") || strings.Contains(strings.Join(lines, "\n"), "hunter2") ||
				lines[2] != "[########  ] 80%" {
				t.Errorf("progress lines = %q: want the newest lines, secrets masked, a carriage-return bar at its last state", lines)
			}
			if edits {
				waitFor(t, "a status message while it runs", func() bool { return len(h.outboxOf(rc.RunID, core.KindProgress)) > 0 })
			}
			close(st.release)
			h.waitRun(rc.RunID, core.RunSucceeded)

			types := h.eventTypes(rc.RunID)
			lastOut, finished := -1, slices.Index(types, core.EventToolFinished)
			for i, ty := range types {
				if ty == core.EventToolOutput && i < finished {
					lastOut = i
				}
			}
			if lastOut < 0 || slices.Index(types[finished:], core.EventToolOutput) >= 0 {
				t.Errorf("events %v: tool.output must come before the step's tool.finished, never after", types)
			}
			status := h.outboxOf(rc.RunID, core.KindProgress)
			if !edits {
				if len(status) != 0 {
					t.Errorf("a channel that cannot edit got %d status messages", len(status))
				}
				continue
			}
			final := status[len(status)-1]
			if !strings.HasPrefix(final.Text, "✅ **build** finished in") || strings.Contains(final.Text, "⏳") {
				t.Errorf("final status %q, want the result line", final.Text)
			}
			for _, m := range status {
				if strings.Contains(m.Text, "s3cr3t") || strings.Contains(m.Text, "hunter2") {
					t.Errorf("a status message shows a secret: %q", m.Text)
				}
			}
			all := h.outboxOf(rc.RunID, "")
			if all[len(all)-1].Kind != core.KindReply || slices.IndexFunc(all, func(d *core.Delivery) bool { return d.ID == final.ID }) > len(all)-2 {
				t.Errorf("the final status must be queued before the run's reply: %v", kinds(all))
			}
		}
	})
}

func kinds(ds []*core.Delivery) []core.MessageKind {
	var out []core.MessageKind
	for _, d := range ds {
		out = append(out, d.Kind)
	}
	return out
}

// events lists a run's events.
func (h *harness) events(runID string) []core.RunEvent {
	h.t.Helper()
	evs, err := h.store.RunEventList(context.Background(), runID, 0, 1000)
	if err != nil {
		h.t.Fatal(err)
	}
	return evs
}
