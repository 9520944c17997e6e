package agentrun

import (
	"context"
	"fmt"
	"strings"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	llm "github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/gate"
	"github.com/opsgate/opsgate/core/markdown"
)

// An agent's tool calls pass the gate (core/gate) like every other call:
// the model's one-line reason is required of a call the gate asks about,
// later calls of the turn wait on the same card, and every outcome is the
// call's step and its tool result for the model, committed together.

// handleCall takes the next unanswered call of the stored model turn
// through the gate (core/gate); later are the turn's calls after it,
// which wait on the same card when it suspends, so one card holds every
// call that waits.
func (ax *exec) handleCall(ctx context.Context, tc turnCall, later []turnCall) (bool, error) {
	call, idx := tc.call, tc.idx
	if !tc.admitted {
		return ax.result(ctx, call, llm.Outcome{Kind: llm.OutcomeStepLimit, MaxSteps: agentSteps(ax.ag).Limit()}, nil)
	}
	if call.Problem != "" {
		now := ax.l.now()
		st := &core.Step{Index: idx, Tool: call.Tool, Status: core.StepFailed, Args: call.Args, Error: call.Problem, FinishedAt: &now}
		return ax.result(ctx, call, llm.Outcome{Kind: llm.OutcomeInvalid}, st)
	}
	if call.Tool == llm.AskUserTool {
		return ax.askUser(ctx, call, idx)
	}
	name, sub := llm.SubagentOf(call.Tool)
	if sub {
		if done, handled, err := ax.delegation(ctx, call, idx, name); handled {
			return done, err
		}
	}
	st := ax.stepAt(idx)
	if st != nil && st.Status != core.StepWaitingApproval && st.Status != core.StepDispatching {
		// A step already settled whose result is missing cannot be
		// committed apart from its result; treat it as unknown.
		return ax.result(ctx, call, llm.Outcome{Kind: llm.OutcomeInterrupted}, nil)
	}
	rec := &agentRecord{StepRecord: ax.StepRecord(idx, call.Tool, st), ax: ax, llm: call}
	c := ax.gateCall(rec.StepRecord, call)
	for _, lc := range later {
		// A later sub-agent call joins the card like any call, unless it
		// could not start (delegationProblem): that one is refused in
		// its turn.
		laterSub, ok := llm.SubagentOf(lc.call.Tool)
		if lc.admitted && lc.call.Problem == "" && lc.call.Tool != llm.AskUserTool && ax.stepAt(lc.idx) == nil &&
			(!ok || ax.delegationProblem(lc.call, laterSub) == "") {
			c.Later = append(c.Later, ax.gateCall(ax.StepRecord(lc.idx, lc.call.Tool, nil), lc.call))
		}
	}
	var gr gate.Record = rec
	if sub {
		gr = &delegationRecord{agentRecord: rec}
	}
	// The lookup resolves this agent's sub-agent tools (delegate.go).
	if _, err := ax.Pass(withDelegator(ctx, ax), c, gr); err != nil {
		return true, err
	}
	return rec.done, nil
}

// gateCall is the gate.Call of one call of the model: its one-line reason
// is required (issue 26: a call that needs approval without one goes back
// to the model), and an Agent API session nobody attends has no approver.
func (ax *exec) gateCall(r StepRecord, call llm.Call) gate.Call {
	c := r.Call(call.Args, call.Reason)
	c.RequireReason, c.NoApprover = true, ax.unattended()
	c.Tags = map[string]any{"tool_call_id": call.ID, "agent": ax.ag.Name}
	return c
}

// unattended says why nobody can answer an approval of this turn, or "":
// an Agent API session (no chat thread, no card) whose event stream nobody
// holds.
func (ax *exec) unattended() string {
	att, home := ax.l.opts.Attendance, core.HomeThread(ax.run.Thread)
	if home.Channel != core.AgentSessionChannel || att == nil || att.Attended(home) {
		return ""
	}
	return "nobody holds the app's event stream to answer it"
}

// agentRecord is the gate.Record of one call of the model: every outcome
// becomes the call's step and its tool result for the model, committed
// together; an interrupted call ends the run.
type agentRecord struct {
	StepRecord
	ax  *exec
	llm llm.Call
	// done reports, once settled, that the execution ends (suspended,
	// waiting, interrupted or stopped).
	done bool
}

