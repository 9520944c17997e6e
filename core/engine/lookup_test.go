package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/tools"
)

// dynamicTools is a tools.ToolLookup whose tools come and go, like an upstream
// MCP server's: the engine must resolve them when a step runs.
type dynamicTools struct {
	mu    sync.Mutex
	tools map[string]*tools.Tool
	down  error // when set, every lookup fails with it (the server is down)
}

func (d *dynamicTools) LookupTool(_ context.Context, name string) (*tools.Tool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.down != nil {
		return nil, d.down
	}
	if t, ok := d.tools[name]; ok {
		return t, nil
	}
	return nil, fmt.Errorf("%w %q", tools.ErrUnknownTool, name)
}

func (d *dynamicTools) set(t *tools.Tool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.tools[t.Name] = t
}

func (d *dynamicTools) remove(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.tools, name)
}

// withUpstream adds flows over "up.write" (asks) and "up.read" (allowed),
// tools only the lookup knows, and returns the lookup and the write tool's
// runner.
func withUpstream(t testing.TB, present bool) (*dynamicTools, *recorder, func(*Options)) {
	schema, err := approvals.CompileSchema("up.write", map[string]any{
		"type": "object", "required": []any{"path", "content"},
		"properties":           map[string]any{"path": map[string]any{"type": "string"}, "content": map[string]any{"type": "string"}},
		"additionalProperties": false,
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{name: "up.write"}
	lk := &dynamicTools{tools: map[string]*tools.Tool{}}
	write := &tools.Tool{Name: "up.write", Risk: approvals.RiskReversible, Destructive: true, Schema: schema, Runner: rec}
	if present {
		lk.set(write)
	}
	return lk, rec, func(o *Options) {
		o.Lookup = lk
		o.Flows = append(o.Flows, Flow{Name: "write", Command: "write {path} {content}",
			Steps: []FlowStep{{Tool: "up.write", Args: map[string]any{"path": "{{.path}}", "content": "{{.content}}"}}}})
		o.Policy.Rules = append(o.Policy.Rules, approvals.Rule{Tool: "up.*", Effect: approvals.EffectAsk, Approvers: []string{"group:sre"}})
	}
}

func TestLookupToolResolvedWhenTheStepRuns(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		lk, rec, tweak := withUpstream(t, false)
		h := setup(t, b, tweak) // the tool does not exist yet: New accepts the flow anyway
		lk.set(&tools.Tool{Name: "up.write", Risk: approvals.RiskReversible, Destructive: true, Runner: rec})
		rc := h.send("console:req", "console:lk1", "write notes.txt hello")
		a := h.waitApproval(rc.RunID)
		if a.Tool != "up.write" || !a.Destructive || a.Risk != approvals.RiskReversible {
			t.Fatalf("approval: tool %q destructive %v risk %s", a.Tool, a.Destructive, a.Risk)
		}
		if _, err := h.decide("console:alice", a.ID, "approve"); err != nil {
			t.Fatal(err)
		}
		run := h.waitRun(rc.RunID, core.RunSucceeded, core.RunFailed)
		if run.Status != core.RunSucceeded {
			t.Fatalf("run %s: %s", run.Status, run.ErrorMessage)
		}
		if calls := rec.callsFor(run.ID); len(calls) != 1 || calls[0].Args["content"] != "hello" {
			t.Fatalf("calls: %+v", calls)
		}
	})
}

func TestLookupToolThatDisappearedFailsClearly(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		lk, rec, tweak := withUpstream(t, true)
		h := setup(t, b, tweak)
		lk.remove("up.write")
		rc := h.send("console:req", "console:lk2", "write a b")
		run := h.waitRun(rc.RunID, core.RunFailed, core.RunSucceeded, core.RunWaitingApproval)
		if run.Status != core.RunFailed || run.ErrorCode != "tool_unavailable" {
			t.Fatalf("run %s %s: %s", run.Status, run.ErrorCode, run.ErrorMessage)
		}
		if len(run.Steps) != 1 || run.Steps[0].Status != core.StepFailed || !strings.Contains(run.Steps[0].Error, `unknown tool "up.write"`) {
			t.Fatalf("steps: %+v", run.Steps)
		}
		if texts := h.outboxTexts(run.ID); len(texts) != 1 || !containsAll(texts[0], "up.write is unavailable", "it did not run") {
			t.Fatalf("reply: %q", texts)
		}
		if rec.total() != 0 {
			t.Fatal("a vanished tool was called")
		}
	})
}

func TestLookupToolGoneWhileWaitingNeverRuns(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		lk, rec, tweak := withUpstream(t, true)
		h := setup(t, b, tweak)
		rc := h.send("console:req", "console:lk3", "write a b")
		a := h.waitApproval(rc.RunID)
		lk.mu.Lock()
		lk.down = errors.New("upstream up is not connected")
		lk.mu.Unlock()
		if _, err := h.decide("console:alice", a.ID, "approve"); err != nil {
			t.Fatal(err)
		}
		run := h.waitRun(rc.RunID, core.RunFailed, core.RunSucceeded)
		if run.Status != core.RunFailed || run.ErrorCode != "tool_unavailable" || !strings.Contains(run.ErrorMessage, "not connected") {
			t.Fatalf("run %s %s: %s", run.Status, run.ErrorCode, run.ErrorMessage)
		}
		if run.Steps[0].ApprovalID != a.ID || run.Steps[0].Args["path"] != "a" {
			t.Fatalf("the failed step lost its approval or args: %+v", run.Steps[0])
		}
		if rec.total() != 0 {
			t.Fatal("called a tool that could not be resolved")
		}
	})
}

func TestLookupToolEditValidatedAgainstItsSchema(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		_, rec, tweak := withUpstream(t, true)
		h := setup(t, b, tweak)
		rc := h.send("console:req", "console:lk4", "write a b")
		a := h.waitApproval(rc.RunID)
		_, err := h.decide("console:alice", a.ID, "edit", func(d *core.Decision) { d.Args = map[string]any{"path": "a", "mode": "x"} })
		if de := decisionCode(t, err); de.Code != core.DecisionInvalidArgs {
			t.Fatalf("edit outside the schema: %+v", de)
		}
		if _, err := h.decide("console:alice", a.ID, "edit", func(d *core.Decision) { d.Args = map[string]any{"path": "a", "content": "edited"} }); err != nil {
			t.Fatal(err)
		}
		run := h.waitRun(rc.RunID, core.RunSucceeded, core.RunFailed)
		if calls := rec.callsFor(run.ID); run.Status != core.RunSucceeded || len(calls) != 1 || calls[0].Args["content"] != "edited" {
			t.Fatalf("run %s, calls %+v", run.Status, calls)
		}
	})
}

func TestLookupToolUnavailableMidDispatchInterrupts(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		lk, rec, tweak := withUpstream(t, true)
		h := setup(t, b, tweak)
		lk.mu.Lock()
		// Even an idempotent tool is not re-sent when it cannot be resolved:
		// its declaration is unknown, so the outcome stays unknown.
		lk.tools["up.write"].Idempotent = true
		lk.down = errors.New("upstream up is not connected")
		lk.mu.Unlock()
		id := crashMidDispatch(t, h, "write a b", "up.write")
		run := h.waitRun(id, core.RunInterrupted, core.RunSucceeded, core.RunFailed)
		if run.Status != core.RunInterrupted || run.Steps[0].Status != core.StepInterrupted {
			t.Fatalf("run %s: %+v", run.Status, run.Steps)
		}
		if rec.total() != 0 {
			t.Fatal("re-dispatched a tool that could not be resolved")
		}
	})
}
