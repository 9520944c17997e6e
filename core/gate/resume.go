package gate

import (
	"context"
	"fmt"
	"slices"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core/tools"
)

// resume continues a call whose record waits on an approval: still
// pending, ended without approving, or decided — then judged again.
func (g *Gate) resume(ctx context.Context, t *tools.Tool, c Call, rec Record) (*Outcome, error) {
	a, err := g.o.Store.ApprovalGet(ctx, c.Waiting)
	if err != nil {
		return nil, fmt.Errorf("gate: load approval %s: %w", c.Waiting, err)
	}
	o := &Outcome{Tool: t, Args: a.Args(), Approval: a, At: g.now()}
	switch a.Status {
	case approvals.StatusPending:
		o.Kind = Waiting
	case approvals.StatusRejected:
		o.Kind = Rejected
	case approvals.StatusExpired:
		o.Kind = Expired
		if why, ok := a.Released(); ok {
			o.Kind, o.Problem = Released, why
		}
	case approvals.StatusApproved, approvals.StatusEdited:
		return g.decided(ctx, t, c, a, rec)
	default:
		return nil, fmt.Errorf("gate: approval %s has unknown status %q", a.ID, a.Status)
	}
	return g.settle(ctx, rec, o)
}

// decided judges an approved (or edited) call again before it runs,
// against the live configuration and its own record:
//   - deny is final: a rule added by a reload while it waited stops it;
//   - the arguments to run are the ones its deciders saw (the digest);
//   - they still pass the tool's schema as it is now (and, an edit's, were
//     validated when made);
//   - its deciders still make its quorum under the live rule: still
//     eligible, persons counted once, no self-approval the rule forbids.
func (g *Gate) decided(ctx context.Context, t *tools.Tool, c Call, a *approvals.Approval, rec Record) (*Outcome, error) {
	traceWait(ctx, a)
	args := a.Args()
	tr := g.o.Trust()
	v := g.evaluate(tr, t, &c, args)
	if v.Effect == approvals.EffectDeny {
		return g.deny(ctx, t, &c, args, v, a, rec)
	}
	if why := a.DigestProblem(args); why != "" {
		return g.refuse(ctx, t, &c, a, args, CodeDigestMismatch, "the call is not the one its approvers decided on: "+why, rec)
	}
	valid, err := Validate(t, args)
	if err == nil && !approvals.SameArgs(valid, args) {
		err = fmt.Errorf("the tool's schema would change them to %v", valid)
	}
	if err != nil {
		return g.refuse(ctx, t, &c, a, args, CodeInvalidArgs, fmt.Sprintf("the approved arguments no longer pass %s's schema: %v", t.Name, err), rec)
	}
	if v.Effect == approvals.EffectAsk {
		if why := stale(a, v, tr.Policy.Ladder(v), tr.Dir); why != "" {
			return g.refuse(ctx, t, &c, a, args, CodeApprovalStale, why, rec)
		}
	}
	return g.dispatch(ctx, t, &c, args, a, 0, a.ID, rec)
}

// stale says why a's approving decisions no longer make the quorum the
// live verdict v asks for, or "": a decider counts while the live rule's
// approvers (expanded through the live directory, with the approval's
// standing delegations: approvals.LiveEligible) still name them — or,
// for one eligible through a group their surface vouched for (Via), while
// the live rule (or what its ladder still adds) or a standing delegation
// still names that group; for one escalation added to a, while the live
// rule's ladder still adds them — never as a machine (an agent or a
// schedule), once per person, and not on their own call unless v allows
// it. A ladder's terminal "approve" stands in for the quorum while the
// live ladder still ends in it.
func stale(a *approvals.Approval, v approvals.Verdict, ladder []approvals.Step, dir *approvals.Directory) string {
	entries := slices.Clone(v.Approvers)
	if live := approvals.LadderApprovers(ladder); len(live) > 0 {
		for _, e := range a.AddedApprovers {
			if slices.Contains(live, e) {
				entries = append(entries, e)
			}
		}
	}
	eligible := approvals.LiveEligible(entries, a, dir)
	persons := map[string]bool{}
	var gone []string
	for _, d := range a.Decisions {
		if d.Superseded || (d.Action != approvals.ActionApprove && d.Action != approvals.ActionEdit) {
			continue
		}
		switch {
		case d.ByEscalation():
			if n := len(ladder); n > 0 && ladder[n-1].Outcome == approvals.TerminalApprove && a.Risk != approvals.RiskHighImpact && !a.Destructive {
				return ""
			}
			gone = append(gone, "the escalation default (the live ladder no longer approves)")
		case approvals.NeverDecides(d.Actor),
			!slices.Contains(eligible, d.Actor) && !approvals.ViaStands(d.Via, entries, a, dir):
			gone = append(gone, d.Actor)
		case dir.SamePerson(d.Actor, a.Requester) && !v.AllowSelfApproval:
			gone = append(gone, d.Actor+" (the requester)")
		default:
			persons[dir.Person(d.Actor)] = true
		}
	}
	if need := max(v.Quorum, 1); len(persons) < need {
		return fmt.Sprintf("the current configuration asks %v for %d approval(s) (%s) and %d of the deciders still qualify (no longer: %v); ask again",
			v.Approvers, need, v.Why, len(persons), gone)
	}
	return ""
}

// refuse settles a decided call dispatch will not run, audited.
func (g *Gate) refuse(ctx context.Context, t *tools.Tool, c *Call, a *approvals.Approval, args map[string]any, code, why string, rec Record) (*Outcome, error) {
	g.log.Warn("decided call refused at dispatch", "run", c.RunID, "approval", a.ID, "tool", t.Name, "code", code, "why", why)
	return g.settle(ctx, rec, &Outcome{Kind: Refused, Tool: t, Args: args, Approval: a, Code: code, Problem: why, At: g.now(),
		Audit: []approvals.AuditEntry{g.audit(c, approvals.AuditDispatchRefused, "system", a.ID, t.Name, map[string]any{
			"code": code, "why": why, "args": args, "digest": a.Digest})}})
}