// Settle implements gate.Record.
func (r *agentRecord) Settle(ctx context.Context, o *gate.Outcome) error {
	ax, call := r.ax, r.llm
	tool := call.Tool
	result := func(out llm.Outcome, st *core.Step, audit ...approvals.AuditEntry) error {
		_, err := ax.result(ctx, call, out, st, audit...)
		return err
	}
	switch o.Kind {
	case gate.Ran:
		return r.ran(ctx, o)
	case gate.StartRefused:
		r.done = true
		return r.StartRefused(ctx, o)
	case gate.Waiting:
		// The turn's next call waits on the card (its siblings ran).
		r.done = true
		return r.Wait(ctx, o.Approval.ID)
	case gate.Denied:
		return result(llm.Outcome{Kind: llm.OutcomeDenied, Rule: o.Verdict.Why}, r.Ended(o, core.StepDenied, o.Verdict.Why), o.Audit...)
	case gate.Invalid:
		problem := fmt.Sprintf("the arguments are invalid for %s: %v; call it again with arguments its schema accepts", tool, o.Err)
		return result(llm.Outcome{Kind: llm.OutcomeInvalid, Problem: problem}, r.Ended(o, core.StepFailed, o.Err.Error()))
	case gate.Unavailable:
		problem := fmt.Sprintf("the tool %s is unavailable (%v)", tool, o.Err)
		return result(llm.Outcome{Kind: llm.OutcomeInvalid, Problem: problem}, r.Ended(o, core.StepFailed, problem))
	case gate.NeedsReason:
		return result(llm.Outcome{Kind: llm.OutcomeInvalid, Problem: o.Problem}, r.Ended(o, core.StepFailed, o.Problem))
	case gate.NoApprover, gate.Released:
		return result(llm.Outcome{Kind: llm.OutcomeNoApprover, Why: o.Problem}, r.Ended(o, core.StepDenied, "nobody could approve: "+o.Problem), o.Audit...)
	case gate.Rejected:
		st := r.Ended(o, core.StepRejected, "")
		st.Output = o.Approval.RejectionReasons()
		return result(llm.Outcome{Kind: llm.OutcomeRejected, By: strings.Join(o.Approval.Winners(), ", "), Feedback: st.Output}, st)
	case gate.Expired:
		a := o.Approval
		return result(llm.Outcome{Kind: llm.OutcomeExpired, TTL: a.ExpiresAt.Sub(a.CreatedAt)}, r.Ended(o, core.StepFailed, "approval expired"))
	case gate.Refused:
		problem := "it was approved but the gate refused to run it: " + o.Problem
		return result(llm.Outcome{Kind: llm.OutcomeInvalid, Problem: problem}, r.Ended(o, core.StepFailed, o.Problem), o.Audit...)
	case gate.Interrupted:
		r.done = true
		st := r.Ended(o, core.StepInterrupted, o.Problem)
		r.KeepDispatch(st)
		ax.Queue(ax.message(llm.Outcome{Kind: llm.OutcomeInterrupted}.Result(call, o.At)))
		text := fmt.Sprintf("⚠️ Run %s was interrupted while %s was running: outcome unknown — check before retrying.", ax.run.ID, markdown.Escape(tool))
		return ax.End(ctx, st, core.RunInterrupted, "interrupted", "outcome unknown — check before retrying", text, o.Audit...)
	}
	return fmt.Errorf("agentrun: an agent's call cannot settle a %s call", o.Kind)
}

// ran commits the result of a call that ran, for the model, with its step.
func (r *agentRecord) ran(ctx context.Context, o *gate.Outcome) error {
	ax := r.ax
	done := r.Finished(o)
	out := llm.Outcome{Kind: llm.OutcomeRan, Output: o.Result.Output, Source: toolSource(o.Tool.Name)}
	if o.RunErr != nil {
		out.Error = o.RunErr.Error()
	}
	if a := o.Approval; a != nil {
		out.By = strings.Join(a.Winners(), ", ")
		if a.Status == approvals.StatusEdited {
			out.Kind, out.Args = llm.OutcomeEdited, done.Args
		}
	}
	if err := ax.commit(ctx, core.Checkpoint{Step: &done}, out.Result(r.llm, ax.l.now())); err != nil {
		r.done = true
		return ax.SettleCancelled(ctx, err, &done, o.Events...)
	}
	return nil
}
