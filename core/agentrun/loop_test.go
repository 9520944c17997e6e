package agentrun

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	llm "github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/gate"
	"github.com/opsgate/opsgate/internal/fakellm"
)

// The engine's tests drive the loop through the whole engine on both
// stores (core/engine agentrun_test.go, subagent_test.go, files_test.go).
// These check the seam itself: the loop drives a turn with nothing but
// what it declares — an Execution, a Host and a Store — and refuses a
// configuration it cannot run.

// seamStore is the loop's Store over one thread's history in memory.
type seamStore struct {
	hist []core.AgentRecord
	runs map[string]*core.Run
}

func (s *seamStore) AgentHistory(_ context.Context, _ core.Thread, _ int) ([]core.AgentRecord, error) {
	return slices.Clone(s.hist), nil
}

func (s *seamStore) RunGet(_ context.Context, id string) (*core.Run, error) {
	if r := s.runs[id]; r != nil {
		return r, nil
	}
	return nil, core.ErrNotFound
}

func (s *seamStore) RunCheckpoint(context.Context, core.Checkpoint) error { return nil }

// seamExec is an Execution that keeps every checkpoint and the run's end.
type seamExec struct {
	run    *core.Run
	store  *seamStore
	queued []core.RunEvent
	cps    []core.Checkpoint
	ended  *seamEnd
}

type seamEnd struct {
	status     core.RunStatus
	code, text string
	events     []core.RunEvent
}

func (x *seamExec) Run() *core.Run    { return x.run }
func (x *seamExec) Log() *slog.Logger { return slog.New(slog.DiscardHandler) }
func (x *seamExec) Queue(evs ...core.RunEvent) {
	x.queued = append(x.queued, evs...)
}

// Checkpoint keeps c and, as the engine's store does, appends its
// agent.message events to the history and its step to the run.
func (x *seamExec) Checkpoint(_ context.Context, c core.Checkpoint) error {
	c.Events = append(x.queued, c.Events...)
	x.queued = nil
	for _, ev := range c.Events {
		if ev.Type == core.EventAgentMessage {
			x.store.hist = append(x.store.hist, core.AgentRecord{Seq: int64(len(x.store.hist) + 1), RunID: x.run.ID, Message: ev.Data})
		}
	}
	if c.Step != nil {
		x.run.Steps = append(x.run.Steps, *c.Step)
	}
	x.cps = append(x.cps, c)
	return nil
}

func (x *seamExec) End(_ context.Context, _ *core.Step, status core.RunStatus, code, _, text string, _ ...approvals.AuditEntry) error {
	x.ended = &seamEnd{status: status, code: code, text: text, events: x.queued}
	return nil
}

func (x *seamExec) EndReplacing(string) {}

func (x *seamExec) SettleCancelled(_ context.Context, err error, _ *core.Step, _ ...core.RunEvent) error {
	return err
}

func (x *seamExec) StepRecord(int, string, *core.Step) StepRecord { return nil }

func (x *seamExec) Pass(context.Context, gate.Call, gate.Record) (*gate.Outcome, error) {
	panic("no call of these turns passes the gate")
}

// seamHost is the Host: plain replies, every message to the thread.
type seamHost struct{ now time.Time }

func (h seamHost) Event(runID, typ string, data any) core.RunEvent {
	return core.NewRunEvent(runID, typ, data, h.now)
}

func (h seamHost) Reply(run *core.Run, text string) core.OutboxMessage {
	return core.OutboxMessage{ID: "m-" + text, Thread: run.Thread, Kind: core.KindReply, Text: text, RunID: run.ID}
}

func (h seamHost) ToThread(_ core.Thread, ms ...core.OutboxMessage) []core.OutboxMessage { return ms }
func (h seamHost) Streams(string) bool                                                   { return false }
func (h seamHost) Fetcher(string) core.AttachmentFetcher                                 { return nil }

func (h seamHost) Question(run *core.Run, ask llm.Ask, idx int, _ time.Time) core.OutboxMessage {
	return h.Reply(run, "asks: "+ask.Questions[0].Text)
}

func (h seamHost) QuestionExpired(run *core.Run, _ string, _ llm.Ask, _ time.Time) core.OutboxMessage {
	return h.Reply(run, "expired")
}

func (h seamHost) StartSubagent(context.Context, *core.Run, string, string, int, map[string]any) (string, error) {
	return "", nil
}

func (h seamHost) WakeParent(context.Context, *core.Run) {}

