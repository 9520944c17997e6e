package web

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core"
)

// TestChatStepProgress: a dispatched step is one status line — while it
// runs, the time it has run (from its newest tool.output, or since it
// started) and its newest output lines; once it ended, its result in
// place of the running line, with no output left. A step that started
// before the oldest message shown is not listed; each change redraws the
// line (its data-v, Status, changes).
func TestChatStepProgress(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	ev := func(seq int64, typ string, at time.Duration, data map[string]any) core.RunEvent {
		b, err := json.Marshal(data)
		if err != nil {
			t.Fatal(err)
		}
		return core.RunEvent{Seq: seq, RunID: "r1", Type: typ, At: t0.Add(at), Data: b}
	}
	started := []core.RunEvent{
		ev(1, core.EventToolStarted, -time.Hour, map[string]any{"step": 0, "tool": "old"}),
		ev(2, core.EventToolStarted, 0, map[string]any{"step": 1, "tool": "deploy"}),
	}
	items := stepProgress("r1", started, t0, t0.Add(7*time.Second))
	if len(items) != 1 || items[0].Text != "running deploy · 7s" || items[0].Lines != nil || items[0].Key != "e-2" {
		t.Fatalf("just started: %+v", items)
	}
	first := items[0].Status

	running := append(slices.Clone(started),
		ev(3, core.EventToolOutput, 2*time.Second, map[string]any{"step": 1, "tool": "deploy", "lines": []string{"pulling"}, "elapsed_ms": 2000}),
		ev(4, core.EventToolOutput, 4*time.Second, map[string]any{"step": 1, "tool": "deploy", "lines": []string{"pulling", "pushed"}, "elapsed_ms": 64000}))
	items = stepProgress("r1", running, t0, t0.Add(65*time.Second))
	if len(items) != 1 || items[0].Text != "running deploy · 1m04s" || !slices.Equal(items[0].Lines, []string{"pulling", "pushed"}) {
		t.Fatalf("running: %+v", items)
	}
	if items[0].Status == first {
		t.Errorf("new output kept the line's version %q: the live page would not redraw it", first)
	}

	done := append(slices.Clone(running),
		ev(5, core.EventToolFinished, 70*time.Second, map[string]any{"step": 1, "tool": "deploy", "duration_ms": 70400, "error": ""}),
		ev(6, core.EventToolStarted, 71*time.Second, map[string]any{"step": 2, "tool": "verify"}),
		ev(7, core.EventToolFinished, 72*time.Second, map[string]any{"step": 2, "tool": "verify", "duration_ms": 900, "error": "exit status 3"}))
	items = stepProgress("r1", done, t0, t0.Add(time.Hour))
	if len(items) != 2 {
		t.Fatalf("ended: %+v", items)
	}
	if items[0].Text != "deploy finished in 1m10s" || items[0].Lines != nil || items[0].Status != "finished" {
		t.Errorf("finished step: %+v", items[0])
	}
	if items[1].Text != "verify failed after 900ms: exit status 3" || items[1].Status != "failed" {
		t.Errorf("failed step: %+v", items[1])
	}
}
