package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// Ending the approvals of a run nobody is left to answer for: an agent
// task that ended (core/agenttask), an agent turn nobody attends.

// expireRunApprovals expires the pending approvals of a run whose agent
// task ended: nobody is left to use them.
func (e *Engine) expireRunApprovals(ctx context.Context, runID string) error {
	return e.endRunApprovals(ctx, runID, approvals.Expire)
}

// endRunApprovals ends every approval of runID still pending with end, a
// system outcome (never a person's decision); approvals decided meanwhile
// are left as they are.
func (e *Engine) endRunApprovals(ctx context.Context, runID string, end func(*approvals.Approval, time.Time) approvals.Outcome) error {
	pending, _, err := e.store.ApprovalList(ctx, approvals.ApprovalListParams{RunID: runID, Status: approvals.StatusPending, Limit: 100})
	if err != nil {
		return fmt.Errorf("engine: list approvals of run %s: %w", runID, err)
	}
	for _, a := range pending {
		now := e.now()
		if _, err := e.approvalDecide(ctx, approvals.ApprovalDecideParams{ID: a.ID, Decide: func(a *approvals.Approval) approvals.Outcome {
			if a.Status != approvals.StatusPending {
				return approvals.Outcome{}
			}
			return end(a, now)
		}}); err != nil && !errors.Is(err, core.ErrNotFound) {
			return fmt.Errorf("engine: end approval %s: %w", a.ID, err)
		}
	}
	return nil
}

// ReleaseAgentApprovals ends every pending approval of an agent turn that
// nobody can answer any more — the Agent API caller holding its stream hung
// up, or the server is shutting down — as a denial: each is released
// (approvals.Release, audited with why) and the turn goes on, its model told
// nobody could approve the call. Approvals already decided are left as
// they are; with none pending it does nothing.
func (e *Engine) ReleaseAgentApprovals(ctx context.Context, runID, why string) error {
	return e.endRunApprovals(ctx, runID, func(a *approvals.Approval, now time.Time) approvals.Outcome {
		return approvals.Release(a, now, why)
	})
}
