package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

func TestAllowPath(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b)
		rc := h.send("console:req", "console:t1", "status api")
		if rc.RunID == "" || rc.Duplicate {
			t.Fatalf("receipt %+v", rc)
		}
		run := h.waitRun(rc.RunID, core.RunSucceeded, core.RunFailed)
		if run.Status != core.RunSucceeded {
			t.Fatalf("run %s: %s %s", run.Status, run.ErrorCode, run.ErrorMessage)
		}
		if run.Requester != "console:req" || run.Reason != "status api" || run.Flow != "status" {
			t.Fatalf("run fields: %+v", run)
		}
		calls := h.fx.status.callsFor(run.ID)
		if len(calls) != 1 || calls[0].IdempotencyKey != run.ID+"/0" || calls[0].Args["service"] != "api" {
			t.Fatalf("dispatches: %+v", calls)
		}
		if len(run.Steps) != 1 || run.Steps[0].Status != core.StepSucceeded || !strings.Contains(run.Steps[0].Output, "status ran") {
			t.Fatalf("steps: %+v", run.Steps)
		}
		texts := h.outboxTexts(run.ID)
		if len(texts) != 1 || !containsAll(texts[0], "succeeded", "```", "status ran with") {
			t.Fatalf("final reply: %q", texts)
		}
		types := h.eventTypes(run.ID)
		for _, want := range []string{core.EventRunQueued, core.EventTurnStarted, core.EventToolStarted, core.EventToolFinished, core.EventMessageCommitted, core.EventTurnFinished} {
			if !slices.Contains(types, want) {
				t.Fatalf("event %s missing from %v", want, types)
			}
		}
		if h.fx.status.previews != 0 {
			t.Fatal("an allowed call must not be previewed")
		}
	})
}

func TestMultiStepFlowRunsInOrder(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b)
		rc := h.send("console:req", "console:t1", "check web")
		run := h.waitRun(rc.RunID, core.RunSucceeded, core.RunFailed)
		if run.Status != core.RunSucceeded || run.StepIndex != 2 || len(run.Steps) != 2 {
			t.Fatalf("run: %+v", run)
		}
		if c := h.fx.restart.callsFor(run.ID); len(c) != 1 || c[0].IdempotencyKey != run.ID+"/1" {
			t.Fatalf("second step dispatch: %+v", c)
		}
		texts := h.outboxTexts(run.ID)
		if len(texts) != 1 || !containsAll(texts[0], "status ran", "restart ran") {
			t.Fatalf("reply: %q", texts)
		}
	})
}

func TestUnknownCommandRepliesWithHelp(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b)
		ev := h.event("console:req", "console:t1", "frobnicate now")
		rc, err := h.eng.HandleEvent(context.Background(), ev)
		if err != nil || rc.RunID != "" {
			t.Fatalf("receipt %+v, %v", rc, err)
		}
		items, _, err := h.store.OutboxList(context.Background(), core.OutboxListParams{Status: core.DeliveryPending, Limit: 10})
		if err != nil || len(items) != 1 {
			t.Fatalf("outbox: %v %v", items, err)
		}
		if !containsAll(items[0].Text, "frobnicate", "deploy <service> <version>", "Deploy a version") || items[0].Thread != ev.Thread {
			t.Fatalf("help reply: %+v", items[0])
		}
		if !strings.Contains(h.eng.FlowsHelp(), "status <service>") {
			t.Fatalf("FlowsHelp: %s", h.eng.FlowsHelp())
		}
	})
}

