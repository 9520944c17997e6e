package agentrun

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	llm "github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/gate"
	"github.com/opsgate/opsgate/core/tools"
)

// The delegation itself passes the gate (docs/agents.md, "Sub-agents"): a
// model's "agent:<name>" call is a gate.Call like any other of its calls —
// judged by the live policy (rules match the tool name "agent:<name>" and
// its arguments), suspended on a card with the model's one-line reason,
// re-judged when decided — and its dispatch is the start of the child's
// turn. The tool exists only for the agent whose tools name it, and only
// while one of its executions looks it up (delegatorKey): a flow step or an
// external agent's task never resolves it.
//
// Dispatch records the parent's step dispatching (the gate's start record),
// then the child's run under a key made of the parent's run and step, so
// recording it again — an idempotent re-dispatch after a crash — finds the
// same run; then the step waits (waiting_agent) until the child ends.

// delegatorKey carries the agent execution whose calls the gate judges, so
// the engine's tool lookup resolves its "agent:<name>" tools.
type delegatorKey struct{}

func withDelegator(ctx context.Context, ax *exec) context.Context {
	return context.WithValue(ctx, delegatorKey{}, ax)
}

// DelegationTool is the tool of the sub-agent call name in the agent
// execution ctx carries, or nil when there is none: not an agent's call,
// or a tool its agent's tools do not name. The engine's tool lookup (the
// gate's) asks it first.
func (l *Loop) DelegationTool(ctx context.Context, name string) (*tools.Tool, error) {
	if _, sub := llm.SubagentOf(name); !sub {
		return nil, nil // every other tool of every call is looked up here first
	}
	ax, ok := ctx.Value(delegatorKey{}).(*exec)
	if !ok || ax.l != l || !slices.ContainsFunc(l.subagentTools(ax.ag.Agent), func(t llm.Tool) bool { return t.Name == name }) {
		return nil, nil
	}
	return l.subagentTool(name, ax)
}

// DescribeTool is the sub-agent tool name of a configured agent as an
// edit of its approval is validated against and its edit form shows it
// (described only: it is dispatched from nowhere but its agent's
// execution), or nil when name is no such tool.
func (l *Loop) DescribeTool(name string) (*tools.Tool, error) {
	if child, ok := llm.SubagentOf(name); ok && l.agents[child] != nil {
		return l.subagentTool(name, nil)
	}
	return nil, nil
}

// subagentTool is the tool "agent:<child>" whose dispatch by ax starts
// the child (ax nil: a description that starts nothing).
func (l *Loop) subagentTool(name string, ax *exec) (*tools.Tool, error) {
	child, _ := llm.SubagentOf(name)
	rt := l.agents[child]
	if rt == nil {
		return nil, nil // off: the lookup says it is unknown
	}
	schema, err := approvals.CompileSchema(name, llm.SubagentSchema())
	if err != nil {
		return nil, fmt.Errorf("agentrun: %s schema: %w", name, err)
	}
	// A delegation changes nothing by itself (each call of the child
	// passes the gate) and recording it twice finds one child.
	return &tools.Tool{Name: name, Description: rt.Description, Risk: approvals.RiskRead, Idempotent: true, Schema: schema,
		Runner: delegation{ax: ax, child: child}}, nil
}

// delegationProblem says why the model's call may not delegate to name, or
// "": checked before the gate, so no card asks about a call that could not
// start.
func (ax *exec) delegationProblem(call llm.Call, name string) string {
	link, _ := LinkOf(ax.run)
	task, _ := call.Args[llm.SubagentTask].(string)
	switch {
	case ax.l.agents[name] == nil:
		return fmt.Sprintf("the agent %s is not available", name)
	case name == ax.ag.Name:
		return fmt.Sprintf("the agent %s may not delegate to itself", name)
	case link.Depth+1 > MaxSubagentDepth:
		return fmt.Sprintf("sub-agents nest at most %d deep and this call would be %d deep; do the task yourself", MaxSubagentDepth, link.Depth+1)
	case strings.TrimSpace(task) == "":
		return fmt.Sprintf("the %q argument is required: the task for %s, with everything it needs to know", llm.SubagentTask, name)
	}
	return ""
}

// childSteps is the max_steps of the child the call at idx starts: its own,
// or what the parent's max_steps has left after this call.
func (ax *exec) childSteps(idx int, child *runtime) int {
	left := max(1, agentSteps(ax.ag).Limit()-idx-1)
	if child == nil {
		return left // gone since it started: what the parent had left
	}
	return min(left, agentSteps(child).Limit())
}

