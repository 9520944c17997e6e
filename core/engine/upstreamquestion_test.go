package engine

import (
	"context"
	"encoding/json"
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