func TestDenyPath(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b)
		rc := h.send("console:req", "console:t1", "drop users")
		run := h.waitRun(rc.RunID, core.RunFailed, core.RunSucceeded)
		if run.Status != core.RunFailed || run.ErrorCode != "denied" || !strings.Contains(run.ErrorMessage, "rule 5") {
			t.Fatalf("run: %s %s %q", run.Status, run.ErrorCode, run.ErrorMessage)
		}
		if n := h.fx.drop.total(); n != 0 {
			t.Fatalf("denied tool dispatched %d times", n)
		}
		if len(run.Steps) != 1 || run.Steps[0].Status != core.StepDenied {
			t.Fatalf("steps: %+v", run.Steps)
		}
		if es := h.auditKinds(approvals.AuditListParams{RunID: run.ID}); len(es) != 1 || es[0].Kind != "policy.denied" {
			t.Fatalf("audit: %+v", es)
		}
		if texts := h.outboxTexts(run.ID); len(texts) != 1 || !strings.Contains(texts[0], "denied by policy") {
			t.Fatalf("reply: %q", texts)
		}
	})
}

func TestAskApproveDispatchesOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b)
		rc := h.send("console:req", "console:t1", "deploy api 1.2.3")
		a := h.waitApproval(rc.RunID)
		if a.Status != approvals.StatusPending || a.Tool != "deploy" || a.Requester != "console:req" ||
			a.ProposedArgs["env"] != "staging" || !strings.HasPrefix(a.Preview, "would deploy") ||
			a.Reason != "deploy api 1.2.3" || a.Risk != approvals.RiskHighImpact || !a.Destructive ||
			!slices.Equal(a.Approvers, []string{"group:sre"}) || !slices.Equal(a.Eligible, sre) || a.Quorum != 1 {
			t.Fatalf("approval: %+v", a)
		}
		if d := a.ExpiresAt.Sub(a.CreatedAt); d != time.Hour {
			t.Fatalf("ttl %s", d)
		}
		// The card is queued with the approval, in the same thread.
		items, _, _ := h.store.OutboxList(context.Background(), core.OutboxListParams{Status: core.DeliveryPending, Limit: 10})
		if len(items) != 1 || items[0].Kind != core.KindCard || items[0].ApprovalID != a.ID || items[0].Thread.String() != "console:t1" {
			t.Fatalf("outbox: %+v", items)
		}
		card := h.eng.Card(a)
		if !card.Pending() || card.ConsoleURL != "https://ops.example.com/approvals/"+a.ID || !strings.Contains(card.PlainText(), "service: api") {
			t.Fatalf("card: %+v", card)
		}
		if kinds := h.auditKinds(approvals.AuditListParams{ApprovalID: a.ID}); len(kinds) != 1 || kinds[0].Kind != "approval.requested" {
			t.Fatalf("audit: %+v", kinds)
		}
		if n := h.fx.deploy.total(); n != 0 {
			t.Fatalf("dispatched before approval: %d", n)
		}

		got, err := h.decide("console:alice", a.ID, "approve")
		if err != nil || got.Status != approvals.StatusApproved {
			t.Fatalf("approve: %+v %v", got, err)
		}
		run := h.waitRun(rc.RunID, core.RunSucceeded, core.RunFailed)
		if run.Status != core.RunSucceeded {
			t.Fatalf("run %s %s", run.Status, run.ErrorMessage)
		}
		calls := h.fx.deploy.callsFor(run.ID)
		if len(calls) != 1 || calls[0].IdempotencyKey != run.ID+"/0" || calls[0].Args["version"] != "1.2.3" {
			t.Fatalf("dispatches: %+v", calls)
		}
		if run.Steps[0].ApprovalID != a.ID || run.Steps[0].Attempts != 1 {
			t.Fatalf("step: %+v", run.Steps[0])
		}
		decided, _ := h.store.ApprovalGet(context.Background(), a.ID)
		if c := h.eng.Card(decided); c.Pending() || !strings.Contains(c.OutcomeLine(), "Approved by console:alice") {
			t.Fatalf("decided card: %+v", c)
		}
		// A decision after the run finished changes nothing.
		h.quiesce() // nothing can be dispatched after this
		if n := len(h.fx.deploy.callsFor(run.ID)); n != 1 {
			t.Fatalf("dispatched %d times", n)
		}
	})
}

