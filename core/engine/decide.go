package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/gate"
	"github.com/opsgate/opsgate/core/markdown"
	"github.com/opsgate/opsgate/core/tools"
)

// Decide applies an approver's decision to an approval: the one path every
// surface (buttons, modals, mail replies, console, API, CLI) goes through.
// Exactly one decision wins, by compare-and-set in the store; when it ends
// the approval, the run is requeued in the same transaction and resumes on
// whichever replica claims it. A refusal returns a *core.DecisionError
// (and the refused attempt is audited); nothing else changes.
func (e *Engine) Decide(ctx context.Context, actor core.Actor, channel string, d core.Decision) (*approvals.Approval, error) {
	return e.decide(ctx, actor, channel, d, nil)
}

func (e *Engine) decide(ctx context.Context, actor core.Actor, channel string, d core.Decision, key *approvals.EventKey) (*approvals.Approval, error) {
	if d.ApprovalID == "" {
		return nil, &core.DecisionError{Code: core.DecisionBadRequest, Message: "no approval id"}
	}
	if actor.ID == "" {
		return nil, &core.DecisionError{Code: core.DecisionBadRequest, Message: "no actor"}
	}
	if d.Action == core.ActionApproveAll {
		return e.decideAll(ctx, actor, channel, d, key)
	}
	req := approvals.Request{
		Actor: actor.ID, Channel: channel, Action: d.Action, Args: d.Args,
		Reason: d.Reason, Scope: d.Scope, Pattern: d.Pattern, For: d.For, At: e.now(), Unverified: d.Unverified, Groups: d.Groups,
	}
	a, err := e.approvalDecide(ctx, approvals.ApprovalDecideParams{
		ID:    d.ApprovalID,
		Event: key,
		Decide: func(a *approvals.Approval) approvals.Outcome {
			return e.withReceipt(approvals.Decide(a, req, e.decisionEnv(ctx, a)))
		},
	})
	if err == nil {
		e.m.decided(a)
		return a, nil
	}
	if errors.Is(err, approvals.ErrDuplicateEvent) {
		return a, err
	}
	return a, decisionError(d.ApprovalID, actor.ID, err)
}

// decisionEnv gives Decide the live configuration: who is who, who may
// decide this approval now, the tool's schema and the policy re-check.
func (e *Engine) decisionEnv(ctx context.Context, a *approvals.Approval) approvals.Env {
	tr := e.trust()
	return approvals.Env{
		People:            tr.dir,
		Eligible:          approvals.LiveEligible(a.Entries(), a, tr.dir),
		SessionTTL:        tr.sessionTTL,
		ForeverHighImpact: tr.policy.ForeverHighImpact,
		PolicyVersion:     tr.policyVersion,
		Validate: func(args map[string]any) (map[string]any, error) {
			// Looked up only for an edit: an upstream tool's schema is the
			// one its server offers now.
			t, err := e.describeTool(ctx, a.Tool)
			if errors.Is(err, tools.ErrUnknownTool) {
				return nil, &approvals.ValidationError{Message: fmt.Sprintf("tool %q is no longer configured", a.Tool)}
			}
			if err != nil {
				return nil, &approvals.ValidationError{Message: fmt.Sprintf("tool %q is unavailable: %v", a.Tool, err)}
			}
			return gate.Validate(t, args)
		},
		Recheck: func(args map[string]any) (approvals.Verdict, []string) {
			info := approvals.ToolInfo{Name: a.Tool, Risk: a.Risk, Destructive: a.Destructive}
			th, _ := core.ParseThread(a.Thread)
			v := tr.policy.Evaluate(info, args, tr.dir.Subject(a.Requester, th.Channel, e.now()))
			return v, approvals.LiveEligible(v.Approvers, a, tr.dir)
		},
	}
}

// decisionError maps the store's and approvals' refusals to the one error
// type every surface understands (core.Refusal), naming the approval an
// unknown id asked for and the actor whose approval already counts.
func decisionError(id, actor string, err error) error {
	if errors.Is(err, core.ErrNotFound) {
		return &core.DecisionError{Code: core.DecisionNotFound, Message: fmt.Sprintf("no approval %q", id)}
	}
	de, ok := core.Refusal(err)
	if !ok {
		return fmt.Errorf("engine: decide %s: %w", id, err)
	}
	if de.Code == core.DecisionAlreadyVoted {
		de.By = actor
	}
	return de
}

