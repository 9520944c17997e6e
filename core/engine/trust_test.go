package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// The trust model, end to end through the engine and a real store. Each
// TestAttack_ case is an attack that worked against the engine before.

func withPeople(people map[string][]string) func(*Options) {
	return func(o *Options) { o.People = people }
}

func TestAttack_SelfApprovalAcrossIdentities(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		// req asks from the console and approves from Slack.
		h := setup(t, b, withPeople(map[string][]string{"req": {"console:req", "slack:UREQ"}}))
		rc := h.send("console:req", "console:t1", "deploy api 1.2.3")
		a := h.waitApproval(rc.RunID)
		_, err := h.decide("slack:UREQ", a.ID, "approve")
		if de := decisionCode(t, err); de.Code != core.DecisionSelfApproval {
			t.Fatalf("self-approval through another identity: %+v", de)
		}
		if n := h.fx.deploy.total(); n != 0 {
			t.Fatalf("dispatched %d times", n)
		}
	})
}

func TestAttack_OneHumanMeetsQuorumOfTwo(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b, withPeople(map[string][]string{"alice": {"console:alice", "slack:UALICE"}}))
		rc := h.send("console:req", "console:t1", "deploy api 1.2.3 prod-eu")
		a := h.waitApproval(rc.RunID)
		if _, err := h.decide("console:alice", a.ID, "approve"); err != nil {
			t.Fatal(err)
		}
		got, err := h.decide("slack:UALICE", a.ID, "approve")
		if de := decisionCode(t, err); de.Code != core.DecisionAlreadyVoted {
			t.Fatalf("second identity of one person: %+v, %+v", de, got)
		}
		if run, _ := h.store.RunGet(context.Background(), rc.RunID); run.Status != core.RunWaitingApproval {
			t.Fatalf("one person met quorum 2: run %s", run.Status)
		}
		if got, err := h.decide("console:bob", a.ID, "approve"); err != nil || got.Status != approvals.StatusApproved {
			t.Fatalf("a second person: %+v %v", got, err)
		}
		h.waitRun(rc.RunID, core.RunSucceeded)
	})
}

func TestAttack_SelfApprovalBelowHighImpact(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b)
		rc := h.send("console:req", "console:t1", "scale api 3")
		a := h.waitApproval(rc.RunID)
		if a.Risk != approvals.RiskExternal {
			t.Fatalf("risk %s", a.Risk)
		}
		_, err := h.decide("console:req", a.ID, "approve")
		if de := decisionCode(t, err); de.Code != core.DecisionSelfApproval {
			t.Fatalf("requester approved their own external call: %+v", de)
		}
	})
}

func TestSelfApprovalAllowedByRuleOrGlobal(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b, func(o *Options) {
			o.Policy.Rules = append(o.Policy.Rules, approvals.Rule{Tool: "scale", Args: map[string]string{"env": "lab"},
				Effect: approvals.EffectAsk, Approvers: []string{"group:sre"}, AllowSelfApproval: true})
		})
		rc := h.send("console:req", "console:t1", "scale api 3 lab")
		a := h.waitApproval(rc.RunID)
		if _, err := h.decide("console:req", a.ID, "approve"); err != nil {
			t.Fatalf("self-approval under a rule that allows it: %v", err)
		}
		h.waitRun(rc.RunID, core.RunSucceeded)
		// The global setting (older configs, the quickstart) still works.
		g := setup(t, b, func(o *Options) { o.AllowSelfApproval = true })
		rc = g.send("console:req", "console:t1", "deploy api 1")
		a = g.waitApproval(rc.RunID)
		if _, err := g.decide("console:req", a.ID, "approve"); err != nil {
			t.Fatalf("self-approval with approvals.allow_self_approval: %v", err)
		}
		g.waitRun(rc.RunID, core.RunSucceeded)
	})
}

func TestAttack_AgentDecides(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b, func(o *Options) { o.Groups["sre"] = append(o.Groups["sre"], "agent:claude") })
		rc := h.send("agent:claude", "console:t1", "scale api 3")
		a := h.waitApproval(rc.RunID)
		_, err := h.decide("agent:claude", a.ID, "approve")
		if de := decisionCode(t, err); de.Code != core.DecisionHumanRequired {
			t.Fatalf("agent decision: %+v", de)
		}
		es := h.auditKinds(approvals.AuditListParams{ApprovalID: a.ID, Actor: "agent:claude"})
		if len(es) != 2 || es[0].Kind != "approval.requested" || es[1].Kind != "approval.refused" {
			t.Fatalf("audit: %+v", es)
		}
		if cur, _ := h.store.ApprovalGet(context.Background(), a.ID); cur.Status != approvals.StatusPending || len(cur.Decisions) != 0 {
			t.Fatalf("approval changed: %+v", cur)
		}
	})
}

