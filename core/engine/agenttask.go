package engine

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"text/template"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/agenttask"
	"github.com/opsgate/opsgate/core/markdown"
)

// An agent_task step is work an external agent performs (docs/mcp.md).
// When a run reaches it, ONE checkpoint stores the agent call (pending),
// the step (waiting_agent) and the run (waiting_input, released). The call
// then changes only through the agent call operations (core/agenttask); when
// it is completed or failed the run is requeued, and the execution that
// claims it next settles the step here: its output is the agent's result.

// AgentTask is a flow step an external agent performs instead of a tool.
// Instructions and the Text of assets are templates over the run's
// arguments, rendered when the run reaches the step.
type AgentTask struct {
	Instructions string
	Skills       []string
	// Tools are the tools the agent may call: names of Options.Tools, or
	// tools Options.Lookup resolves when the agent calls them.
	Tools  []string
	Assets []core.AgentTaskAsset
	// OutputSchema is the JSON Schema of the result; nil takes any object.
	OutputSchema map[string]any
}

type compiledAgentTask struct {
	instructions *template.Template
	skills       []string
	tools        []string
	assets       []compiledAsset
	outputSchema json.RawMessage
}

type compiledAsset struct {
	asset core.AgentTaskAsset
	text  *template.Template
}

// compileAgentStep checks an agent_task step when the engine is built:
// templates parse, the output schema compiles, declared tools exist
// (unless a Lookup may know them later).
func (e *Engine) compileAgentStep(flow string, i int, s FlowStep) (compiledStep, error) {
	where := fmt.Sprintf("engine: flow %q step %d (agent_task)", flow, i)
	t := s.AgentTask
	if s.Tool != "" {
		return compiledStep{}, fmt.Errorf("%s: a step has a tool or an agent task, not both", where)
	}
	ins, err := template.New("instructions").Option("missingkey=error").Parse(t.Instructions)
	if err != nil {
		return compiledStep{}, fmt.Errorf("%s: instructions: %w", where, err)
	}
	ca := &compiledAgentTask{instructions: ins, skills: t.Skills, tools: t.Tools}
	for _, name := range t.Tools {
		if _, ok := e.tools[name]; !ok && e.opts.Lookup == nil {
			return compiledStep{}, fmt.Errorf("%s: unknown tool %q", where, name)
		}
	}
	seen := map[string]bool{}
	for _, a := range t.Assets {
		if a.ID == "" || seen[a.ID] {
			return compiledStep{}, fmt.Errorf("%s: asset id %q is empty or used twice", where, a.ID)
		}
		seen[a.ID] = true
		ca2 := compiledAsset{asset: a}
		if a.Text != "" {
			if ca2.text, err = template.New(a.ID).Option("missingkey=error").Parse(a.Text); err != nil {
				return compiledStep{}, fmt.Errorf("%s: asset %s: %w", where, a.ID, err)
			}
		}
		if ca2.asset.MediaType == "" {
			ca2.asset.MediaType = "text/plain; charset=utf-8"
			if a.Path != "" {
				ca2.asset.MediaType = "application/octet-stream"
			}
		}
		ca.assets = append(ca.assets, ca2)
	}
	schema, err := approvals.CompileSchema("output_schema", t.OutputSchema)
	if err != nil {
		return compiledStep{}, fmt.Errorf("%s: output_schema: %w", where, err)
	}
	ca.outputSchema = schema.JSON()
	return compiledStep{name: core.AgentTaskStep, stage: cmp.Or(s.Name, core.AgentTaskStep), agent: ca}, nil
}

// agentStep advances a run at an agent_task step.
func (x *execution) agentStep(ctx context.Context, cs compiledStep, st *core.Step) (bool, error) {
	if st == nil {
		return false, x.agentSuspend(ctx, cs)
	}
	if st.Status == core.StepWaitingAgent {
		return x.agentResume(ctx, cs, st)
	}
	// A step ended but the run did not: only a bug or a hand-edited
	// database gets here. End the run rather than loop.
	msg := fmt.Sprintf("agent task step %d is %s but the run went on", st.Index, st.Status)
	return false, x.end(ctx, nil, core.RunFailed, "agent_task", msg, "❌ Run "+x.run.ID+" failed: "+msg+".")
}