func TestAskRejectEndsRejected(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b)
		rc := h.send("console:req", "console:t1", "deploy api 1.2.3")
		a := h.waitApproval(rc.RunID)
		got, err := h.decide("console:bob", a.ID, "reject", func(d *core.Decision) { d.Reason = "not during the freeze" })
		if err != nil || got.Status != approvals.StatusRejected {
			t.Fatalf("reject: %+v %v", got, err)
		}
		if len(got.Decisions) != 1 || got.Decisions[0].Reason != "not during the freeze" {
			t.Fatalf("decisions: %+v", got.Decisions)
		}
		run := h.waitRun(rc.RunID, core.RunRejected, core.RunFailed, core.RunSucceeded)
		if run.Status != core.RunRejected || run.Steps[0].Status != core.StepRejected || run.Steps[0].Output != "not during the freeze" {
			t.Fatalf("run: %+v", run)
		}
		// The code says rejected; the message is the feedback alone, so
		// "code  message" does not read "rejected: rejected: …".
		if run.ErrorCode != "rejected" || run.ErrorMessage != "not during the freeze" {
			t.Fatalf("run error: %q %q", run.ErrorCode, run.ErrorMessage)
		}
		if h.fx.deploy.total() != 0 {
			t.Fatal("rejected call dispatched")
		}
		if texts := h.outboxTexts(run.ID); len(texts) != 1 || !containsAll(texts[0], "rejected by console:bob", "not during the freeze") {
			t.Fatalf("reply: %q", texts)
		}
	})
}

func TestRejectWithoutFeedbackSaysSo(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b)
		rc := h.send("console:req", "console:t1", "deploy api 1.2.3")
		a := h.waitApproval(rc.RunID)
		if _, err := h.decide("console:bob", a.ID, "reject"); err != nil {
			t.Fatalf("reject: %v", err)
		}
		run := h.waitRun(rc.RunID, core.RunRejected, core.RunFailed, core.RunSucceeded)
		if run.Status != core.RunRejected || run.ErrorCode != "rejected" || run.ErrorMessage != "rejected without feedback" {
			t.Fatalf("run: %s %q %q", run.Status, run.ErrorCode, run.ErrorMessage)
		}
	})
}

func TestEditInvalidArgsChangesNothing(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b)
		rc := h.send("console:req", "console:t1", "deploy api 1.2.3")
		a := h.waitApproval(rc.RunID)
		_, err := h.decide("console:alice", a.ID, "edit", func(d *core.Decision) {
			d.Args = map[string]any{"service": "NOT VALID", "version": "2"}
		})
		de := decisionCode(t, err)
		if de.Code != core.DecisionInvalidArgs || de.Field != "service" {
			t.Fatalf("refusal: %+v", de)
		}
		cur, _ := h.store.ApprovalGet(context.Background(), a.ID)
		if cur.Status != approvals.StatusPending || len(cur.Decisions) != 0 || cur.ApprovedArgs != nil {
			t.Fatalf("approval changed: %+v", cur)
		}
		if run, _ := h.store.RunGet(context.Background(), rc.RunID); run.Status != core.RunWaitingApproval {
			t.Fatalf("run changed: %s", run.Status)
		}
	})
}

