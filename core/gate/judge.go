package gate

import (
	"context"
	"fmt"
	"maps"
	"strings"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core/tools"
)

// Validate cleans path-like values (so the schema, the policy, the card
// and the tool all see one form), fills the schema's defaults and
// validates; a tool without a schema takes any object. Then the tool's
// own argument check (an exec value that would read as an option, an http
// value that would walk the URL path) refuses what the runner would
// refuse, before anyone is asked to approve it.
func Validate(t *tools.Tool, args map[string]any) (map[string]any, error) {
	args = approvals.CleanArgs(args)
	if t.Schema != nil {
		var err error
		if args, err = t.Schema.Apply(args); err != nil {
			return nil, err
		}
	} else {
		args = maps.Clone(args)
		if args == nil {
			args = map[string]any{}
		}
	}
	if c, ok := t.Runner.(ArgChecker); ok {
		if err := c.CheckArgs(args); err != nil {
			return nil, &approvals.ValidationError{Message: err.Error()}
		}
	}
	return args, nil
}

// ArgChecker is implemented by runners that refuse some argument values
// whatever the schema says (core/tools Exec and HTTP).
type ArgChecker interface {
	CheckArgs(args map[string]any) error
}

// Info is what the policy knows of a tool.
func Info(t *tools.Tool) approvals.ToolInfo {
	return approvals.ToolInfo{Name: t.Name, Risk: t.Risk, Destructive: t.Destructive}
}

// evaluate is the live policy's verdict on c with args: the rules see the
// call's requester (their person and groups in tr's directory), the
// channel of its thread, and now.
func (g *Gate) evaluate(tr Trust, t *tools.Tool, c *Call, args map[string]any) approvals.Verdict {
	return tr.Policy.Evaluate(Info(t), args, tr.Dir.Subject(c.Requester, c.Thread.Channel, g.now()))
}

// judge takes a new call: validated, judged by the live policy and the
// grants, then dispatched, denied or suspended.
func (g *Gate) judge(ctx context.Context, t *tools.Tool, c Call, rec Record) (*Outcome, error) {
	args, err := Validate(t, c.Args)
	if err != nil {
		return g.settle(ctx, rec, &Outcome{Kind: Invalid, Tool: t, Args: c.Args, Err: err,
			Problem: fmt.Sprintf("the arguments are invalid for %s: %v", t.Name, err)})
	}
	tr := g.o.Trust()
	v := g.evaluate(tr, t, &c, args)
	switch v.Effect {
	case approvals.EffectDeny:
		return g.deny(ctx, t, &c, args, v, nil, rec)
	case approvals.EffectAsk:
		gr, err := g.grant(ctx, tr, t, &c, args, v)
		if err != nil {
			return nil, fmt.Errorf("gate: find grant: %w", err)
		}
		if gr != nil {
			g.log.Info("grant turns ask into allow", "run", c.RunID, "tool", t.Name, "grant", gr.ID, "scope", gr.Scope)
			audit := g.audit(&c, approvals.AuditGrantApplied, gr.Actor, gr.ApprovalID, t.Name, map[string]any{
				"step": c.Index, "args": args, "grant": gr.ID, "scope": gr.Scope, "requester": c.Requester})
			return g.dispatch(ctx, t, &c, args, nil, 0, "", rec, audit)
		}
		if c.RequireReason && strings.TrimSpace(c.Reason) == "" {
			return g.settle(ctx, rec, &Outcome{Kind: NeedsReason, Tool: t, Args: args, Verdict: v, At: g.now(),
				Problem: fmt.Sprintf("%s needs a person's approval, and the approval card needs your reason: call %s again with a one-line reason saying why", t.Name, t.Name)})
		}
		if c.NoApprover != "" {
			return g.settle(ctx, rec, &Outcome{Kind: NoApprover, Tool: t, Args: args, Verdict: v, Problem: c.NoApprover, At: g.now(),
				Audit: []approvals.AuditEntry{g.audit(&c, approvals.AuditPolicyDenied, "system", "", t.Name, map[string]any{
					"why": "no approver: " + c.NoApprover, "args": args})}})
		}
		asks := []judged{{t: t, c: c, args: args, v: v}}
		for _, l := range c.Later {
			if j, ok := g.preJudge(ctx, tr, l); ok {
				asks = append(asks, j)
			}
		}
		return g.suspend(ctx, tr, asks, rec)
	}
	return g.dispatch(ctx, t, &c, args, nil, 0, "", rec)
}

// judged is a call the gate asks about, ready to suspend.
type judged struct {
	t    *tools.Tool
	c    Call
	args map[string]any
	v    approvals.Verdict
}

// preJudge judges a later call of the turn ahead of its time, so it waits
// on the same card: only a new call the gate would ask about now (valid,
// with its reason, no grant covering it, someone to answer) is taken.
// Everything else is judged in its turn, after the calls before it ran;
// a call pre-judged here is judged again on resume like any other.
func (g *Gate) preJudge(ctx context.Context, tr Trust, c Call) (judged, bool) {
	if c.Waiting != "" || c.Dispatching != nil || c.NoApprover != "" || (c.RequireReason && strings.TrimSpace(c.Reason) == "") {
		return judged{}, false
	}
	t, err := g.lookup(ctx, c.Tool)
	if err != nil {
		return judged{}, false
	}
	args, err := Validate(t, c.Args)
	if err != nil {
		return judged{}, false
	}
	v := g.evaluate(tr, t, &c, args)
	if v.Effect != approvals.EffectAsk {
		return judged{}, false
	}
	if gr, err := g.grant(ctx, tr, t, &c, args, v); err != nil || gr != nil {
		return judged{}, false
	}
	return judged{t: t, c: c, args: args, v: v}, true
}

// grant returns an active grant covering the call, or nil: bound to the
// rule that asks, made by someone the live configuration still lets
// decide the call (approvals.Grant.Covers).
func (g *Gate) grant(ctx context.Context, tr Trust, t *tools.Tool, c *Call, args map[string]any, v approvals.Verdict) (*approvals.Grant, error) {
	now := g.now()
	call := approvals.Call{Tool: t.Name, RunID: c.RunID, Risk: t.Risk, Thread: c.Thread.String(), Requester: c.Requester, Args: args,
		Verdict: v, Eligible: tr.Dir.Expand(v.Approvers)}
	p := approvals.GrantListParams{Tool: t.Name, ActiveAt: now, Limit: 200}
	for seen := 0; seen < maxGrantScan; {
		gs, next, err := g.o.Store.GrantList(ctx, p)
		if err != nil {
			return nil, err
		}
		for _, gr := range gs {
			if gr.Covers(call, now, tr.Policy.ForeverHighImpact) {
				return gr, nil
			}
		}
		seen += len(gs)
		if next == "" {
			break
		}
		p.Cursor = next
	}
	return nil, nil
}

// deny settles a call the policy denies; a is the approval it was decided
// under, when the deny came after the ask (nil otherwise).
func (g *Gate) deny(ctx context.Context, t *tools.Tool, c *Call, args map[string]any, v approvals.Verdict, a *approvals.Approval, rec Record) (*Outcome, error) {
	approvalID := ""
	if a != nil {
		approvalID = a.ID
	}
	return g.settle(ctx, rec, &Outcome{Kind: Denied, Tool: t, Args: args, Verdict: v, Approval: a, Problem: v.Why, At: g.now(),
		Audit: []approvals.AuditEntry{g.audit(c, approvals.AuditPolicyDenied, "system", approvalID, t.Name, map[string]any{
			"rule": v.Rule, "why": v.Why, "args": args})}})
}
