package tui

import (
	"encoding/json"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/internal/client"
)

// withProgress puts a tool.output event in the timeline: in place of the
// same step's earlier one, or at the end.
func withProgress(evs []client.RunEvent, ev client.RunEvent) []client.RunEvent {
	step := progressOf(ev).Step
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == core.EventToolOutput && progressOf(evs[i]).Step == step {
			evs[i] = ev
			return evs
		}
	}
	return append(evs, ev)
}

// progress is the data of a tool.output event.
type progress struct {
	Step      int      `json:"step"`
	Tool      string   `json:"tool"`
	Lines     []string `json:"lines"`
	ElapsedMS int64    `json:"elapsed_ms"`
}

func progressOf(ev client.RunEvent) progress {
	var p progress
	_ = json.Unmarshal(ev.Data, &p)
	return p
}
