package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	llm "github.com/opsgate/opsgate/core/agent"
)

// Sub-agents (docs/agents.md, "Sub-agents"): "agent:<name>" in an agent's
// tools lets its model delegate a task to another configured agent. The
// call starts the child's turn as a run of its own, in a session of its
// own (core.SubSession), and the parent waits for it durably:
//
//   - the call itself passes the gate like any call of the model
//     (subagentgate.go): its dispatch records the child under a key made
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
// parent's waiting step's Args.
const (
	subParent    = "subagent_parent"
	subStep      = "subagent_step"
	subDepth     = "subagent_depth"
	subAncestors = "subagent_ancestors"
	subMaxSteps  = "max_steps"
	subRunID     = "run_id"
	subSession   = "session_id"
)

// mirrored are the event types of a sub-agent run its ancestors get too,
// written with them; its permission.decided, written by the store with the
// decision, is copied to them in that transaction (approvalDecide).
var mirrored = []string{core.EventPermissionRequested, core.EventQuestionRequested, core.EventQuestionAnswered}

// subLink is a sub-agent run's link to the run that started it.
type subLink struct {
	Parent    string
	Step      int
	Depth     int
	Ancestors []string
	MaxSteps  int
}

// subLinkOf reads the link of run; ok is false for a run no agent started.
func subLinkOf(run *core.Run) (subLink, bool) {
	parent, _ := run.Args[subParent].(string)
	if parent == "" {
		return subLink{}, false
	}
	l := subLink{Parent: parent, Step: intArg(run.Args[subStep]), Depth: intArg(run.Args[subDepth]), MaxSteps: intArg(run.Args[subMaxSteps])}
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
func (e *Engine) subagentTools(a Agent) []llm.Tool {
	var out []llm.Tool
	for _, g := range a.Tools {
		name, ok := llm.SubagentOf(g)
		if !ok || slices.ContainsFunc(out, func(t llm.Tool) bool { return t.Name == g }) {
			continue
		}
		i := slices.IndexFunc(e.opts.Agents, func(c Agent) bool { return c.Name == name })
		if i < 0 {
			continue // off (its model is off); config check named it
		}
		desc := strings.TrimSpace(e.opts.Agents[i].Description)
		if desc == "" {
			desc = "Delegate a task to the agent " + name + "."
		}
		out = append(out, llm.Tool{Name: g, Description: desc, Schema: llm.SubagentSchema()})
	}
	return out
}

// limited is ag for a sub-agent run: its max_steps bounded by what the
// parent had left when it delegated.
func limited(ag *agentRuntime, run *core.Run) *agentRuntime {
	l, ok := subLinkOf(run)
	if !ok || l.MaxSteps <= 0 || l.MaxSteps >= agentSteps(ag).Limit() {
		return ag
	}
	cp := *ag
	cp.MaxSteps = l.MaxSteps
	return &cp
}

// delegation handles a sub-agent call of the stored model turn that is
// not the gate's to take (subagentgate.go): a new call that may not
// delegate is refused to the model; a waiting one checks on its child; a
// cancelled one is told. handled is false for a call the gate takes: new,
// waiting on its approval, or found dispatching.
func (ax *agentExec) delegation(ctx context.Context, call llm.Call, idx int, name string) (done, handled bool, err error) {
	st := ax.stepAt(idx)
	switch {
	case st == nil:
		problem := ax.delegationProblem(call, name)
		if problem == "" {
			return false, false, nil
		}
		now := ax.e.now()
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

// recordSubagent records the turn of the agent name that step idx of
// parent starts,
// with args (its task and the child's proposed run id, session and
// max_steps), and returns the child's run id: recorded again (after a
// crash) under the same key, the same run is found. It returns "" when the
// parent was cancelled first: no child starts.
func (e *Engine) recordSubagent(ctx context.Context, parent *core.Run, parentAgent, name string, idx int, args map[string]any) (string, error) {
	childID, _ := args[subRunID].(string)
	task, _ := args[llm.SubagentTask].(string)
	link, _ := subLinkOf(parent)
	thread := core.SubSession(parent.ID, idx, parent.Thread)
	now := e.now()
	ev := core.ChannelEvent{Channel: core.AgentSessionChannel, EventID: "subagent:" + parent.ID + "/" + strconv.Itoa(idx),
		Actor: core.Actor{ID: parent.Requester}, Thread: thread, Text: task, ReceivedAt: now}
	p := core.InboxRecordParams{Event: ev}
	e.agentRun(&p, name)
	p.Run.ID = childID
	p.Run.Args = map[string]any{subParent: parent.ID, subStep: idx, subDepth: link.Depth + 1,
		subAncestors: append(slices.Clone(link.Ancestors), parent.ID), subMaxSteps: args[subMaxSteps]}
	// The task is the parent model's words: external content, labelled
	// with the agent that wrote it.
	p.Events = []core.RunEvent{
		e.event(childID, core.EventRunQueued, map[string]any{"flow": p.Run.Flow, "kind": core.RunKindAgent, "agent": name, "parent_run": parent.ID}),
		e.event(childID, core.EventAgentMessage, llm.UserMessage(now, llm.External(llm.SubagentPrefix+parentAgent, "", task))),
	}
	// A parent cancelled since it began to wait found no child to cancel:
	// start none, and cancel one recorded while it was being cancelled.
	ended := func() bool {
		cur, err := e.store.RunGet(ctx, parent.ID)
		return err == nil && cur.Status.Final()
	}
	if ended() {
		return "", nil
	}
	rc, err := e.record(ctx, p)
	if err != nil {
		return "", fmt.Errorf("engine: start sub-agent %s of run %s: %w", name, parent.ID, err)
	}
	if ended() {
		if _, err := e.Cancel(ctx, rc.RunID, core.Actor{ID: "system"}); err != nil && !errors.Is(err, core.ErrConflict) {
			e.log.Warn("cancel the sub-agent of a cancelled run", "run", rc.RunID, "parent", parent.ID, "err", err)
		}
	}
	return rc.RunID, nil
}

// awaitSubagent gives the model the child's answer once its run ended;
// until then the parent waits again.
func (ax *agentExec) awaitSubagent(ctx context.Context, call llm.Call, st *core.Step) (bool, error) {
	e := ax.e
	childID, _ := st.Args[subRunID].(string)
	child, err := e.store.RunGet(ctx, childID)
	switch {
	case errors.Is(err, core.ErrNotFound):
		// Stopped between the wait and the child's record: record it now.
		if err := ax.checkpoint(ctx, core.Checkpoint{Status: core.RunWaitingInput, Release: true}); err != nil {
			return true, err
		}
		name, _ := llm.SubagentOf(st.Tool)
		_, err := e.recordSubagent(ctx, ax.run, ax.ag.Name, name, st.Index, st.Args)
		return true, err
	case err != nil:
		return true, fmt.Errorf("sub-agent run %s: %w", childID, err)
	case !child.Status.Final():
		if err := ax.checkpoint(ctx, core.Checkpoint{Status: core.RunWaitingInput, Release: true}); err != nil {
			return true, err
		}
		// The child may have ended between the read and the wait, when
		// its wake-up found this run still running: look again.
		if again, err := e.store.RunGet(ctx, childID); err == nil && again.Status.Final() {
			e.wakeParent(ctx, again)
		}
		return true, nil
	}
	return false, ax.subagentResult(ctx, call, st, child)
}

// subagentResult commits the child's outcome as the call's result: its
// answer (external content, labelled agent:<name>), or why it has none.
func (ax *agentExec) subagentResult(ctx context.Context, call llm.Call, st *core.Step, child *core.Run) error {
	e := ax.e
	answer, err := e.subagentAnswer(ctx, child)
	if err != nil {
		return err
	}
	now := e.now()
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
	evs := []core.RunEvent{
		e.event(ax.run.ID, core.EventToolFinished, map[string]any{"step": st.Index, "tool": st.Tool, "tool_call_id": call.ID, "agent": ax.ag.Name,
			"ok": done.Status == core.StepSucceeded}),
		e.event(ax.run.ID, EventSubagentFinished, map[string]any{"tool_call_id": call.ID, "run_id": child.ID, "status": child.Status}),
	}
	return ax.commit(ctx, core.Checkpoint{Step: &done, Events: evs}, o.Result(call, now))
}

// subagentAnswer is the child's last answer: the text of the last message
// its model wrote.
func (e *Engine) subagentAnswer(ctx context.Context, child *core.Run) (string, error) {
	recs, err := e.store.AgentHistory(ctx, child.Thread, 0)
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

// wakeParent requeues the parent of child (a sub-agent run that ended) so
// it takes the child's answer. A parent not waiting (cancelled, or still
// running: it looks again once it waits) is left alone.
func (e *Engine) wakeParent(ctx context.Context, child *core.Run) {
	l, ok := subLinkOf(child)
	if !ok {
		return
	}
	err := e.store.RunCheckpoint(ctx, core.Checkpoint{RunID: l.Parent, Now: e.now(), ExpectStatus: []core.RunStatus{core.RunWaitingInput}, Status: core.RunQueued})
	if err != nil && !errors.Is(err, core.ErrConflict) && !errors.Is(err, core.ErrNotFound) {
		e.log.Warn("wake the parent of a sub-agent run; the sweep will", "run", child.ID, "parent", l.Parent, "err", err)
	}
}

// subagentsCancelled follows the cancellation of run (as read before it):
// its parent learns of it, and its children waiting are cancelled too.
func (e *Engine) subagentsCancelled(ctx context.Context, run *core.Run, actor core.Actor) {
	e.wakeParent(ctx, run)
	for _, st := range run.Steps {
		if _, ok := llm.SubagentOf(st.Tool); !ok || st.Status != core.StepWaitingAgent {
			continue
		}
		id, _ := st.Args[subRunID].(string)
		if _, err := e.Cancel(ctx, id, actor); err != nil && !errors.Is(err, core.ErrConflict) && !errors.Is(err, core.ErrNotFound) {
			e.log.Warn("cancel a sub-agent run with its parent", "run", id, "parent", run.ID, "err", err)
		}
	}
}

// withMirrors returns evs of run plus, for a sub-agent run, a copy of each
// approval and question event for every ancestor, naming the child's
// session, so the ancestors' streams show what the child waits for.
func (e *Engine) withMirrors(run *core.Run, evs []core.RunEvent) []core.RunEvent {
	l, ok := subLinkOf(run)
	if !ok {
		return evs
	}
	out := evs
	for _, ev := range evs {
		if !slices.Contains(mirrored, ev.Type) {
			continue
		}
		var data map[string]any
		if json.Unmarshal(ev.Data, &data) != nil || data == nil {
			data = map[string]any{}
		}
		maps.Copy(data, mirrorData(run))
		for _, a := range l.Ancestors {
			m := core.NewRunEvent(a, ev.Type, data, ev.At)
			if m.At.IsZero() {
				m.At = e.now()
			}
			out = append(out, m)
		}
	}
	return out
}

// mirrorData is what a sub-agent run's events copied to its ancestors
// add: the child's session and agent.
func mirrorData(run *core.Run) map[string]any {
	name, _ := core.AgentOf(run.Flow)
	return map[string]any{"sessionId": run.Thread.Key, "session_id": run.Thread.String(), "subagent": name, "subagent_run": run.ID}
}

// approvalDecide is the store's ApprovalDecide, with the permission.decided
// of a sub-agent's approval copied to every ancestor run in the deciding
// transaction (approvals.Outcome.Copies). Only an engine whose agents
// delegate reads the approval and its run first to find them.
func (e *Engine) approvalDecide(ctx context.Context, p approvals.ApprovalDecideParams) (*approvals.Approval, error) {
	if copies := e.decidedCopies(ctx, p.ID); len(copies) > 0 {
		decide := p.Decide
		p.Decide = func(a *approvals.Approval) approvals.Outcome {
			out := decide(a)
			if out.Final && out.Approval != nil {
				out.Copies = copies
			}
			return out
		}
	}
	return e.store.ApprovalDecide(ctx, p)
}

// decidedCopies are the ancestors of the run of approval id that get its
// permission.decided, or none (no delegation configured, not a
// sub-agent's approval, or it cannot be read: the decision then finds
// what is wrong itself).
func (e *Engine) decidedCopies(ctx context.Context, id string) []approvals.EventCopy {
	if !slices.ContainsFunc(e.opts.Agents, func(a Agent) bool { return len(e.subagentTools(a)) > 0 }) {
		return nil
	}
	a, err := e.store.ApprovalGet(ctx, id)
	if err != nil {
		return nil
	}
	if th, err := core.ParseThread(a.Thread); err != nil {
		return nil
	} else if _, ok := core.SubSessionRoot(th); !ok {
		return nil
	}
	run, err := e.store.RunGet(ctx, a.RunID)
	if err != nil {
		return nil
	}
	l, ok := subLinkOf(run)
	if !ok {
		return nil
	}
	out := make([]approvals.EventCopy, 0, len(l.Ancestors))
	for _, anc := range l.Ancestors {
		out = append(out, approvals.EventCopy{RunID: anc, Data: mirrorData(run)})
	}
	return out
}

// sweepSubagents requeues parents whose wake-up was lost: waiting on a
// sub-agent run that ended, or that was never recorded (a crash between
// the two), for longer than a lease.
func (e *Engine) sweepSubagents(ctx context.Context) error {
	if len(e.assistants) == 0 {
		return nil
	}
	runs, _, err := e.store.RunList(ctx, core.RunListParams{Status: core.RunWaitingInput, Limit: sweepBatch})
	if err != nil {
		return fmt.Errorf("engine: list runs waiting: %w", err)
	}
	now := e.now()
	for _, r := range runs {
		if _, ok := core.AgentOf(r.Flow); !ok || now.Before(r.UpdatedAt.Add(e.opts.Lease)) {
			continue
		}
		full, err := e.store.RunGet(ctx, r.ID) // lists carry no steps
		if err != nil {
			return fmt.Errorf("engine: sub-agents of %s: %w", r.ID, err)
		}
		for _, st := range full.Steps {
			if _, ok := llm.SubagentOf(st.Tool); !ok || st.Status != core.StepWaitingAgent {
				continue
			}
			id, _ := st.Args[subRunID].(string)
			child, err := e.store.RunGet(ctx, id)
			if err == nil && !child.Status.Final() {
				continue
			}
			if err != nil && !errors.Is(err, core.ErrNotFound) {
				return fmt.Errorf("engine: sub-agent %s of %s: %w", id, r.ID, err)
			}
			err = e.store.RunCheckpoint(ctx, core.Checkpoint{RunID: r.ID, Now: now, ExpectStatus: []core.RunStatus{core.RunWaitingInput}, Status: core.RunQueued})
			if err != nil && !errors.Is(err, core.ErrConflict) {
				return fmt.Errorf("engine: wake %s: %w", r.ID, err)
			}
		}
	}
	return nil
}

// waitingChild is the run a thread reply answers: run itself, or the
// deepest sub-agent run it waits on that waits for input.
func (e *Engine) waitingChild(ctx context.Context, run *core.Run) *core.Run {
	for range MaxSubagentDepth {
		full, err := e.store.RunGet(ctx, run.ID) // lists carry no steps
		if err != nil {
			return run
		}
		next := ""
		for _, st := range full.Steps {
			if _, ok := llm.SubagentOf(st.Tool); ok && st.Status == core.StepWaitingAgent {
				next, _ = st.Args[subRunID].(string)
			}
		}
		if next == "" {
			return run
		}
		child, err := e.store.RunGet(ctx, next)
		if err != nil || child.Status != core.RunWaitingInput {
			return run
		}
		run = child
	}
	return run
}

// rethread is ms addressed to thread (a sub-agent's messages, to its root).
func rethread(thread core.Thread, ms []core.OutboxMessage) []core.OutboxMessage {
	out := make([]core.OutboxMessage, len(ms))
	for i, m := range ms {
		m.Thread = thread
		out[i] = m
	}
	return out
}
