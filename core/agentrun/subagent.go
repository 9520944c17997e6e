package agentrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/opsgate/opsgate/core"
	llm "github.com/opsgate/opsgate/core/agent"
)

// Sub-agents (docs/agents.md, "Sub-agents"): "agent:<name>" in an agent's
// tools lets its model delegate a task to another configured agent. The
// call starts the child's turn as a run of its own, in a session of its
// own (core.SubSession), and the parent waits for it durably:
//
//   - the call itself passes the gate like any call of the model
//     (delegate.go): its dispatch records the child under a key made
//     of the parent's run and step, so recording it again after a crash
//     finds the same run, and then the parent's step waits
//     (waiting_agent, the run waiting_input and released);
//   - the child is an ordinary agent run: every tool call it makes passes
//     the gate, its cards and questions go to the root thread (the thread
//     the delegation began in) and its approvals wait only when someone
//     attends that thread;
//   - its approval and question events are also written to every
//     ancestor run in the same transaction (mirrored, with the child's
//     sessionId), so the parent's event stream shows them;
//   - when the child's run ends, the parent is requeued and gets the
//     child's answer as the call's result, framed as external content; a
//     sweep requeues a parent whose wake-up was lost in a crash;
//   - cancelling the parent cancels the child; depth is capped at
//     MaxSubagentDepth and the child's max_steps at what the parent has
//     left.

// MaxSubagentDepth bounds nesting: a turn started by a sub-agent call is
// one deeper than its parent, and a call that would go deeper is refused
// to the model. config check refuses cycles before anything runs.
const MaxSubagentDepth = 3

// The run events of delegation, on the parent run.
const (
	EventSubagentStarted  = "subagent.started"
	EventSubagentFinished = "subagent.finished"
)

// Keys of a sub-agent run's Args (its link to the parent) and of the
// parent's waiting step's Args: SubRunID names the child run, SubMaxSteps
// its max_steps.
const (
	subParent    = "subagent_parent"
	subStep      = "subagent_step"
	subDepth     = "subagent_depth"
	subAncestors = "subagent_ancestors"
	SubMaxSteps  = "max_steps"
	SubRunID     = "run_id"
	subSession   = "session_id"
)

// Link is a sub-agent run's link to the run that started it.
type Link struct {
	Parent    string
	Step      int
	Depth     int
	Ancestors []string
	MaxSteps  int
}

// LinkOf reads the link of run; ok is false for a run no agent started.
func LinkOf(run *core.Run) (Link, bool) {
	parent, _ := run.Args[subParent].(string)
	if parent == "" {
		return Link{}, false
	}
	l := Link{Parent: parent, Step: intArg(run.Args[subStep]), Depth: intArg(run.Args[subDepth]), MaxSteps: intArg(run.Args[SubMaxSteps])}
	if as, ok := run.Args[subAncestors].([]any); ok {
		for _, a := range as {
			if s, ok := a.(string); ok {
				l.Ancestors = append(l.Ancestors, s)
			}
		}
	} else if as, ok := run.Args[subAncestors].([]string); ok {
		l.Ancestors = as
	}
	return l, true
}

// ChildArgs are the Args of the sub-agent run that step idx of parent
// starts with args (the step's: its task, the child's run id, session and
// max_steps): its link to parent.
func ChildArgs(parent *core.Run, idx int, args map[string]any) map[string]any {
	link, _ := LinkOf(parent)
	return map[string]any{subParent: parent.ID, subStep: idx, subDepth: link.Depth + 1,
		subAncestors: append(slices.Clone(link.Ancestors), parent.ID), SubMaxSteps: args[SubMaxSteps]}
}

// intArg reads a number of stored Args (JSON gives float64).
func intArg(v any) int {
	switch n := v.(type) {
	case int:
		return n
	case float64:
		return int(n)
	case json.Number:
		i, _ := n.Int64()
		return int(i)
	}
	return 0
}

// subagentTools are the sub-agent tools of a ("agent:<name>" entries that
// name an agent that is on), each described by the child's description.
func (l *Loop) subagentTools(a Agent) []llm.Tool {
	var out []llm.Tool
	for _, g := range a.Tools {
		name, ok := llm.SubagentOf(g)
		if !ok || slices.ContainsFunc(out, func(t llm.Tool) bool { return t.Name == g }) {
			continue
		}
		i := slices.IndexFunc(l.opts.Agents, func(c Agent) bool { return c.Name == name })
		if i < 0 {
			continue // off (its model is off); config check named it
		}
		desc := strings.TrimSpace(l.opts.Agents[i].Description)
		if desc == "" {
			desc = "Delegate a task to the agent " + name + "."
		}
		out = append(out, llm.Tool{Name: g, Description: desc, Schema: llm.SubagentSchema()})
	}
	return out
}

// limited is ag for a sub-agent run: its max_steps bounded by what the
// parent had left when it delegated.
func limited(ag *runtime, run *core.Run) *runtime {
	l, ok := LinkOf(run)
	if !ok || l.MaxSteps <= 0 || l.MaxSteps >= agentSteps(ag).Limit() {
		return ag
	}
	cp := *ag
	cp.MaxSteps = l.MaxSteps
	return &cp
}