func TestAttack_RemovedApproverDecidesPending(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b)
		rc := h.send("console:req", "console:t1", "deploy api 1")
		a := h.waitApproval(rc.RunID)
		// bob leaves the team; the configuration is reloaded.
		o := h.fx.options(t, h.store, h.clk)
		o.Groups["sre"] = []string{"console:alice", "console:carol", "console:req"}
		h.eng.Reload(Trust{Policy: o.Policy, Groups: o.Groups})
		_, err := h.decide("console:bob", a.ID, "approve")
		if de := decisionCode(t, err); de.Code != core.DecisionNotApprover {
			t.Fatalf("removed approver decided: %+v", de)
		}
		if got, err := h.decide("console:alice", a.ID, "approve"); err != nil || got.Status != approvals.StatusApproved {
			t.Fatalf("remaining approver: %+v %v", got, err)
		}
	})
}

func TestAttack_SessionGrantIsBlanket(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b)
		rc := h.send("console:req", "console:t1", "scale api 1")
		a := h.waitApproval(rc.RunID)
		if _, err := h.decide("console:alice", a.ID, "approve", func(d *core.Decision) { d.Scope = "session" }); err != nil {
			t.Fatal(err)
		}
		h.waitRun(rc.RunID, core.RunSucceeded)
		// Someone else in the same thread still asks.
		other := h.send("console:mallory", "console:t1", "scale api 2")
		h.waitApproval(other.RunID)
		if _, err := h.eng.Cancel(context.Background(), other.RunID, core.Actor{ID: "console:admin"}); err != nil {
			t.Fatal(err)
		}
		// So does the same requester under another rule: the staging grant
		// does not reach prod (quorum 2) or qa (another quorum-1 rule).
		for _, text := range []string{"scale api 2 prod-eu", "scale api 2 qa-1"} {
			rc := h.send("console:req", "console:t1", text)
			h.waitApproval(rc.RunID)
			if _, err := h.eng.Cancel(context.Background(), rc.RunID, core.Actor{ID: "console:admin"}); err != nil {
				t.Fatal(err)
			}
		}
		// The same rule and requester run unasked, until the grant expires.
		rc = h.send("console:req", "console:t1", "scale api 5")
		h.waitRun(rc.RunID, core.RunSucceeded)
		h.clk.Advance(2 * time.Hour)
		rc = h.send("console:req", "console:t1", "scale api 6")
		h.waitApproval(rc.RunID)
	})
}

func TestForeverGrantIsAStoredAllowRule(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b)
		rc := h.send("console:req", "console:t1", "scale api 3")
		a := h.waitApproval(rc.RunID)
		if _, err := h.decide("console:alice", a.ID, "approve", func(d *core.Decision) { d.Scope = "forever" }); err != nil {
			t.Fatal(err)
		}
		h.waitRun(rc.RunID, core.RunSucceeded)
		// The same arguments run unasked for anyone, in any thread, later.
		h.clk.Advance(48 * time.Hour)
		same := h.send("console:carol", "console:t9", "scale api 3")
		h.waitRun(same.RunID, core.RunSucceeded)
		// Other arguments ask; a deny stays a deny.
		other := h.send("console:carol", "console:t9", "scale api 4")
		h.waitApproval(other.RunID)
		if _, err := h.eng.Cancel(context.Background(), other.RunID, core.Actor{ID: "console:admin"}); err != nil {
			t.Fatal(err)
		}
		// Revoked, it covers nothing.
		if _, err := h.store.GrantRevoke(context.Background(), approvals.GrantRevokeParams{ID: approvals.GrantID(a.ID), Actor: "console:admin", At: h.clk.Now()}); err != nil {
			t.Fatal(err)
		}
		again := h.send("console:carol", "console:t9", "scale api 3")
		h.waitApproval(again.RunID)
	})
}