// Cancel ends a run that is not final yet: it becomes cancelled, its thread
// is told, and a pending approval of it is expired so its card stops taking
// decisions. A run already final returns core.ErrConflict; an unknown one
// core.ErrNotFound.
//
// The run's current step ends with it: a step waiting for its approval (or
// approved but not yet dispatched) becomes cancelled in the same
// checkpoint. A step already dispatching on a worker keeps running: the
// worker's own checkpoint then loses its lease guard, so the run stays
// cancelled, and the worker records the step's real outcome (succeeded or
// failed) onto the cancelled run — the tool did run, and the record says
// so. A worker that has claimed the run but not yet dispatched the step
// finds its dispatch refused and marks the step cancelled itself.
func (e *Engine) Cancel(ctx context.Context, runID string, actor core.Actor) (*core.Run, error) {
	who := actor.ID
	if who == "" {
		who = "system"
	}
	var run *core.Run
	var err error
	// The step may only be ended here while no worker holds the run, so
	// the guard expects exactly the status read; a claim in between fails
	// it and we look again.
	for attempt := 0; ; attempt++ {
		run, err = e.store.RunGet(ctx, runID)
		if err != nil {
			return nil, fmt.Errorf("engine: cancel %s: %w", runID, err)
		}
		if run.Status.Final() {
			return run, fmt.Errorf("engine: cancel %s: run is %s: %w", runID, run.Status, core.ErrConflict)
		}
		c := e.cancelCheckpoint(run, who)
		err = e.store.RunCheckpoint(ctx, c)
		if err == nil || !errors.Is(err, core.ErrConflict) || attempt == cancelAttempts-1 {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("engine: cancel %s: %w", runID, err)
	}
	e.m.runsFinished.WithLabelValues(string(core.RunCancelled)).Inc()
	e.subagentsCancelled(ctx, run, actor)
	if err := e.tasks.CancelRun(ctx, runID, who); err != nil {
		return nil, fmt.Errorf("engine: cancel %s: %w", runID, err)
	}
	pending, _, err := e.store.ApprovalList(ctx, approvals.ApprovalListParams{RunID: runID, Status: approvals.StatusPending, Limit: 100})
	if err != nil {
		return nil, fmt.Errorf("engine: cancel %s: list approvals: %w", runID, err)
	}
	for _, a := range pending {
		now := e.now()
		_, err := e.approvalDecide(ctx, approvals.ApprovalDecideParams{ID: a.ID, Decide: func(a *approvals.Approval) approvals.Outcome {
			if a.Status != approvals.StatusPending {
				return approvals.Outcome{}
			}
			return approvals.Expire(a, now)
		}})
		if err != nil {
			return nil, fmt.Errorf("engine: cancel %s: expire approval %s: %w", runID, a.ID, err)
		}
	}
	return e.store.RunGet(ctx, runID)
}

// cancelAttempts bounds how often Cancel re-reads a run whose status
// changed between its read and its checkpoint.
const cancelAttempts = 5

// cancelCheckpoint is Cancel's transition for run as read. When no worker
// holds the run (it is queued or waiting) and its current step is still
// waiting, the step ends cancelled too, guarded by the exact status read.
func (e *Engine) cancelCheckpoint(run *core.Run, who string) core.Checkpoint {
	now := e.now()
	c := core.Checkpoint{
		RunID:        run.ID,
		ExpectStatus: []core.RunStatus{core.RunQueued, core.RunRunning, core.RunWaitingApproval, core.RunWaitingInput},
		Now:          now,
		Status:       core.RunCancelled,
		Release:      true,
		ErrorCode:    "cancelled",
		ErrorMessage: "cancelled by " + who,
		Outbox:       e.toThread(run.Thread, e.reply(run, fmt.Sprintf("🛑 Run %s (%s) was cancelled by %s.", run.ID, run.Flow, markdown.Escape(who)))),
		Audit:        []approvals.AuditEntry{e.audit(approvals.AuditRunCancelled, who, run.ID, "", "", map[string]any{"previous_status": run.Status})},
		Events:       []core.RunEvent{e.event(run.ID, core.EventTurnFinished, map[string]any{"status": core.RunCancelled})},
	}
	if run.Status == core.RunRunning {
		return c
	}
	// A flow run waits at its step index; an agent run may wait on several
	// calls of one turn (one card) or on a question.
	agentRun := run.Kind() == core.RunKindAgent
	for _, st := range run.Steps {
		waiting := st.Status == core.StepWaitingApproval || st.Status == core.StepWaitingAgent || st.Status == StepWaitingInput
		if !waiting || (!agentRun && st.Index != run.StepIndex) {
			continue
		}
		cs := cancelledStep(st, "run cancelled by "+who, now)
		if c.Step == nil {
			c.Step = cs
		} else {
			c.MoreSteps = append(c.MoreSteps, *cs)
		}
		c.ExpectStatus = []core.RunStatus{run.Status}
	}
	return c
}

// cancelledStep is st ended by its run's cancellation, why saying so.
func cancelledStep(st core.Step, why string, now time.Time) *core.Step {
	st.Status, st.Error, st.FinishedAt = core.StepCancelled, why, &now
	return &st
}

// Card builds the self-contained approval card from the stored approval:
// what, why, risk, preview, who asked, who decides, until when, and — once
// decided — the outcome line that replaces the buttons.
func (e *Engine) Card(a *approvals.Approval) core.Card {
	// The arguments the approval lets run: an edit's (shown with its diff
	// from the proposed ones) once an approver edited them.
	args := a.Args()
	approvers := a.Entries()
	if hand := approvals.Delegations(approvers, a, e.trust().dir); len(hand) > 0 && !a.Status.Final() {
		approvers = append(slices.Clone(approvers), hand...)
	}
	c := core.Card{
		ApprovalID: a.ID, RunID: a.RunID, Tool: a.Tool, Args: core.ArgsFromMap(args), Reason: core.OneLine(a.Reason),
		Risk: a.Risk, Preview: a.Preview, Requester: a.Requester, Approvers: approvers, Eligible: a.Eligible,
		Quorum: max(a.Quorum, 1), Approvals: a.CountedApprovals(), ExpiresAt: a.ExpiresAt, Status: a.Status,
		Why: a.Why, Changes: a.Edits(),
	}
	if n, ok := a.NextStep(); ok && len(a.Ladder) > 0 {
		c.Next = n.Sentence()
	}
	if e.opts.PublicURL != "" {
		c.ConsoleURL = strings.TrimRight(e.opts.PublicURL, "/") + "/approvals/" + a.ID
	}
	if a.Status.Final() {
		o := &core.CardOutcome{Status: a.Status, By: a.Winners()}
		if a.DecidedAt != nil {
			o.At = *a.DecidedAt
		}
		if a.Status == approvals.StatusRejected {
			o.Reason = core.OneLine(a.RejectionReasons())
		}
		if a.Status == approvals.StatusExpired {
			o.By = nil
		}
		c.Outcome = o
	}
	return c
}

var _ core.CardSource = (*Engine)(nil)

// ToolInputSchema returns the input schema of the tool named name as it
// is now (what an edit of its arguments is validated against), as JSON
// values; an error wrapping tools.ErrUnknownTool when there is no such tool.
func (e *Engine) ToolInputSchema(ctx context.Context, name string) (map[string]any, error) {
	t, err := e.describeTool(ctx, name)
	if err != nil {
		return nil, err
	}
	if doc := t.Schema.Document(); doc != nil {
		return doc, nil
	}
	return map[string]any{"type": "object"}, nil
}

// CardByApproval returns the current card of an approval, for adapters that
// pre-fill an edit modal, answer a stale button or re-render a card;
// core.ErrNotFound for an unknown id.
func (e *Engine) CardByApproval(ctx context.Context, approvalID string) (core.Card, error) {
	a, err := e.store.ApprovalGet(ctx, approvalID)
	if err != nil {
		return core.Card{}, fmt.Errorf("engine: card %s: %w", approvalID, err)
	}
	return e.batchCard(ctx, a)
}