// delegation handles a sub-agent call of the stored model turn that is
// not the gate's to take (delegate.go): a new call that may not
// delegate is refused to the model; a waiting one checks on its child; a
// cancelled one is told. handled is false for a call the gate takes: new,
// waiting on its approval, or found dispatching.
func (ax *exec) delegation(ctx context.Context, call llm.Call, idx int, name string) (done, handled bool, err error) {
	st := ax.stepAt(idx)
	switch {
	case st == nil:
		problem := ax.delegationProblem(call, name)
		if problem == "" {
			return false, false, nil
		}
		now := ax.l.now()
		failed := &core.Step{Index: idx, Tool: call.Tool, Status: core.StepFailed, Args: call.Args, Error: problem, FinishedAt: &now}
		done, err = ax.result(ctx, call, llm.Outcome{Kind: llm.OutcomeInvalid, Problem: problem}, failed)
	case st.Status == core.StepWaitingAgent:
		done, err = ax.awaitSubagent(ctx, call, st)
	case st.Status == core.StepCancelled:
		done, err = ax.result(ctx, call, llm.Outcome{Kind: llm.OutcomeCancelled}, nil)
	default:
		return false, false, nil
	}
	return done, true, err
}

// awaitSubagent gives the model the child's answer once its run ended;
// until then the parent waits again.
func (ax *exec) awaitSubagent(ctx context.Context, call llm.Call, st *core.Step) (bool, error) {
	store, host := ax.l.opts.Store, ax.host
	childID, _ := st.Args[SubRunID].(string)
	child, err := store.RunGet(ctx, childID)
	switch {
	case errors.Is(err, core.ErrNotFound):
		// Stopped between the wait and the child's record: record it now.
		if err := ax.Checkpoint(ctx, core.Checkpoint{Status: core.RunWaitingInput, Release: true}); err != nil {
			return true, err
		}
		name, _ := llm.SubagentOf(st.Tool)
		_, err := host.StartSubagent(ctx, ax.run, ax.ag.Name, name, st.Index, st.Args)
		return true, err
	case err != nil:
		return true, fmt.Errorf("sub-agent run %s: %w", childID, err)
	case !child.Status.Final():
		if err := ax.Checkpoint(ctx, core.Checkpoint{Status: core.RunWaitingInput, Release: true}); err != nil {
			return true, err
		}
		// The child may have ended between the read and the wait, when
		// its wake-up found this run still running: look again.
		if again, err := store.RunGet(ctx, childID); err == nil && again.Status.Final() {
			host.WakeParent(ctx, again)
		}
		return true, nil
	}
	return false, ax.subagentResult(ctx, call, st, child)
}

// subagentResult commits the child's outcome as the call's result: its
// answer (external content, labelled agent:<name>), or why it has none.
func (ax *exec) subagentResult(ctx context.Context, call llm.Call, st *core.Step, child *core.Run) error {
	answer, err := ax.l.subagentAnswer(ctx, child)
	if err != nil {
		return err
	}
	now := ax.l.now()
	done := *st
	done.FinishedAt = &now
	o := llm.Outcome{Kind: llm.OutcomeRan, Output: answer, Source: call.Tool}
	if child.Status == core.RunSucceeded {
		done.Status, done.Output = core.StepSucceeded, answer
	} else {
		why := fmt.Sprintf("the agent's turn ended %s", child.Status)
		if child.ErrorMessage != "" {
			why += ": " + child.ErrorMessage
		}
		done.Status, done.Error, o.Error = core.StepFailed, why, why
	}
	// The call ends with the child's turn: its tool.finished (the gate's
	// dispatch record ended when the child started) and subagent.finished.
	host := ax.host
	evs := []core.RunEvent{
		host.Event(ax.run.ID, core.EventToolFinished, map[string]any{"step": st.Index, "tool": st.Tool, "tool_call_id": call.ID, "agent": ax.ag.Name,
			"ok": done.Status == core.StepSucceeded}),
		host.Event(ax.run.ID, EventSubagentFinished, map[string]any{"tool_call_id": call.ID, "run_id": child.ID, "status": child.Status}),
	}
	return ax.commit(ctx, core.Checkpoint{Step: &done, Events: evs}, o.Result(call, now))
}

// subagentAnswer is the child's last answer: the text of the last message
// its model wrote.
func (l *Loop) subagentAnswer(ctx context.Context, child *core.Run) (string, error) {
	recs, err := l.opts.Store.AgentHistory(ctx, child.Thread, 0)
	if err != nil {
		return "", fmt.Errorf("sub-agent run %s history: %w", child.ID, err)
	}
	for i := len(recs) - 1; i >= 0; i-- {
		var m llm.Message
		if recs[i].RunID != child.ID || json.Unmarshal(recs[i].Message, &m) != nil || m.Role != llm.RoleAssistant {
			continue
		}
		if t := strings.TrimSpace(m.Text); t != "" {
			return t, nil
		}
	}
	return "", nil
}
