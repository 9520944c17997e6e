package gate

import (
	"context"
	"maps"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/tools"
)

// suspend makes an approval per ask — with its digest, the expanded
// approvers and the dry run — one card (for the first), and their audit
// entries and permission.requested events, and has the record write them
// with its waiting state in one transaction. The approvals share their
// creation time, which makes them one batch (one card, "Approve all").
func (g *Gate) suspend(ctx context.Context, tr Trust, asks []judged, rec Record) (*Outcome, error) {
	now := g.now()
	s := &Suspension{}
	for _, q := range asks {
		c, t, v := &q.c, q.t, q.v
		a := &approvals.Approval{
			ID: g.o.NewID(), RunID: c.RunID, StepIndex: c.Index, Thread: c.Thread.String(), Requester: c.Requester,
			Tool: t.Name, Destructive: t.Destructive, Risk: t.Risk, ProposedArgs: q.args, Preview: g.preview(ctx, t, c, q.args),
			Reason: c.Reason, Status: approvals.StatusPending, Approvers: v.Approvers, Eligible: tr.Dir.Expand(v.Approvers),
			Quorum: max(v.Quorum, 1), Rule: v.Rule, RuleKey: v.RuleKey, PolicyVersion: tr.PolicyVersion,
			Digest: approvals.Digest(t.Name, q.args, v.RuleKey, tr.PolicyVersion), Why: v.Why,
			CreatedAt: now,
		}
		// Its ladder (the rule's or the default) sets its end and its
		// first step; the engine's sweeper climbs it while it waits.
		a.Climb(tr.Policy.Ladder(v), g.o.ApprovalTTL)
		s.Asks = append(s.Asks, Ask{Index: c.Index, Tool: t, Args: q.args, Approval: a})
		s.Audit = append(s.Audit, g.audit(c, approvals.AuditApprovalRequested, c.Requester, a.ID, t.Name, map[string]any{
			"args": q.args, "rule": v.Rule, "why": v.Why, "approvers": v.Approvers, "quorum": a.Quorum, "expires_at": a.ExpiresAt,
			"digest": a.Digest,
		}))
		s.Events = append(s.Events, g.event(c, core.EventPermissionRequested, map[string]any{
			"approval_id": a.ID, "tool": t.Name, "args": q.args, "risk": t.Risk, "approvers": v.Approvers,
			"expires_at": a.ExpiresAt, "reason": c.Reason, "digest": a.Digest,
		}))
	}
	lead := &asks[0].c
	s.Card = core.OutboxMessage{ID: g.o.NewID(), Thread: lead.Thread, Kind: core.KindCard, ApprovalID: s.Asks[0].Approval.ID,
		RunID: lead.RunID, CreatedAt: now}
	if err := rec.Suspend(ctx, s); err != nil {
		return nil, err
	}
	return &Outcome{Kind: Suspended, Tool: asks[0].t, Args: asks[0].args, Verdict: asks[0].v, Approval: s.Asks[0].Approval,
		Suspension: s, At: now}, nil
}

// preview runs the tool's dry run, bounded in time and size. A failure is
// shown on the card rather than blocking the ask.
func (g *Gate) preview(ctx context.Context, t *tools.Tool, c *Call, args map[string]any) string {
	pctx, cancel := context.WithTimeout(ctx, previewTimeout)
	defer cancel()
	out, err := t.Runner.Preview(pctx, tools.Call{RunID: c.RunID, IdempotencyKey: c.Key + "/preview", Args: maps.Clone(args)})
	if err != nil {
		out = "dry run failed: " + err.Error()
	}
	return core.Clip(out, previewMaxChars)
}
