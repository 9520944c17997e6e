package slack

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/core"
	llm "github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/engine"
)

// slowModel writes its answer in three pieces over about 2.5 seconds.
type slowModel struct{}

func (slowModel) Stream(ctx context.Context, _ *llm.Request, sink llm.Sink) (*llm.Response, error) {
	for _, p := range []string{"Checking api", ", then web", ": all healthy."} {
		sink(llm.Delta{Text: p})
		select {
		case <-time.After(1200 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &llm.Response{Text: "Checking api, then web: all healthy.", Stop: llm.StopEnd}, nil
}

// TestAgentTextStreamsIntoOneMessage: while the model writes, one message
// in the thread is edited in place (at most once a second); the final
// answer ends in that same message.
func TestAgentTextStreamsIntoOneMessage(t *testing.T) {
	t.Parallel()
	e := setup(t, func(_ *Config, ho *adaptertest.HarnessOptions) {
		ho.Agents = []engine.Agent{{Name: "ops", ModelName: "fake", Model: slowModel{}, Default: true}}
	})
	e.h.Engine.StreamInto(channelName)
	status(t, e.slash("UREQ", "how are api and web?"), http.StatusOK)
	root := e.roots()[0]
	run := e.runOf(root.TS)
	e.h.Eventually("the run to finish", func() bool {
		cur, _ := e.h.Store.RunGet(t.Context(), run.ID)
		return cur.Status == core.RunSucceeded
	})
	var streamed string
	e.h.Eventually("the final answer in the streamed message", func() bool {
		var posts, edits int
		var last string
		for _, m := range e.fake.Log() {
			if m.ThreadTS != root.TS && m.EditOf == "" {
				continue
			}
			switch {
			case m.EditOf == "" && strings.Contains(m.Text, "Checking"):
				posts++
				streamed = m.TS
			case m.EditOf != "" && m.EditOf == streamed:
				edits++
				last = m.Text
			}
		}
		return posts == 1 && edits >= 1 && last == "Checking api, then web: all healthy."
	})
	// No second message carries the answer.
	n := 0
	for _, m := range e.fake.Thread("C1", root.TS) {
		if strings.Contains(m.Text, "all healthy") && m.TS != streamed {
			n++
		}
	}
	if n != 0 {
		t.Fatalf("the answer was also posted as %d new message(s)", n)
	}
}