// delegation is the Runner of a sub-agent tool: its dispatch records the
// child's turn and returns the child run's id.
type delegation struct {
	ax    *exec
	child string
}

// Run implements tools.Runner: the step the gate just recorded
// dispatching (by its idempotency key) gets its child.
func (d delegation) Run(ctx context.Context, c tools.Call) (tools.Result, error) {
	ax := d.ax
	i := -1
	if ax != nil && c.RunID == ax.run.ID {
		i = slices.IndexFunc(ax.run.Steps, func(st core.Step) bool {
			return st.Status == core.StepDispatching && st.IdempotencyKey == c.IdempotencyKey
		})
	}
	if i < 0 {
		return tools.Result{}, fmt.Errorf("%s%s is started only by its agent's own call", llm.SubagentPrefix, d.child)
	}
	st := ax.run.Steps[i]
	child := ax.l.agents[d.child]
	if child == nil {
		return tools.Result{}, fmt.Errorf("the agent %s is not available", d.child)
	}
	args := d.ax.childArgs(c.Args, st.Index, child, ax.l.opts.NewID())
	id, err := ax.host.StartSubagent(ctx, ax.run, ax.ag.Name, d.child, st.Index, args)
	if err != nil {
		return tools.Result{}, err
	}
	if id == "" {
		return tools.Result{}, errors.New("the run was cancelled before the agent started")
	}
	return tools.Result{Output: id}, nil
}

// Preview implements tools.Runner: what the card says the call does.
func (d delegation) Preview(context.Context, tools.Call) (string, error) {
	return fmt.Sprintf("Starts a turn of the agent %s with this task; each of its tool calls passes the policy again.", d.child), nil
}

// childArgs are the args of the step waiting on the child id: the call's,
// with the child's run, session and max_steps.
func (ax *exec) childArgs(callArgs map[string]any, idx int, child *runtime, id string) map[string]any {
	args := maps.Clone(callArgs)
	if args == nil {
		args = map[string]any{}
	}
	args[SubRunID], args[subSession], args[SubMaxSteps] = id, core.SubSession(ax.run.ID, idx, ax.run.Thread).Key, ax.childSteps(idx, child)
	return args
}

// delegationRecord is the gate.Record of a sub-agent call: every outcome
// but a dispatch settles as any call of the model does (a deny or a
// rejection is the model's tool result, an interrupted call ends the run);
// a dispatch leaves the step waiting for the child.
type delegationRecord struct {
	*agentRecord
}

// Settle implements gate.Record.
func (r *delegationRecord) Settle(ctx context.Context, o *gate.Outcome) error {
	if o.Kind != gate.Ran || o.RunErr != nil {
		return r.agentRecord.Settle(ctx, o)
	}
	ax := r.ax
	r.done = true
	name, _ := llm.SubagentOf(o.Tool.Name)
	id := o.Result.Output
	st := r.Dispatching(o.Start)
	st.Status = core.StepWaitingAgent
	st.Args = ax.childArgs(o.Args, st.Index, ax.l.agents[name], id)
	link, _ := LinkOf(ax.run)
	thread := core.SubSession(ax.run.ID, st.Index, ax.run.Thread)
	// The gate's tool.finished says the dispatch ended; the call ends
	// with the child's turn (subagentResult), which writes it then.
	ev := ax.host.Event(ax.run.ID, EventSubagentStarted, map[string]any{"tool_call_id": r.llm.ID, "agent": name, "run_id": id,
		"session_id": thread.String(), "sessionId": thread.Key, "depth": link.Depth + 1})
	if err := ax.Checkpoint(ctx, core.Checkpoint{Status: core.RunWaitingInput, Release: true, Step: st, Events: []core.RunEvent{ev}}); err != nil {
		now := ax.l.now()
		st.Status, st.Error, st.FinishedAt = core.StepCancelled, "run cancelled while the agent started", &now
		return ax.SettleCancelled(ctx, err, st)
	}
	// The child may have ended before this run waited, when its wake-up
	// found this run still running: look again.
	if child, err := ax.l.opts.Store.RunGet(ctx, id); err == nil && child.Status.Final() {
		ax.host.WakeParent(ctx, child)
	}
	return nil
}
