package engine

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/approvals/condition"
	"github.com/opsgate/opsgate/approvals/receipt"
	"github.com/opsgate/opsgate/core"
)

// conditionalPolicy is the contract's example rule over the fixture's
// deploy: a deploy to prod* asks group:sre unless a lead deploys a
// non-hotfix; two approvals for prod-eu. Scale's allow rule has a
// condition that cannot be evaluated (it reads a missing argument).
func conditionalPolicy(t testing.TB) *approvals.Policy {
	t.Helper()
	c, err := condition.NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	compile := func(src string, k condition.Kind) *condition.Expr {
		e, err := c.Compile(src, k)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	when := `!("leads" in requester.groups) || args.version.endsWith("-hotfix")`
	quorum := `args.env == "prod-eu" ? 2 : 1`
	broken := `args.missing == "x"`
	return &approvals.Policy{Rules: []approvals.Rule{
		{Tool: "deploy", Effect: approvals.EffectAsk, Approvers: []string{"group:sre"}},
		{Tool: "deploy", Args: map[string]string{"env": "prod*"}, Effect: approvals.EffectAsk, Approvers: []string{"group:sre"},
			Description: "deploy to prod* by a non-lead", When: when, Cond: compile(when, condition.When),
			QuorumWhen: quorum, QuorumFn: compile(quorum, condition.Quorum)},
		{Tool: "scale", Effect: approvals.EffectAsk, Approvers: []string{"group:sre"}},
		{Tool: "scale", Effect: approvals.EffectAllow, When: broken, Cond: compile(broken, condition.When)},
		{Tool: "status", Effect: approvals.EffectAllow, When: `channel == "console" && requester.person == requester.identity`,
			Cond: compile(`channel == "console" && requester.person == requester.identity`, condition.When)},
	}}
}

// withConditions runs the engine on conditionalPolicy, with a leads group.
func withConditions(t testing.TB) func(*Options) {
	p := conditionalPolicy(t)
	return func(o *Options) {
		o.Policy = p
		o.Groups["leads"] = []string{"console:lead"}
	}
}

// TestConditionTruthTableThroughGate: the contract's CEL rule, judged by
// the gate for real requests on both stores — requester in leads or not,
// hotfix or not — picks the rule (and its quorum expression), records why
// it asked, and a condition that cannot be evaluated never allows.
func TestConditionTruthTableThroughGate(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b, withConditions(t))
		cases := []struct {
			who, version string
			rule, quorum int
		}{
			{"console:req", "1.2.3", 1, 2},
			{"console:req", "1.2.3-hotfix", 1, 2},
			{"console:lead", "1.2.3", 0, 1},
			{"console:lead", "1.2.3-hotfix", 1, 2},
		}
		for i, c := range cases {
			rc := h.send(c.who, "console:tt"+string(rune('a'+i)), "deploy api "+c.version+" prod-eu")
			a := h.waitApproval(rc.RunID)
			if a.Rule != c.rule || a.Quorum != c.quorum {
				t.Errorf("%s %s: rule %d quorum %d (%s), want rule %d quorum %d", c.who, c.version, a.Rule, a.Quorum, a.Why, c.rule, c.quorum)
			}
			if c.rule == 1 && !strings.Contains(a.Why, "policy rule 1: deploy to prod* by a non-lead") {
				t.Errorf("why %q", a.Why)
			}
			card, err := h.eng.CardByApproval(context.Background(), a.ID)
			if err != nil || card.Why != a.Why || !strings.Contains(card.PlainText(), "Asked by: "+a.Why) {
				t.Errorf("card why %q, %v", card.Why, err)
			}
		}
		// prod-us: the quorum expression gives 1.
		rc := h.send("console:req", "console:tt-us", "deploy api 1.2.3 prod-us")
		if a := h.waitApproval(rc.RunID); a.Rule != 1 || a.Quorum != 1 {
			t.Errorf("prod-us: rule %d quorum %d", a.Rule, a.Quorum)
		}
		// The allow rule whose condition fails does not apply: scale asks.
		rc = h.send("console:req", "console:tt-scale", "scale api 3")
		if a := h.waitApproval(rc.RunID); a.Rule != 2 {
			t.Errorf("scale: rule %d (%s), want the ask rule", a.Rule, a.Why)
		}
		if n := h.fx.scale.total(); n != 0 {
			t.Fatalf("scale ran %d times under a failing allow condition", n)
		}
		// status is allowed by its condition (console, no person).
		rc = h.send("console:req", "console:tt-status", "status api")
		h.waitRun(rc.RunID, core.RunSucceeded)
	})
}

