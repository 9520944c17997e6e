package engine

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/agentrun"
	"github.com/opsgate/opsgate/internal/fakellm"
)

// withRule adds a rule to the harness's policy.
func withRule(r approvals.Rule) func(*Options) {
	return func(o *Options) {
		p := *o.Policy
		p.Rules = append(slices.Clone(p.Rules), r)
		o.Policy = &p
	}
}

// reviewerRuns are the runs of the agent reviewer (every child of the
// harness's delegations).
func (h *harness) reviewerRuns() []*core.Run {
	h.t.Helper()
	runs, _, err := h.store.RunList(context.Background(), core.RunListParams{Flow: core.AgentFlow("reviewer"), Limit: 100})
	if err != nil {
		h.t.Fatal(err)
	}
	return runs
}

func TestSubagentDelegationDeniedByPolicy(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h, parent, child := subSetup(t, b, withRule(approvals.Rule{Tool: "agent:*", Args: map[string]string{"task": "*prod*"}, Effect: approvals.EffectDeny}))
		parent.Push(call("agent_reviewer", `{"task":"deploy api to prod","reason":"ship"}`), fakellm.Say("I may not delegate that."))
		rc := h.send("console:req", "console:sub-deny", "ship api to prod through the reviewer")
		run := h.waitRun(rc.RunID, core.RunSucceeded, core.RunFailed)
		if run.Status != core.RunSucceeded || len(run.Steps) != 1 {
			t.Fatalf("parent %s (%s) steps %+v", run.Status, run.ErrorMessage, run.Steps)
		}
		if st := run.Steps[0]; st.Tool != "agent:reviewer" || st.Status != core.StepDenied || st.Args[agentrun.SubRunID] != nil {
			t.Fatalf("the denied delegation's step %+v", st)
		}
		if n := len(h.reviewerRuns()); n != 0 || len(child.Requests()) != 0 {
			t.Fatalf("a denied delegation started %d child run(s), %d model turn(s)", n, len(child.Requests()))
		}
		if txt := requestText(t, parent, 1); !containsAll(txt, "denied by policy rule") {
			t.Fatalf("the model was not told of the denial:\n%s", txt)
		}
		items, _, err := h.store.ApprovalList(context.Background(), approvals.ApprovalListParams{RunID: run.ID, Limit: 10})
		if err != nil || len(items) != 0 {
			t.Fatalf("a denied delegation was asked about: %v %v", items, err)
		}
		if audits := h.auditKinds(approvals.AuditListParams{RunID: run.ID, Kind: string(approvals.AuditPolicyDenied)}); len(audits) != 1 {
			t.Fatalf("%d policy_denied audit entries", len(audits))
		}
		// A task the rule does not match delegates.
		child.Push(fakellm.Say("staging looks fine."))
		parent.Push(call("agent_reviewer", `{"task":"check staging","reason":"look"}`), fakellm.Say("Fine."))
		rc = h.send("console:req", "console:sub-deny-2", "check staging through the reviewer")
		if run := h.waitRun(rc.RunID, core.RunSucceeded, core.RunFailed); run.Steps[0].Status != core.StepSucceeded {
			t.Fatalf("an allowed delegation: %+v", run.Steps[0])
		}
	})
}

func TestSubagentDelegationAsksOnACard(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h, parent, child := subSetup(t, b, withRule(approvals.Rule{Tool: "agent:reviewer", Effect: approvals.EffectAsk, Approvers: []string{"group:sre"}}))
		parent.Push(call("agent_reviewer", `{"task":"review the api change","reason":"a second look"}`), fakellm.Say("Reviewed."))
		child.Push(fakellm.Say("It looks right."))
		rc := h.send("console:req", "slack:T1/C1/91", "have the reviewer look at it")
		a := h.waitApproval(rc.RunID)
		if a.Tool != "agent:reviewer" || a.Reason != "a second look" || a.ProposedArgs["task"] != "review the api change" ||
			!strings.Contains(a.Preview, "agent reviewer") {
			t.Fatalf("the delegation's approval %+v", a)
		}
		if n := len(h.reviewerRuns()); n != 0 {
			t.Fatalf("%d child runs before anyone decided", n)
		}
		run, _ := h.store.RunGet(context.Background(), rc.RunID)
		if run.Steps[0].Status != core.StepWaitingApproval {
			t.Fatalf("parent step %+v", run.Steps[0])
		}
		if _, err := h.decide("agent:claude", a.ID, "approve"); err == nil {
			t.Fatal("an agent approved a delegation")
		}
		if _, err := h.decide("console:alice", a.ID, "approve"); err != nil {
			t.Fatal(err)
		}
		run = h.waitRun(rc.RunID, core.RunSucceeded, core.RunFailed)
		if run.Status != core.RunSucceeded || run.Steps[0].Status != core.StepSucceeded || run.Steps[0].Output != "It looks right." {
			t.Fatalf("parent %s step %+v", run.Status, run.Steps[0])
		}
		if st := run.Steps[0]; st.ApprovalID != a.ID || st.Attempts != 1 || st.IdempotencyKey != idempotencyKey(run.ID, 0) {
			t.Fatalf("the dispatch record of the delegation %+v", st)
		}
		if kids := h.reviewerRuns(); len(kids) != 1 || kids[0].ID != run.Steps[0].Args[agentrun.SubRunID] {
			t.Fatalf("child runs %d, want exactly the one the step names", len(kids))
		}
		started, finished := h.eventsOf(run.ID, core.EventToolStarted), h.eventsOf(run.ID, core.EventToolFinished)
		if len(started) != 1 || len(finished) != 1 || finished[0]["ok"] != true || started[0]["tool_call_id"] != finished[0]["tool_call_id"] {
			t.Fatalf("tool.started %v tool.finished %v", started, finished)
		}
	})
}

