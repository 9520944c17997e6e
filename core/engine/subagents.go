package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	llm "github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/agentrun"
)

// The engine's side of sub-agents (docs/agents.md, "Sub-agents"; the loop's
// side, the delegating call and its result, is core/agentrun): recording
// the child's turn, waking the parent when it ends, cancelling children
// with their parent, mirroring a child's approval and question events to
// its ancestors, the sweep of lost wake-ups, and the thread reply that
// answers the deepest child waiting.

// MaxSubagentDepth bounds nesting (agentrun.MaxSubagentDepth).
const MaxSubagentDepth = agentrun.MaxSubagentDepth

// The run events of delegation, on the parent run.
const (
	EventSubagentStarted  = agentrun.EventSubagentStarted
	EventSubagentFinished = agentrun.EventSubagentFinished
)

// mirrored are the event types of a sub-agent run its ancestors get too,
// written with them; its permission.decided, written by the store with the
// decision, is copied to them in that transaction (approvalDecide).
var mirrored = []string{core.EventPermissionRequested, core.EventQuestionRequested, core.EventQuestionAnswered}

// recordSubagent records the turn of the agent name that step idx of
// parent starts, with args (its task and the child's proposed run id, session and
// max_steps), and returns the child's run id: recorded again (after a
// crash) under the same key, the same run is found. It returns "" when the
// parent was cancelled first: no child starts.
func (e *Engine) recordSubagent(ctx context.Context, parent *core.Run, parentAgent, name string, idx int, args map[string]any) (string, error) {
	childID, _ := args[agentrun.SubRunID].(string)
	task, _ := args[llm.SubagentTask].(string)
	thread := core.SubSession(parent.ID, idx, parent.Thread)
	now := e.now()
	ev := core.ChannelEvent{Channel: core.AgentSessionChannel, EventID: "subagent:" + parent.ID + "/" + strconv.Itoa(idx),
		Actor: core.Actor{ID: parent.Requester}, Thread: thread, Text: task, ReceivedAt: now}
	p := core.InboxRecordParams{Event: ev}
	e.agentRun(&p, name)
	p.Run.ID = childID
	p.Run.Args = agentrun.ChildArgs(parent, idx, args)
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

// wakeParent requeues the parent of child (a sub-agent run that ended) so
// it takes the child's answer. A parent not waiting (cancelled, or still
// running: it looks again once it waits) is left alone.
func (e *Engine) wakeParent(ctx context.Context, child *core.Run) {
	l, ok := agentrun.LinkOf(child)
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
		id, _ := st.Args[agentrun.SubRunID].(string)
		if _, err := e.Cancel(ctx, id, actor); err != nil && !errors.Is(err, core.ErrConflict) && !errors.Is(err, core.ErrNotFound) {
			e.log.Warn("cancel a sub-agent run with its parent", "run", id, "parent", run.ID, "err", err)
		}
	}
}

// withMirrors returns evs of run plus, for a sub-agent run, a copy of each
// approval and question event for every ancestor, naming the child's
// session, so the ancestors' streams show what the child waits for.
func (e *Engine) withMirrors(run *core.Run, evs []core.RunEvent) []core.RunEvent {
	l, ok := agentrun.LinkOf(run)
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
// permission.decided, or none (no agent delegates, not a sub-agent's
// approval, or it cannot be read: the decision then finds what is wrong
// itself).
func (e *Engine) decidedCopies(ctx context.Context, id string) []approvals.EventCopy {
	delegates := slices.ContainsFunc(e.opts.Agents, func(a Agent) bool {
		return slices.ContainsFunc(a.Tools, func(g string) bool { _, ok := llm.SubagentOf(g); return ok })
	})
	if !delegates {
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
	l, ok := agentrun.LinkOf(run)
	if !ok {
		return nil
	}
	out := make([]approvals.EventCopy, 0, len(l.Ancestors))
	for _, anc := range l.Ancestors {
		out = append(out, approvals.EventCopy{RunID: anc, Data: mirrorData(run)})
	}
	return out
}

// sweepSubagents requeues parents (of the runs waiting for input) whose
// wake-up was lost: waiting on a sub-agent run that ended, or that was
// never recorded (a crash between the two), for longer than a lease.
func (e *Engine) sweepSubagents(ctx context.Context, runs []*core.Run) error {
	if !e.loop.Any() {
		return nil
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
			id, _ := st.Args[agentrun.SubRunID].(string)
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
				next, _ = st.Args[agentrun.SubRunID].(string)
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
