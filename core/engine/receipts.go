package engine

import (
	"context"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// ReceiptSigner signs the receipt of an approval people decided
// (approvals/receipt's Signer).
type ReceiptSigner interface {
	Sign(a *approvals.Approval) (string, error)
}

// withReceipt signs the receipt of an outcome that ends an approval by
// people's decision, so it is written in the same transaction. A signing
// failure is logged and leaves the approval without one: the decision
// stands, and the tool runs without a receipt (its verifier refuses it).
func (e *Engine) withReceipt(out approvals.Outcome) approvals.Outcome {
	if e.opts.Receipts == nil || !out.Final || out.Approval == nil || out.Err != nil {
		return out
	}
	switch out.Approval.Status {
	case approvals.StatusApproved, approvals.StatusEdited, approvals.StatusRejected:
	default:
		return out
	}
	r, err := e.opts.Receipts.Sign(out.Approval)
	if err != nil {
		e.log.Error("receipt not signed", "approval", out.Approval.ID, "err", err)
		return out
	}
	out.Approval.Receipt = r
	return out
}

// Delegate hands a pending approval from r.Actor, who may decide it, to
// a named person or approver group (approvals.Delegate): audited, the card
// updated, the delegator's say handed on. The engine stamps r.At.
// Refusals are *core.DecisionError like a decision's.
func (e *Engine) Delegate(ctx context.Context, r approvals.DelegateRequest) (*approvals.Approval, error) {
	if r.Actor == "" {
		return nil, &core.DecisionError{Code: core.DecisionBadRequest, Message: "no actor"}
	}
	id := r.ApprovalID
	if id == "" {
		return nil, &core.DecisionError{Code: core.DecisionBadRequest, Message: "no approval id"}
	}
	r.At = e.now()
	a, err := e.store.ApprovalDecide(ctx, approvals.ApprovalDecideParams{ID: id,
		Decide: func(a *approvals.Approval) approvals.Outcome {
			return approvals.Delegate(a, r, e.decisionEnv(ctx, a))
		}})
	if err != nil {
		return a, decisionError(id, r.Actor, err)
	}
	e.log.Info("approval delegated", "approval", id, "by", r.Actor, "to", r.To)
	return a, nil
}