func TestEditValidExecutesEditedArgs(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b)
		rc := h.send("console:req", "console:t1", "deploy api 1.2.3")
		a := h.waitApproval(rc.RunID)
		got, err := h.decide("console:alice", a.ID, "edit", func(d *core.Decision) {
			d.Args = map[string]any{"service": "api", "version": "1.2.4"}
		})
		if err != nil || got.Status != approvals.StatusEdited {
			t.Fatalf("edit: %+v %v", got, err)
		}
		run := h.waitRun(rc.RunID, core.RunSucceeded, core.RunFailed)
		calls := h.fx.deploy.callsFor(run.ID)
		if run.Status != core.RunSucceeded || len(calls) != 1 {
			t.Fatalf("run %s, calls %+v", run.Status, calls)
		}
		want := map[string]any{"service": "api", "version": "1.2.4", "env": "staging"}
		if fmt.Sprint(calls[0].Args) != fmt.Sprint(want) || fmt.Sprint(run.Steps[0].Args) != fmt.Sprint(want) {
			t.Fatalf("executed %v, step args %v", calls[0].Args, run.Steps[0].Args)
		}
		cur, _ := h.store.ApprovalGet(context.Background(), a.ID)
		if cur.ProposedArgs["version"] != "1.2.3" || cur.ApprovedArgs["version"] != "1.2.4" {
			t.Fatalf("proposed/approved: %v / %v", cur.ProposedArgs, cur.ApprovedArgs)
		}
		// The approval itself records what ran: the edited args, with the
		// schema's defaults applied, stored when the step was dispatched.
		if fmt.Sprint(cur.ExecutedArgs) != fmt.Sprint(want) {
			t.Fatalf("approval executed args %v, want %v", cur.ExecutedArgs, want)
		}
	})
}

func TestEditIntoDenyRefused(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b)
		rc := h.send("console:req", "console:t1", "deploy api 1.2.3")
		a := h.waitApproval(rc.RunID)
		_, err := h.decide("console:alice", a.ID, "edit", func(d *core.Decision) {
			d.Args = map[string]any{"service": "api", "version": "1.2.3", "env": "dr-east"}
		})
		if de := decisionCode(t, err); de.Code != core.DecisionDenied {
			t.Fatalf("refusal: %+v", de)
		}
		cur, _ := h.store.ApprovalGet(context.Background(), a.ID)
		if cur.Status != approvals.StatusPending {
			t.Fatalf("status %s", cur.Status)
		}
	})
}

func TestConcurrentDecisionsOneWins(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b)
		rc := h.send("console:req", "console:t1", "bigdeploy api")
		a := h.waitApproval(rc.RunID)
		var wg sync.WaitGroup
		errs := make([]error, 50)
		for i := range 50 {
			wg.Go(func() {
				_, errs[i] = h.decide(fmt.Sprintf("console:op%d", i), a.ID, "approve")
			})
		}
		wg.Wait()
		cur, _ := h.store.ApprovalGet(context.Background(), a.ID)
		winners := cur.Winners()
		if cur.Status != approvals.StatusApproved || len(winners) != 1 {
			t.Fatalf("approval: %s winners %v", cur.Status, winners)
		}
		wins := 0
		for _, err := range errs {
			if err == nil {
				wins++
				continue
			}
			de := decisionCode(t, err)
			if de.Code != core.DecisionAlreadyDecided || de.By != winners[0] || !strings.Contains(de.Message, winners[0]) {
				t.Fatalf("loser got %+v, winner %s", de, winners[0])
			}
		}
		if wins != 1 {
			t.Fatalf("%d decisions won", wins)
		}
		h.waitRun(rc.RunID, core.RunSucceeded)
		if n := len(h.fx.deploy.callsFor(rc.RunID)); n != 1 {
			t.Fatalf("dispatched %d times", n)
		}
	})
}