func newSeamLoop(t *testing.T, model llm.Model) (*Loop, *seamExec) {
	t.Helper()
	now := time.Date(2026, 12, 8, 0, 0, 0, 0, time.UTC)
	st := &seamStore{runs: map[string]*core.Run{}}
	l, err := New(Options{Store: st, Host: seamHost{now: now}, Agents: []Agent{{Name: "ops", Model: model, Default: true}},
		ApprovalTTL: time.Hour, Now: func() time.Time { return now }, NewID: func() string { return "id" }})
	if err != nil {
		t.Fatal(err)
	}
	run := &core.Run{ID: "r1", Flow: core.AgentFlow("ops"), Thread: core.Thread{Channel: "console", Key: "t1"}, Requester: "alice",
		Status: core.RunRunning, Reason: "deploy please", CreatedAt: now}
	return l, &seamExec{run: run, store: st}
}

func TestDriveThroughItsSeams(t *testing.T) {
	t.Run("Reply", func(t *testing.T) {
		l, x := newSeamLoop(t, fakellm.Replies(&llm.Response{Text: "Deployed."}))
		if err := l.Drive(context.Background(), x, "ops"); err != nil {
			t.Fatal(err)
		}
		if x.ended == nil || x.ended.status != core.RunSucceeded || x.ended.text != "Deployed." {
			t.Fatalf("run ended %+v, want succeeded with the model's answer", x.ended)
		}
		// The person's message is committed before the model is called,
		// and the answer goes with the run's end.
		if len(x.cps) != 1 || len(x.cps[0].Events) != 1 || x.cps[0].Events[0].Type != core.EventAgentMessage {
			t.Fatalf("checkpoints %+v, want the request's message first", x.cps)
		}
		var m llm.Message
		if len(x.ended.events) != 1 || json.Unmarshal(x.ended.events[0].Data, &m) != nil || m.Role != llm.RoleAssistant || m.Text != "Deployed." {
			t.Fatalf("events with the end %+v, want the assistant's message", x.ended.events)
		}
	})
	t.Run("AskUserWaitsForInput", func(t *testing.T) {
		ask := `{"questions":[{"id":"env","kind":"choice","text":"Which environment?","choices":["staging","prod"]}]}`
		l, x := newSeamLoop(t, fakellm.Replies(&llm.Response{ToolCalls: []llm.ToolCall{{ID: "c1", Name: llm.AskUserTool, Arguments: ask}}}))
		if err := l.Drive(context.Background(), x, "ops"); err != nil {
			t.Fatal(err)
		}
		if x.ended != nil {
			t.Fatalf("run ended %+v, want it waiting for input", x.ended)
		}
		last := x.cps[len(x.cps)-1]
		if last.Status != core.RunWaitingInput || !last.Release || last.Step == nil || last.Step.Status != StepWaitingInput ||
			len(last.Outbox) != 1 || !strings.Contains(last.Outbox[0].Text, "Which environment?") || last.Step.Output != last.Outbox[0].ID {
			t.Fatalf("last checkpoint %+v, want the run waiting_input with the question in the thread", last)
		}
	})
	t.Run("ModelError", func(t *testing.T) {
		l, x := newSeamLoop(t, fakellm.Replies())
		if err := l.Drive(context.Background(), x, "ops"); err != nil {
			t.Fatal(err)
		}
		if x.ended == nil || x.ended.status != core.RunFailed || x.ended.code != "model_error" {
			t.Fatalf("run ended %+v, want failed model_error", x.ended)
		}
	})
	t.Run("UnknownAgent", func(t *testing.T) {
		l, x := newSeamLoop(t, fakellm.Replies())
		if err := l.Drive(context.Background(), x, "nobody"); err != nil {
			t.Fatal(err)
		}
		if x.ended == nil || x.ended.code != "unknown_agent" || len(x.cps) != 0 {
			t.Fatalf("run ended %+v after %d checkpoints, want unknown_agent at once", x.ended, len(x.cps))
		}
	})
}

func TestNewRefusesWhatCannotRun(t *testing.T) {
	m := fakellm.Replies()
	base := Options{Store: &seamStore{}, Host: seamHost{}}
	for name, tc := range map[string]struct {
		o    Options
		want string
	}{
		"NoStore":     {Options{Host: seamHost{}}, "no store"},
		"NoName":      {Options{Store: base.Store, Host: base.Host, Agents: []Agent{{Model: m}}}, "no name or no model"},
		"NoModel":     {Options{Store: base.Store, Host: base.Host, Agents: []Agent{{Name: "a"}}}, "no name or no model"},
		"Duplicate":   {Options{Store: base.Store, Host: base.Host, Agents: []Agent{{Name: "a", Model: m}, {Name: "a", Model: m}}}, "duplicate agent"},
		"TwoDefaults": {Options{Store: base.Store, Host: base.Host, Agents: []Agent{{Name: "a", Model: m, Default: true}, {Name: "b", Model: m, Default: true}}}, "both the default"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := New(tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