// TestEditShownAsChange: an edit that leaves the approval pending updates
// its card, which shows the edited arguments and the per-field diff; the
// audit entry carries the change, and the final card keeps it.
func TestEditShownAsChange(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b)
		rc := h.send("console:req", "console:te", "deploy api 1.2.3 prod")
		a := h.waitApproval(rc.RunID)
		before := h.cardUpdates(a.ID)
		if _, err := h.decide("console:alice", a.ID, "edit", func(d *core.Decision) {
			d.Args = map[string]any{"service": "api", "version": "1.2.4", "env": "prod"}
		}); err != nil {
			t.Fatal(err)
		}
		if got := h.cardUpdates(a.ID); got != before+1 {
			t.Fatalf("card updates after a pending edit: %d, want %d", got, before+1)
		}
		card, err := h.eng.CardByApproval(context.Background(), a.ID)
		want := []approvals.Change{{Name: "version", Kind: approvals.ChangeChanged, From: "1.2.3", To: "1.2.4"}}
		if err != nil || !card.Pending() || !slices.Equal(card.Changes, want) || !strings.Contains(card.PlainText(), "version: 1.2.3 → 1.2.4") ||
			!slices.Contains(card.Args, core.CardArg{Name: "version", Value: "1.2.4"}) {
			t.Fatalf("pending card: %+v, %v", card, err)
		}
		es := h.auditKinds(approvals.AuditListParams{ApprovalID: a.ID, Kind: string(approvals.AuditApprovalDecided)})
		if len(es) != 1 || !strings.Contains(string(es[0].Detail), `"changes":[{"name":"version","kind":"changed","from":"1.2.3","to":"1.2.4"}]`) {
			t.Fatalf("audit: %+v", es)
		}
		if _, err := h.decide("console:bob", a.ID, "approve"); err != nil {
			t.Fatal(err)
		}
		h.waitRun(rc.RunID, core.RunSucceeded)
		card, _ = h.eng.CardByApproval(context.Background(), a.ID)
		if card.Pending() || !slices.Equal(card.Changes, want) {
			t.Fatalf("final card: %+v", card)
		}
	})
}

func (h *harness) cardUpdates(approvalID string) int {
	h.t.Helper()
	items, _, err := h.store.OutboxList(context.Background(), core.OutboxListParams{Limit: 1000})
	if err != nil {
		h.t.Fatal(err)
	}
	n := 0
	for _, m := range items {
		if m.ApprovalID == approvalID && m.Kind == core.KindCardUpdate {
			n++
		}
	}
	return n
}