func TestSameEventTwiceOneRun(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b)
		ev := h.event("console:req", "console:t1", "deploy api 1")
		first, err := h.eng.HandleEvent(context.Background(), ev)
		if err != nil {
			t.Fatal(err)
		}
		if first.Run == nil || first.Run.ID != first.RunID || first.Run.Status != core.RunQueued || first.Run.Flow != "deploy" {
			t.Fatalf("first delivery's receipt carries run %+v, want the queued run %s", first.Run, first.RunID)
		}
		again, err := h.eng.HandleEvent(context.Background(), ev)
		if err != nil || !again.Duplicate || again.RunID != first.RunID || again.Run != nil {
			t.Fatalf("redelivery: %+v %v", again, err)
		}
		ev2 := h.event("console:req", "console:t2", "deploy web 2")
		var wg sync.WaitGroup
		receipts := make([]core.Receipt, 20)
		for i := range receipts {
			wg.Go(func() {
				rc, err := h.eng.HandleEvent(context.Background(), ev2)
				if err != nil {
					t.Error(err)
				}
				receipts[i] = rc
			})
		}
		wg.Wait()
		fresh := 0
		for _, rc := range receipts {
			if !rc.Duplicate {
				fresh++
			}
			if rc.RunID != receipts[0].RunID || rc.RunID == "" {
				t.Fatalf("receipts disagree: %+v", receipts)
			}
		}
		if fresh != 1 {
			t.Fatalf("%d deliveries created a run", fresh)
		}
		runs, _, err := h.store.RunList(context.Background(), core.RunListParams{Limit: 100})
		if err != nil || len(runs) != 2 {
			t.Fatalf("runs: %d %v", len(runs), err)
		}
	})
}

func TestDecisionEventDeduplicated(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b)
		rc := h.send("console:req", "console:t1", "deploy api 1")
		a := h.waitApproval(rc.RunID)
		ev := h.event("console:alice", "console:t1", "")
		ev.Decision = &core.Decision{ApprovalID: a.ID, Action: "approve"}
		got, err := h.eng.HandleEvent(context.Background(), ev)
		if err != nil || got.ApprovalStatus != "approved" || got.RunID != rc.RunID {
			t.Fatalf("decision event: %+v %v", got, err)
		}
		again, err := h.eng.HandleEvent(context.Background(), ev)
		if err != nil || !again.Duplicate || again.RunID != rc.RunID {
			t.Fatalf("redelivered decision: %+v %v", again, err)
		}
		h.waitRun(rc.RunID, core.RunSucceeded)
		// A refused decision event is recorded and reported, not an ack failure.
		ev3 := h.event("console:mallory", "console:t1", "")
		ev3.Decision = &core.Decision{ApprovalID: a.ID, Action: "reject"}
		if _, err := h.eng.HandleEvent(context.Background(), ev3); decisionCode(t, err).Code != core.DecisionAlreadyDecided {
			t.Fatalf("late decision: %v", err)
		}
	})
}

func TestQuorumTwoDistinctApprovers(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b)
		rc := h.send("console:req", "console:t1", "deploy api 1.2.3 prod-eu")
		a := h.waitApproval(rc.RunID)
		if a.Quorum != 2 {
			t.Fatalf("quorum %d", a.Quorum)
		}
		got, err := h.decide("console:alice", a.ID, "approve")
		if err != nil || got.Status != approvals.StatusPending || got.CountedApprovals() != 1 {
			t.Fatalf("first approval: %+v %v", got, err)
		}
		if c := h.eng.Card(got); c.Approvals != 1 || c.Quorum != 2 || !c.Pending() {
			t.Fatalf("card after one approval: %+v", c)
		}
		_, err = h.decide("console:alice", a.ID, "approve")
		if de := decisionCode(t, err); de.Code != core.DecisionAlreadyVoted || !strings.Contains(de.Message, "already approved") {
			t.Fatalf("same approver twice: %+v", de)
		}
		if run, _ := h.store.RunGet(context.Background(), rc.RunID); run.Status != core.RunWaitingApproval {
			t.Fatalf("run resumed after one distinct approver: %s", run.Status)
		}
		got, err = h.decide("console:bob", a.ID, "approve")
		if err != nil || got.Status != approvals.StatusApproved {
			t.Fatalf("second approver: %+v %v", got, err)
		}
		h.waitRun(rc.RunID, core.RunSucceeded)
		if n := len(h.fx.deploy.callsFor(rc.RunID)); n != 1 {
			t.Fatalf("dispatched %d times", n)
		}
	})
}

