package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	llm "github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/tools"
)

// askingTool asks the run's people which environment (as an upstream MCP
// server's elicitation does through core/upstream) and reports what it
// got; it counts its dispatches.
type askingTool struct{ runs atomic.Int32 }

func (a *askingTool) Run(ctx context.Context, c tools.Call) (tools.Result, error) {
	a.runs.Add(1)
	ask := llm.PeopleAskerFrom(ctx)
	if ask == nil {
		return tools.Result{}, fmt.Errorf("no people to ask")
	}
	got, err := ask(ctx, "up.deploy asks: where to?", llm.Ask{Questions: []llm.Question{
		{ID: "env", Kind: llm.QuestionChoice, Text: "Environment", Choices: []string{"staging", "prod"}}}})
	if err != nil {
		return tools.Result{}, err
	}
	out := fmt.Sprintf("answered=%v cancelled=%v by=%s why=%s", got.Answered, got.Cancelled, got.By, got.Why)
	for _, an := range got.Reply.Answers {
		out += " " + an.QuestionID + "=" + an.Answer
	}
	return tools.Result{Output: out}, nil
}

func (a *askingTool) Preview(context.Context, tools.Call) (string, error) { return "", nil }

func withAskingTool(a *askingTool) func(*Options) {
	return func(o *Options) {
		o.Tools = append(o.Tools, &tools.Tool{Name: "ask", Risk: approvals.RiskRead, Runner: a})
		o.Flows = append(o.Flows, Flow{Name: "ask", Command: "ask {service}", Steps: []FlowStep{{Tool: "ask", Args: map[string]any{"service": "{{.service}}"}}}})
		o.Policy.Rules = append(o.Policy.Rules, approvals.Rule{Tool: "ask", Effect: approvals.EffectAllow})
	}
}

// toolQuestionOf waits for run id's tool question and returns its action id.
func (h *harness) toolQuestionOf(id string) string {
	h.t.Helper()
	h.waitRun(id, core.RunWaitingInput)
	qs, err := h.eng.PendingQuestions(context.Background(), id)
	if err != nil || len(qs) != 1 {
		h.t.Fatalf("questions of %s: %+v %v", id, qs, err)
	}
	return qs[0].ActionID
}

func toolStep(t *testing.T, run *core.Run) core.Step {
	t.Helper()
	i := slices.IndexFunc(run.Steps, func(s core.Step) bool { return s.Tool == "ask" })
	if i < 0 {
		t.Fatalf("no ask step in %+v", run.Steps)
	}
	return run.Steps[i]
}

// TestToolQuestionTakesTheQuestionPath: a tool's question is the run's
// question — waiting_input, the question in the thread naming who asks,
// refused to someone who may not answer — while its call stays in
// flight: the run keeps its owner and lease (renewed across a long wait),
// the requester's answer reaches the tool, and the tool ran once.
func TestToolQuestionTakesTheQuestionPath(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		tool := &askingTool{}
		h := setup(t, b, withAskingTool(tool))
		rc := h.send("console:alice", "console:tq", "ask api")
		action := h.toolQuestionOf(rc.RunID)
		run := h.waitRun(rc.RunID, core.RunWaitingInput)
		if run.Owner == "" {
			t.Fatal("the run waiting on its tool's question lost its owner")
		}
		texts := strings.Join(h.outboxTexts(rc.RunID), "\n")
		if !strings.Contains(texts, "❓ up.deploy asks: where to?") || !strings.Contains(texts, "Environment") {
			t.Fatalf("the thread's question: %q", texts)
		}
		// Far past the lease: the heartbeat still renews it while the
		// question waits, so no replica takes the run from its call.
		h.clk.Advance(10 * time.Minute)
		waitFor(t, "the lease renewed past the clock", func() bool {
			r, err := h.store.RunGet(context.Background(), rc.RunID)
			return err == nil && r.LeaseUntil.After(h.clk.Now())
		})
		answer := json.RawMessage(`[{"questionId":"env","isSkipped":false,"answer":"prod"}]`)
		err := h.eng.Answer(context.Background(), core.Actor{ID: "console:mallory"}, "console", rc.RunID, action, answer)
		if de := decisionCode(t, err); de.Code != core.DecisionNotApprover {
			t.Fatalf("mallory answers: %v", err)
		}
		if err := h.eng.Answer(context.Background(), core.Actor{ID: "console:alice"}, "console", rc.RunID, action, answer); err != nil {
			t.Fatal(err)
		}
		run = h.waitRun(rc.RunID, core.RunSucceeded, core.RunFailed)
		if st := toolStep(t, run); run.Status != core.RunSucceeded || !strings.Contains(st.Output, "answered=true cancelled=false by=console:alice why= env=prod") {
			t.Fatalf("run %s, tool output %q", run.Status, st.Output)
		}
		if n := tool.runs.Load(); n != 1 {
			t.Fatalf("the tool was dispatched %d times", n)
		}
		if evs := h.eventTypes(rc.RunID); !slices.Contains(evs, core.EventQuestionRequested) || !slices.Contains(evs, core.EventQuestionAnswered) {
			t.Fatalf("events %v", evs)
		}
	})
}