// TestDelegationThroughEngine: alice hands her approval to the leads
// group — audited, the card updated; alice may no longer decide, the lead
// may and the call runs once. A second hand-over whose delegator a reload
// removes from the rule's group no longer stands at dispatch: the lead's
// approval is stale.
func TestDelegationThroughEngine(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b, func(o *Options) { o.Groups["leads"] = []string{"console:lead"} })
		ctx := context.Background()
		rc := h.send("console:req", "console:td", "deploy api 1.2.3")
		a := h.waitApproval(rc.RunID)
		before := h.cardUpdates(a.ID)
		if _, err := h.eng.Delegate(ctx, approvals.DelegateRequest{ApprovalID: a.ID, Actor: "console:dave", Channel: "console", To: "group:leads"}); decisionCode(t, err).Code != core.DecisionNotApprover {
			t.Fatalf("a non-approver handed it on: %v", err)
		}
		got, err := h.eng.Delegate(ctx, approvals.DelegateRequest{ApprovalID: a.ID, Actor: "console:alice", Channel: "console", To: "group:leads", Reason: "lead's call"})
		if err != nil || got.Status != approvals.StatusPending || !slices.Contains(got.Eligible, "console:lead") || slices.Contains(got.Eligible, "console:alice") {
			t.Fatalf("delegate: %+v, %v", got, err)
		}
		if h.cardUpdates(a.ID) != before+1 {
			t.Fatal("no card update for the hand-over")
		}
		card, _ := h.eng.CardByApproval(ctx, a.ID)
		if !slices.Contains(card.Approvers, "group:leads (handed on by console:alice)") || !slices.Contains(card.Eligible, "console:lead") {
			t.Fatalf("card approvers %v eligible %v", card.Approvers, card.Eligible)
		}
		if es := h.auditKinds(approvals.AuditListParams{ApprovalID: a.ID, Kind: string(approvals.AuditApprovalDelegated)}); len(es) != 1 || es[0].Actor != "console:alice" {
			t.Fatalf("audit %+v", es)
		}
		if _, err := h.decide("console:alice", a.ID, "approve"); decisionCode(t, err).Code != core.DecisionNotApprover {
			t.Fatalf("alice after handing on: %v", err)
		}
		if _, err := h.decide("console:lead", a.ID, "approve"); err != nil {
			t.Fatal(err)
		}
		h.waitRun(rc.RunID, core.RunSucceeded)
		if n := len(h.fx.deploy.callsFor(rc.RunID)); n != 1 {
			t.Fatalf("dispatched %d times", n)
		}

		// Handed on by bob, decided by the lead while the engine is down;
		// a reload removes bob from sre before it dispatches.
		rc = h.send("console:req", "console:td2", "deploy web 2.0.0")
		a = h.waitApproval(rc.RunID)
		if _, err := h.eng.Delegate(ctx, approvals.DelegateRequest{ApprovalID: a.ID, Actor: "console:bob", Channel: "console", To: "group:leads"}); err != nil {
			t.Fatal(err)
		}
		h.quiesce()
		if _, err := h.decide("console:lead", a.ID, "approve"); err != nil {
			t.Fatal(err)
		}
		h.tweak = func(o *Options) {
			o.Groups["leads"] = []string{"console:lead"}
			o.Groups["sre"] = slices.DeleteFunc(slices.Clone(sre), func(id string) bool { return id == "console:bob" })
		}
		h.resume()
		run := h.waitRun(rc.RunID, core.RunFailed, core.RunSucceeded)
		if run.Status != core.RunFailed || run.ErrorCode != "approval_stale" {
			t.Fatalf("run %s %s: %s", run.Status, run.ErrorCode, run.ErrorMessage)
		}
		if n := len(h.fx.deploy.callsFor(rc.RunID)); n != 0 {
			t.Fatalf("dispatched %d times on a hand-over that no longer stands", n)
		}
	})
}

// TestReceiptHandedToTheTool: with a signer, the tool of a decided call
// gets the receipt the approval keeps, which verifies for exactly the
// arguments it ran with; a call a rule allowed gets none. Both stores.
func TestReceiptHandedToTheTool(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		_, key, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		signer, err := receipt.NewSigner(key, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		h := setup(t, b, func(o *Options) { o.Receipts = signer })
		rc := h.send("console:req", "console:tr", "deploy api 1.2.3")
		a := h.waitApproval(rc.RunID)
		if _, err := h.decide("console:alice", a.ID, "approve"); err != nil {
			t.Fatal(err)
		}
		h.waitRun(rc.RunID, core.RunSucceeded)
		calls := h.fx.deploy.callsFor(rc.RunID)
		stored, _ := h.store.ApprovalGet(context.Background(), a.ID)
		if len(calls) != 1 || calls[0].Receipt == "" || calls[0].Receipt != stored.Receipt {
			t.Fatalf("the tool got %q; the approval keeps %q", calls[0].Receipt, stored.Receipt)
		}
		c, err := receipt.Verify(calls[0].Receipt, key.Public().(ed25519.PublicKey), time.Now())
		if err != nil || !c.Approved() || c.ApprovalID != a.ID || c.RunID != rc.RunID || c.Digest != stored.Digest ||
			len(c.Deciders) != 1 || c.Deciders[0].Identity != "console:alice" || c.Deciders[0].Channel != "console" {
			t.Fatalf("receipt %+v, %v", c, err)
		}
		ran, _ := json.Marshal(calls[0].Args)
		var args map[string]any
		_ = json.Unmarshal(ran, &args)
		if err := c.Check(args); err != nil {
			t.Fatalf("the arguments that ran: %v", err)
		}
		args["version"] = "1.2.4"
		if err := c.Check(args); err == nil {
			t.Fatal("a changed argument passed the receipt")
		}
		rc = h.send("console:req", "console:tr2", "status api")
		h.waitRun(rc.RunID, core.RunSucceeded)
		if st := h.fx.status.callsFor(rc.RunID); len(st) != 1 || st[0].Receipt != "" {
			t.Fatalf("an allowed call got a receipt: %+v", st)
		}
	})
}
