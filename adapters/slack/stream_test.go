package slack

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	llm "github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/engine"
	"github.com/opsgate/opsgate/core/tools"
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

// interimModel streams a turn that ends in a tool call ("Checking api
// first."), then, with the tool's result, streams its answer; each piece
// 1.2 s apart, so both turns stream.
type interimModel struct{}

func (interimModel) Stream(ctx context.Context, req *llm.Request, sink llm.Sink) (*llm.Response, error) {
	called := false
	for _, m := range req.Messages {
		if m.Role == llm.RoleTool {
			called = true
		}
	}
	pieces := []string{"Checking api", " first."}
	if called {
		pieces = []string{"api is", " healthy."}
	}
	for _, p := range pieces {
		sink(llm.Delta{Text: p})
		select {
		case <-time.After(1200 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	resp := &llm.Response{Text: strings.Join(pieces, ""), Stop: llm.StopEnd}
	if !called {
		resp.ToolCalls = []llm.ToolCall{{ID: "call_1", Name: "status", Arguments: `{"service":"api","reason":"asked"}`}}
		resp.Stop = llm.StopToolUse
	}
	return resp, nil
}

// TestInterimTextStaysInTheThread: a streamed turn that ends in a tool
// call keeps its text in its own message; the answer streams into a new
// message after it, never over the first.
func TestInterimTextStaysInTheThread(t *testing.T) {
	t.Parallel()
	schema, err := approvals.CompileSchema("status", map[string]any{"type": "object"})
	if err != nil {
		t.Fatal(err)
	}
	e := setup(t, func(_ *Config, ho *adaptertest.HarnessOptions) {
		ho.Agents = []engine.Agent{{Name: "ops", ModelName: "fake", Model: interimModel{}, Tools: []string{"*"}, Default: true}}
		ho.MoreTools = []*tools.Tool{{Name: "status", Risk: approvals.RiskRead, Schema: schema, Runner: &adaptertest.Recorder{Name: "status"}}}
		ho.MoreRules = []approvals.Rule{{Tool: "status", Effect: approvals.EffectAllow}}
	})
	e.h.Engine.StreamInto(channelName)
	status(t, e.slash("UREQ", "how is api?"), http.StatusOK)
	root := e.roots()[0]
	run := e.runOf(root.TS)
	e.h.WaitRun(run.ID, core.RunSucceeded)
	e.h.WaitIdle()
	var thread []adaptertest.Message
	for _, m := range (received{e.fake}).Received() {
		if strings.HasSuffix(m.Thread.Key, "/"+root.TS) && m.ID != root.TS {
			thread = append(thread, m)
		}
	}
	view := adaptertest.View(thread)
	if len(view) != 2 || view[0].Text != "Checking api first." || view[1].Text != "api is healthy." {
		t.Fatalf("the thread reads %+v; want the interim text, then the answer, each in its own message", view)
	}
}