// agentSuspend renders the task and stores the pending call, the waiting
// step and the waiting run in one checkpoint.
func (x *execution) agentSuspend(ctx context.Context, cs compiledStep) error {
	e := x.e
	idx := x.run.StepIndex
	task, err := x.renderTask(ctx, cs)
	if err != nil {
		st := &core.Step{Index: idx, Tool: core.AgentTaskStep, Status: core.StepFailed, Error: err.Error()}
		msg := fmt.Sprintf("the agent task %s cannot be rendered: %v", cs.stage, err)
		return x.end(ctx, st, core.RunFailed, "invalid_args", msg, "❌ "+markdown.Escape(core.OneLine(msg)))
	}
	now := e.now()
	call := &core.AgentCall{ID: e.opts.NewID(), RunID: x.run.ID, StepIndex: idx, Status: core.AgentCallPending,
		Task: task, CreatedAt: now, UpdatedAt: now}
	st := &core.Step{Index: idx, Tool: core.AgentTaskStep, Status: core.StepWaitingAgent,
		Args: map[string]any{"agent_call_id": call.ID, "stage": cs.stage}, StartedAt: &now}
	text := fmt.Sprintf("🤖 Run %s waits for an agent to do %s: %s (agent call %s; an MCP client takes it with claim_agent_call).",
		x.run.ID, markdown.Escape(cs.stage), markdown.Escape(core.OneLine(core.Clip(task.Instructions, 200))), call.ID)
	c := core.Checkpoint{
		RunID: x.run.ID, Owner: e.opts.Owner, Now: now,
		Status: core.RunWaitingInput, Release: true, Step: st,
		Outbox: []core.OutboxMessage{e.reply(x.run, text)},
		Audit: []approvals.AuditEntry{e.audit(approvals.AuditAgentCallRequested, x.run.Requester, x.run.ID, "", core.AgentTaskStep,
			map[string]any{"call_id": call.ID, "step": idx, "stage": cs.stage, "tools": cs.agent.tools})},
		Events: append(x.events, e.event(x.run.ID, agenttask.EventAgentCallRequested, map[string]any{
			"call_id": call.ID, "step": idx, "stage": cs.stage})),
	}
	if err := e.store.AgentCallCreate(ctx, call, c); err != nil {
		if errors.Is(err, core.ErrConflict) {
			return fmt.Errorf("suspend for agent: %w", err)
		}
		return fmt.Errorf("suspend for agent: %w", err)
	}
	x.events = nil
	x.setStep(st)
	return nil
}

// renderTask renders the step's task over the run's arguments. Tools are
// described as they are now (an upstream tool's schema is its server's).
func (x *execution) renderTask(ctx context.Context, cs compiledStep) (core.AgentTask, error) {
	ca := cs.agent
	var b bytes.Buffer
	if err := ca.instructions.Execute(&b, x.run.Args); err != nil {
		return core.AgentTask{}, fmt.Errorf("instructions: %w", err)
	}
	task := core.AgentTask{Stage: cs.stage, Instructions: b.String(), Skills: append([]string{}, ca.skills...),
		Tools: []core.AgentTaskTool{}, Assets: []core.AgentTaskAsset{}, OutputSchema: ca.outputSchema}
	for _, name := range ca.tools {
		tt := core.AgentTaskTool{ID: name}
		t, err := x.e.lookupTool(ctx, name)
		if err != nil {
			// Described when it is back; calling it now fails clearly.
			x.log.Warn("agent task tool unavailable while rendering the task", "tool", name, "err", err)
		} else {
			tt.Description, tt.InputSchema, tt.Risk = t.Description, t.Schema.JSON(), string(t.Risk)
		}
		task.Tools = append(task.Tools, tt)
	}
	for _, a := range ca.assets {
		out := a.asset
		if a.text != nil {
			b.Reset()
			if err := a.text.Execute(&b, x.run.Args); err != nil {
				return core.AgentTask{}, fmt.Errorf("asset %s: %w", a.asset.ID, err)
			}
			out.Text = b.String()
		}
		task.Assets = append(task.Assets, out)
	}
	return task, nil
}

// agentResume settles a run claimed at its agent_task step: the call's
// outcome becomes the step's.
func (x *execution) agentResume(ctx context.Context, cs compiledStep, st *core.Step) (bool, error) {
	call, err := x.e.store.AgentCallForStep(ctx, x.run.ID, st.Index)
	if err != nil {
		return false, fmt.Errorf("load agent call of step %d: %w", st.Index, err)
	}
	now := x.e.now()
	done := *st
	done.FinishedAt = &now
	switch call.Status {
	case core.AgentCallCompleted:
		done.Status, done.Output = core.StepSucceeded, compactJSON(call.Result)
		next := st.Index + 1
		x.events = append(x.events, x.e.event(x.run.ID, agenttask.EventAgentCallFinished, map[string]any{
			"call_id": call.ID, "step": st.Index, "status": call.Status, "by": call.ClaimedBy}))
		if next == len(x.flow.steps) {
			return false, x.succeed(ctx, &done)
		}
		if err := x.checkpoint(ctx, core.Checkpoint{Step: &done, StepIndex: &next}); err != nil {
			return false, err
		}
		x.run.StepIndex = next
		return true, nil
	case core.AgentCallFailed:
		done.Status, done.Error = core.StepFailed, call.Error
		text := fmt.Sprintf("❌ The agent %s failed %s (run %s): %s", markdown.Escape(call.ClaimedBy), markdown.Escape(cs.stage),
			x.run.ID, markdown.Escape(core.OneLine(call.Error)))
		return false, x.end(ctx, &done, core.RunFailed, "agent_failed", call.Error, text)
	case core.AgentCallInterrupted, core.AgentCallCancelled:
		done.Status, done.Error = core.StepInterrupted, call.Error
		text := fmt.Sprintf("⚠️ Run %s was interrupted while an agent worked on %s.", x.run.ID, markdown.Escape(cs.stage))
		return false, x.end(ctx, &done, core.RunInterrupted, agenttask.CodeRunInterrupted, cmp.Or(call.Error, "agent task interrupted"), text)
	}
	// Requeued while the call is still open: wait again.
	return false, x.checkpoint(ctx, core.Checkpoint{Status: core.RunWaitingInput, Release: true})
}

// compactJSON is raw as compact JSON text (the step's output).
func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}
