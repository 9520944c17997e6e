package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// A batch is the approvals one suspend created together: the gated calls
// of one agent turn, on one card (one suspend of the gate). They share their run and
// creation time; the first by step index leads, and its card is the one
// sent. A flow step's approval is a batch of one.

// Batch returns the approvals of a's batch, the lead first.
func (e *Engine) Batch(ctx context.Context, a *approvals.Approval) ([]*approvals.Approval, error) {
	items, _, err := e.store.ApprovalList(ctx, approvals.ApprovalListParams{RunID: a.RunID, Limit: 200})
	if err != nil {
		return nil, fmt.Errorf("engine: batch of %s: %w", a.ID, err)
	}
	var out []*approvals.Approval
	for _, b := range items {
		if b.CreatedAt.UnixMicro() == a.CreatedAt.UnixMicro() {
			out = append(out, b)
		}
	}
	if len(out) == 0 {
		out = []*approvals.Approval{a}
	}
	slices.SortFunc(out, func(x, y *approvals.Approval) int { return cmp.Compare(x.StepIndex, y.StepIndex) })
	return out, nil
}

// batchCard is the card of a's batch: the lead's card, listing every call
// when there are several.
func (e *Engine) batchCard(ctx context.Context, a *approvals.Approval) (core.Card, error) {
	batch, err := e.Batch(ctx, a)
	if err != nil {
		return core.Card{}, err
	}
	c := e.Card(batch[0])
	if len(batch) < 2 {
		return c, nil
	}
	for _, b := range batch {
		bc := e.Card(b)
		c.Batch = append(c.Batch, core.CardCall{
			ApprovalID: bc.ApprovalID, Tool: bc.Tool, Args: bc.Args, Reason: bc.Reason, Risk: bc.Risk,
			Quorum: bc.Quorum, Approvals: bc.Approvals, Status: bc.Status, Outcome: bc.Outcome, ConsoleURL: bc.ConsoleURL,
		})
	}
	return c, nil
}

// BatchResult is what "Approve all" did with one call of the batch.
type BatchResult struct {
	ApprovalID string
	Tool       string
	// Approval is the approval after the decision (nil if it failed to load).
	Approval *approvals.Approval
	// Err is the refusal (*core.DecisionError), nil when approved.
	Err error
}

// ApproveAll approves every pending call of the batch approvalID belongs
// to, one by one through Decide — quorum, self-approval and eligibility
// are judged per call — and reports per call what happened. It fails only
// when the approval cannot be read.
func (e *Engine) ApproveAll(ctx context.Context, actor core.Actor, channel, approvalID, reason string) ([]BatchResult, error) {
	return e.approveAll(ctx, actor, channel, core.Decision{ApprovalID: approvalID, Reason: reason}, nil)
}

// approveAll approves the pending calls of d.ApprovalID's batch with d's
// reason (and d.Unverified, which makes every one a refusal).
func (e *Engine) approveAll(ctx context.Context, actor core.Actor, channel string, d core.Decision, key *approvals.EventKey) ([]BatchResult, error) {
	a, err := e.store.ApprovalGet(ctx, d.ApprovalID)
	if err != nil {
		return nil, decisionError(d.ApprovalID, actor.ID, err)
	}
	batch, err := e.Batch(ctx, a)
	if err != nil {
		return nil, err
	}
	var out []BatchResult
	for _, b := range batch {
		if b.Status != approvals.StatusPending {
			continue
		}
		var k *approvals.EventKey
		if key != nil {
			// One platform event decides several approvals: each gets
			// its own dedup key.
			kk := *key
			kk.EventID = key.EventID + "/" + b.ID
			k = &kk
		}
		got, err := e.decide(ctx, actor, channel, core.Decision{ApprovalID: b.ID, Action: approvals.ActionApprove, Reason: d.Reason, Unverified: d.Unverified, Groups: d.Groups}, k)
		if errors.Is(err, approvals.ErrDuplicateEvent) {
			err = nil
		}
		out = append(out, BatchResult{ApprovalID: b.ID, Tool: b.Tool, Approval: got, Err: err})
	}
	return out, nil
}

// BatchSummary is the one-line account of an "Approve all" for the
// person who clicked: which calls were approved, which refused and why.
func BatchSummary(rs []BatchResult) string {
	if len(rs) == 0 {
		return "Nothing left to approve: every call of this card is already decided."
	}
	var ok, refused []string
	for _, r := range rs {
		if r.Err == nil {
			ok = append(ok, r.Tool)
			continue
		}
		why := r.Err.Error()
		var de *core.DecisionError
		if errors.As(r.Err, &de) {
			why = de.Message
		}
		refused = append(refused, fmt.Sprintf("%s (%s)", r.Tool, why))
	}
	var parts []string
	if len(ok) > 0 {
		parts = append(parts, "Approved: "+strings.Join(ok, ", ")+".")
	}
	if len(refused) > 0 {
		parts = append(parts, "Refused: "+strings.Join(refused, "; ")+".")
	}
	return strings.Join(parts, " ")
}

// decideAll is Decide for ActionApproveAll: the last approval it decided,
// and, when any call was refused, one *core.DecisionError (the first
// refusal's code) whose message is BatchSummary.
func (e *Engine) decideAll(ctx context.Context, actor core.Actor, channel string, d core.Decision, key *approvals.EventKey) (*approvals.Approval, error) {
	rs, err := e.approveAll(ctx, actor, channel, d, key)
	if err != nil {
		return nil, err
	}
	var last *approvals.Approval
	var code core.DecisionCode
	for _, r := range rs {
		if r.Approval != nil {
			last = r.Approval
		}
		var de *core.DecisionError
		switch {
		case errors.As(r.Err, &de):
			if code == "" {
				code = de.Code
			}
		case r.Err != nil:
			return last, r.Err
		}
	}
	if last == nil {
		last, _ = e.store.ApprovalGet(ctx, d.ApprovalID)
	}
	if code != "" {
		return last, &core.DecisionError{Code: code, Message: BatchSummary(rs)}
	}
	return last, nil
}