func TestSelfApprovalRefusedForHighImpact(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b)
		rc := h.send("console:req", "console:t1", "deploy api 1")
		a := h.waitApproval(rc.RunID)
		_, err := h.decide("console:req", a.ID, "approve")
		if de := decisionCode(t, err); de.Code != core.DecisionSelfApproval {
			t.Fatalf("refusal: %+v", de)
		}
		if cur, _ := h.store.ApprovalGet(context.Background(), a.ID); cur.Status != approvals.StatusPending {
			t.Fatalf("status %s", cur.Status)
		}
	})
}

func TestUnauthorizedApproverRefusedAndAudited(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b)
		rc := h.send("console:req", "console:t1", "deploy api 1")
		a := h.waitApproval(rc.RunID)
		_, err := h.decide("console:mallory", a.ID, "approve")
		if de := decisionCode(t, err); de.Code != core.DecisionNotApprover {
			t.Fatalf("refusal: %+v", de)
		}
		es := h.auditKinds(approvals.AuditListParams{ApprovalID: a.ID, Actor: "console:mallory"})
		if len(es) != 1 || es[0].Kind != "approval.refused" {
			t.Fatalf("audit: %+v", es)
		}
		if cur, _ := h.store.ApprovalGet(context.Background(), a.ID); cur.Status != approvals.StatusPending || len(cur.Decisions) != 0 {
			t.Fatalf("approval changed: %+v", cur)
		}
		_, err = h.decide("console:alice", "no-such-approval", "approve")
		if de := decisionCode(t, err); de.Code != core.DecisionNotFound {
			t.Fatalf("unknown id: %+v", de)
		}
		_, err = h.decide("console:alice", a.ID, "maybe")
		if de := decisionCode(t, err); de.Code != core.DecisionBadRequest {
			t.Fatalf("bad action: %+v", de)
		}
	})
}

func TestExpiry(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b)
		rc := h.send("console:req", "console:t1", "deploy api 1")
		a := h.waitApproval(rc.RunID)
		h.clk.Advance(2 * time.Hour)
		run := h.waitRun(rc.RunID, core.RunFailed, core.RunSucceeded)
		if run.ErrorCode != "approval_expired" {
			t.Fatalf("run: %s %s", run.Status, run.ErrorCode)
		}
		cur, _ := h.store.ApprovalGet(context.Background(), a.ID)
		if cur.Status != approvals.StatusExpired || h.fx.deploy.total() != 0 {
			t.Fatalf("approval %s, dispatches %d", cur.Status, h.fx.deploy.total())
		}
		if texts := h.outboxTexts(run.ID); len(texts) != 1 || !strings.Contains(texts[0], "expired") {
			t.Fatalf("reply: %q", texts)
		}
		_, err := h.decide("console:alice", a.ID, "approve")
		if de := decisionCode(t, err); de.Code != core.DecisionExpired {
			t.Fatalf("late approval: %+v, want expired (410)", de)
		}
		if c := h.eng.Card(cur); !strings.HasPrefix(c.OutcomeLine(), "Expired") {
			t.Fatalf("card outcome: %q", c.OutcomeLine())
		}
		// The expiry and the late attempt are both in the audit log.
		kinds := map[string]bool{}
		for _, e := range h.auditKinds(approvals.AuditListParams{ApprovalID: a.ID}) {
			kinds[string(e.Kind)] = true
		}
		if !kinds["approval.expired"] || !kinds["approval.refused"] {
			t.Fatalf("audit kinds for an expired approval: %v", kinds)
		}
	})
}