// TestToolQuestionExpiresAsADecline: nobody answers before the question
// expires: the tool is told (not answered, expired), the run goes on, and
// a late answer is refused.
func TestToolQuestionExpiresAsADecline(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		tool := &askingTool{}
		h := setup(t, b, withAskingTool(tool))
		rc := h.send("console:alice", "console:tq-late", "ask api")
		action := h.toolQuestionOf(rc.RunID)
		h.clk.Advance(2 * time.Hour) // past approvals' ttl, the question's
		run := h.waitRun(rc.RunID, core.RunSucceeded, core.RunFailed)
		if st := toolStep(t, run); !strings.Contains(st.Output, "answered=false cancelled=false by= why=question expired") {
			t.Fatalf("run %s, tool output %q", run.Status, st.Output)
		}
		err := h.eng.Answer(context.Background(), core.Actor{ID: "console:alice"}, "console", rc.RunID, action,
			json.RawMessage(`[{"questionId":"env","isSkipped":false,"answer":"prod"}]`))
		if de := decisionCode(t, err); de.Code != core.DecisionExpired {
			t.Fatalf("a late answer: %v", err)
		}
	})
}

// deadStore is the store of an engine that "dies": once dead is set none
// of its writes lands, as a process that stopped writes nothing more —
// no question closed, no lease renewed, no run handed back.
type deadStore struct {
	core.Store
	dead *atomic.Bool
}

var errDied = errors.New("the process died")

func (s deadStore) RunCheckpoint(ctx context.Context, c core.Checkpoint) error {
	if s.dead.Load() {
		return errDied
	}
	return s.Store.RunCheckpoint(ctx, c)
}

func (s deadStore) RunHeartbeat(ctx context.Context, p core.RunHeartbeatParams) error {
	if s.dead.Load() {
		return errDied
	}
	return s.Store.RunHeartbeat(ctx, p)
}

// TestToolQuestionAskerGoneAfterACrash: the replica whose tool call waits
// on a question dies (its writes stop, its lease lapses). The call died
// with it, so no answer can reach it: a new engine on the same store
// refuses answers, closes the question (its message says why) and
// recovers the flow's step as any call cut by a crash — not idempotent,
// it is interrupted, its outcome unknown, and not dispatched again.
func TestToolQuestionAskerGoneAfterACrash(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		tool := &askingTool{}
		var dead atomic.Bool
		engines := 0
		h := setup(t, b, func(o *Options) {
			withAskingTool(tool)(o)
			if engines++; engines == 1 {
				o.Store = deadStore{Store: o.Store, dead: &dead}
			}
		})
		rc := h.send("console:alice", "console:tq-crash", "ask api")
		action := h.toolQuestionOf(rc.RunID)
		dead.Store(true)
		h.quiesce()
		h.resume()
		if run := h.waitRun(rc.RunID, core.RunWaitingInput); run.Owner == "" {
			t.Fatal("the dead replica's run lost its owner before its lease lapsed")
		}
		h.clk.Advance(2 * time.Second) // past the dead replica's lease
		err := h.eng.Answer(context.Background(), core.Actor{ID: "console:alice"}, "console", rc.RunID, action,
			json.RawMessage(`[{"questionId":"env","isSkipped":false,"answer":"prod"}]`))
		if de := decisionCode(t, err); de.Code != core.DecisionExpired {
			t.Fatalf("an answer to a question whose call is gone: %v", err)
		}
		run := h.waitRun(rc.RunID, core.RunInterrupted, core.RunSucceeded, core.RunFailed)
		if st := toolStep(t, run); run.Status != core.RunInterrupted || st.Status != core.StepInterrupted {
			t.Fatalf("run %s, step %+v", run.Status, st)
		}
		i := slices.IndexFunc(run.Steps, toolQuestion)
		if i < 0 || run.Steps[i].Status != core.StepFailed || run.Steps[i].Error != whyAskerGone {
			t.Fatalf("the question step %+v", run.Steps)
		}
		if n := tool.runs.Load(); n != 1 {
			t.Fatalf("the tool was dispatched %d times", n)
		}
		items, _, err := h.store.OutboxList(context.Background(), core.OutboxListParams{Status: core.DeliveryPending, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		var updates []string
		for _, m := range items {
			if m.RunID == rc.RunID && m.Kind == core.KindQuestionUpdate {
				updates = append(updates, m.Text)
			}
		}
		if len(updates) != 1 || !containsAll(updates[0], "❓ The tool ask asked: Environment", "no answer can reach it") {
			t.Fatalf("the question's message was not closed: %q", updates)
		}
	})
}