// TestAttack_ForeverGrantOutlivesGranterAndRule reproduces issue 26, item
// 2: alice (sre) approves "restart api" for ever; a reload removes her from
// sre and points the rule at group:leads. Her grant no longer covers the
// call: it is bound to the rule that asked and to her live eligibility
// under it, so api:ci's next "restart api" asks again (leads decide). Each
// half alone is enough: a grant whose granter left the rule's approvers,
// and one whose rule changed, both cover nothing.
func TestAttack_ForeverGrantOutlivesGranterAndRule(t *testing.T) {
	restartRule := func(approvers ...string) approvals.Rule {
		return approvals.Rule{Tool: "restart", Effect: approvals.EffectAsk, Approvers: approvers}
	}
	trust := func(o Options, rule approvals.Rule, sre []string) Trust {
		pol := *o.Policy
		pol.Rules = append(append([]approvals.Rule{}, pol.Rules...), rule)
		groups := map[string][]string{"sre": sre, "leads": {"console:lead"}}
		return Trust{Policy: &pol, Groups: groups}
	}
	for name, reload := range map[string]func(o Options) Trust{
		"PoC":                 func(o Options) Trust { return trust(o, restartRule("group:leads"), []string{"console:bob"}) },
		"GranterLeftTheGroup": func(o Options) Trust { return trust(o, restartRule("group:sre"), []string{"console:bob"}) },
		"RuleNowAsksOthers": func(o Options) Trust {
			return trust(o, restartRule("group:leads"), []string{"console:alice", "console:bob"})
		},
	} {
		t.Run(name, func(t *testing.T) {
			eachBackend(t, func(t *testing.T, b backend) {
				h := setup(t, b, func(o *Options) {
					o.Policy.Rules = append(o.Policy.Rules, restartRule("group:sre"))
					o.Groups["leads"] = []string{"console:lead"}
				})
				rc := h.send("console:req", "console:g1", "restart api")
				a := h.waitApproval(rc.RunID)
				if _, err := h.decide("console:alice", a.ID, "approve", func(d *core.Decision) { d.Scope = "forever" }); err != nil {
					t.Fatal(err)
				}
				h.waitRun(rc.RunID, core.RunSucceeded)
				// The grant works while its granter and rule stand.
				ok := h.send("api:ci", "console:g2", "restart api")
				h.waitRun(ok.RunID, core.RunSucceeded)
				o := h.fx.options(t, h.store, h.clk)
				h.eng.Reload(reload(o))
				again := h.send("api:ci", "console:g3", "restart api")
				na := h.waitApproval(again.RunID)
				if len(h.fx.restart.callsFor(again.RunID)) != 0 {
					t.Fatal("the stale grant let the call run")
				}
				if name == "PoC" {
					if _, err := h.decide("console:alice", na.ID, "approve"); decisionCode(t, err).Code != core.DecisionNotApprover {
						t.Fatalf("the removed granter decided: %v", err)
					}
					if _, err := h.decide("console:lead", na.ID, "approve"); err != nil {
						t.Fatal(err)
					}
					h.waitRun(again.RunID, core.RunSucceeded)
				}
			})
		})
	}
}

func TestAttack_DestructiveRunsUnderDefaultAllow(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b, func(o *Options) { o.Policy.Default = approvals.DefaultAllow })
		rc := h.send("console:req", "console:t1", "wipe cache")
		h.waitApproval(rc.RunID)
		if n := h.fx.wipe.total(); n != 0 {
			t.Fatalf("destructive tool ran unasked under default allow: %d", n)
		}
		// A harmless tool with no rule still runs.
		rc = h.send("console:req", "console:t2", "restart api")
		h.waitRun(rc.RunID, core.RunSucceeded)
	})
}

func TestAttack_StrangerRunsReadTools(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b, func(o *Options) {
			o.Requesters = map[string]Requesters{"telegram": {}, "slack": {Entries: []string{"person:ops"}}, "email": {Anyone: true}}
			o.People = map[string][]string{"ops": {"slack:UOPS"}}
			o.Groups["sre"] = append(o.Groups["sre"], "telegram:42")
		})
		rc := h.send("telegram:666", "telegram:666", "status api")
		if !rc.Refused || rc.RunID != "" || rc.Run != nil {
			t.Fatalf("stranger's request: %+v", rc)
		}
		if n := h.fx.status.total(); n != 0 {
			t.Fatalf("a stranger ran a read tool %d times", n)
		}
		es := h.auditKinds(approvals.AuditListParams{Actor: "telegram:666"})
		if len(es) != 1 || es[0].Kind != "request.refused" {
			t.Fatalf("audit: %+v", es)
		}
		msgs, _, err := h.store.ThreadMessages(context.Background(), core.ThreadMessagesParams{Thread: core.Thread{Channel: "telegram", Key: "666"}})
		if err != nil || len(msgs) != 2 || !strings.Contains(msgs[0].Text, "may not start runs") {
			t.Fatalf("thread of the refused request: %+v, %v", msgs, err)
		}
		// Identities the configuration knows may; listed ones where a list
		// is given; anyone where it says so; an ungated channel is open.
		for actor, thread := range map[string]string{"telegram:42": "telegram:42", "slack:UOPS": "slack:C1", "email:x@example.com": "email:x", "console:whoever": "console:t1"} {
			rc := h.send(actor, thread, "status api")
			if rc.Refused {
				t.Fatalf("%s refused", actor)
			}
			h.waitRun(rc.RunID, core.RunSucceeded)
		}
		if rc := h.send("slack:UOTHER", "slack:C1", "status api"); !rc.Refused {
			t.Fatalf("slack sender outside requesters: %+v", rc)
		}
	})
}

func TestCancelAllowed(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b, withPeople(map[string][]string{"req": {"console:req", "slack:UREQ"}}))
		rc := h.send("console:req", "console:t1", "deploy api 1")
		h.waitApproval(rc.RunID)
		ctx := context.Background()
		for _, who := range []string{"console:req", "slack:UREQ", "console:alice"} {
			if err := h.eng.CancelAllowed(ctx, rc.RunID, core.Actor{ID: who}); err != nil {
				t.Errorf("%s may cancel: %v", who, err)
			}
		}
		// A stranger has no standing and may not even know the run: the
		// authority answers not found, as for an unknown id.
		if err := h.eng.CancelAllowed(ctx, rc.RunID, core.Actor{ID: "console:mallory"}); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("stranger cancel: %v", err)
		}
		if err := h.eng.CancelAllowed(ctx, "nope", core.Actor{ID: "console:req"}); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("unknown run: %v", err)
		}
	})
}