func TestSessionGrantSkipsLaterAsks(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b)
		rc := h.send("console:req", "console:t1", "scale api 1")
		a := h.waitApproval(rc.RunID)
		if _, err := h.decide("console:alice", a.ID, "approve", func(d *core.Decision) { d.Scope = "session" }); err != nil {
			t.Fatal(err)
		}
		h.waitRun(rc.RunID, core.RunSucceeded)
		rc2 := h.send("console:req", "console:t1", "scale api 2")
		if run := h.waitRun(rc2.RunID, core.RunSucceeded, core.RunWaitingApproval); run.Status != core.RunSucceeded {
			t.Fatalf("granted call asked again: %s", run.Status)
		}
		if es := h.auditKinds(approvals.AuditListParams{RunID: rc2.RunID}); len(es) == 0 || es[0].Kind != "grant.applied" {
			t.Fatalf("audit of the granted call: %+v", es)
		}
		// Deny stays final under a grant; other threads still ask.
		rc3 := h.send("console:req", "console:t1", "scale api 3 dr-west")
		if run := h.waitRun(rc3.RunID, core.RunFailed, core.RunSucceeded); run.ErrorCode != "denied" {
			t.Fatalf("grant let a denied call through: %+v", run)
		}
		rc4 := h.send("console:req", "console:t2", "scale api 4")
		h.waitApproval(rc4.RunID)
	})
}

func TestToolFailureFailsRun(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b)
		h.fx.status.fail = "boom: connection refused"
		rc := h.send("console:req", "console:t1", "status api")
		run := h.waitRun(rc.RunID, core.RunFailed, core.RunSucceeded)
		if run.Status != core.RunFailed || run.ErrorCode != "tool_failed" || run.Steps[0].Status != core.StepFailed || run.Steps[0].Output != "boom: connection refused" {
			t.Fatalf("run: %+v", run)
		}
		if texts := h.outboxTexts(run.ID); len(texts) != 1 || !containsAll(texts[0], "failed", "exit status 2", "boom") {
			t.Fatalf("reply: %q", texts)
		}
	})
}

func TestCancel(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b)
		rc := h.send("console:req", "console:t1", "deploy api 1")
		a := h.waitApproval(rc.RunID)
		run, err := h.eng.Cancel(context.Background(), rc.RunID, core.Actor{ID: "console:admin"})
		if err != nil || run.Status != core.RunCancelled {
			t.Fatalf("cancel: %+v %v", run, err)
		}
		// The step that waited for the approval ends with the run.
		if len(run.Steps) != 1 || run.Steps[0].Status != core.StepCancelled || !strings.Contains(run.Steps[0].Error, "console:admin") || run.Steps[0].FinishedAt == nil {
			t.Fatalf("steps of the cancelled run: %+v", run.Steps)
		}
		if cur, _ := h.store.ApprovalGet(context.Background(), a.ID); cur.Status != approvals.StatusExpired {
			t.Fatalf("approval of a cancelled run: %s", cur.Status)
		}
		if _, err := h.decide("console:alice", a.ID, "approve"); decisionCode(t, err).Code != core.DecisionExpired {
			t.Fatalf("approve after cancel: %v, want expired", err)
		}
		if _, err := h.eng.Cancel(context.Background(), rc.RunID, core.Actor{ID: "console:admin"}); !errors.Is(err, core.ErrConflict) {
			t.Fatalf("second cancel: %v", err)
		}
		if _, err := h.eng.Cancel(context.Background(), "nope", core.Actor{ID: "console:admin"}); !errors.Is(err, core.ErrNotFound) {
			t.Fatalf("unknown run: %v", err)
		}
		if es := h.auditKinds(approvals.AuditListParams{RunID: rc.RunID, Actor: "console:admin"}); len(es) != 1 || es[0].Kind != "run.cancelled" {
			t.Fatalf("audit: %+v", es)
		}
		h.quiesce() // the engine's last write is done: what we read is final
		if cur, _ := h.store.RunGet(context.Background(), rc.RunID); cur.Status != core.RunCancelled || h.fx.deploy.total() != 0 || cur.Steps[0].Status != core.StepCancelled {
			t.Fatalf("cancelled run moved on: %s, %d dispatches, steps %+v", cur.Status, h.fx.deploy.total(), cur.Steps)
		}
	})
}