func TestSubagentDelegationRejected(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h, parent, child := subSetup(t, b, withRule(approvals.Rule{Tool: "agent:reviewer", Effect: approvals.EffectAsk, Approvers: []string{"group:sre"}}))
		parent.Push(call("agent_reviewer", `{"task":"review the api change","reason":"a second look"}`), fakellm.Say("Not reviewed."))
		rc := h.send("console:req", "console:sub-rej", "have the reviewer look at it")
		a := h.waitApproval(rc.RunID)
		if _, err := h.decide("console:alice", a.ID, "reject", func(d *core.Decision) { d.Reason = "not now" }); err != nil {
			t.Fatal(err)
		}
		run := h.waitRun(rc.RunID, core.RunSucceeded, core.RunFailed)
		if run.Status != core.RunSucceeded || run.Steps[0].Status != core.StepRejected {
			t.Fatalf("parent %s step %+v", run.Status, run.Steps[0])
		}
		if n := len(h.reviewerRuns()); n != 0 || len(child.Requests()) != 0 {
			t.Fatalf("a rejected delegation started %d child run(s)", n)
		}
		if txt := requestText(t, parent, 1); !containsAll(txt, "not now") {
			t.Fatalf("the model was not told of the rejection:\n%s", txt)
		}
	})
}

// A later delegation of the turn waits on the lead call's card, and runs
// in its turn once approved.
func TestSubagentDelegationJoinsTheCard(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h, parent, child := subSetup(t, b, withRule(approvals.Rule{Tool: "agent:reviewer", Effect: approvals.EffectAsk, Approvers: []string{"group:sre"}}))
		parent.Push(fakellm.Turn{Calls: []fakellm.Call{
			{Name: "deploy", Args: `{"service":"api","version":"7","reason":"ship 7"}`},
			{Name: "agent_reviewer", Args: `{"task":"check api 7","reason":"verify"}`},
		}}, fakellm.Say("Shipped and reviewed."))
		child.Push(fakellm.Say("api 7 is fine."))
		rc := h.send("console:req", "console:sub-join", "ship api 7 and have it reviewed")
		h.waitRun(rc.RunID, core.RunWaitingApproval)
		items, _, err := h.store.ApprovalList(context.Background(), approvals.ApprovalListParams{RunID: rc.RunID, Limit: 10})
		if err != nil || len(items) != 2 {
			t.Fatalf("approvals %v %v: want the deploy and the delegation on one card", items, err)
		}
		if !items[0].CreatedAt.Equal(items[1].CreatedAt) {
			t.Fatal("the two asks are not one batch")
		}
		if _, err := h.decide("console:alice", items[0].ID, string(core.ActionApproveAll)); err != nil {
			t.Fatal(err)
		}
		run := h.waitRun(rc.RunID, core.RunSucceeded, core.RunFailed)
		if run.Status != core.RunSucceeded || run.Steps[1].Status != core.StepSucceeded || run.Steps[1].Output != "api 7 is fine." {
			t.Fatalf("parent %s steps %+v", run.Status, run.Steps)
		}
		if n := len(h.reviewerRuns()); n != 1 || h.fx.deploy.total() != 1 {
			t.Fatalf("child runs %d, deploys %d", n, h.fx.deploy.total())
		}
	})
}
