package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// testApprovalWhyAndReceipt: an approval keeps the policy's reason for
// asking from its suspend on, and the receipt its deciding transaction
// wrote; both come back from ApprovalGet and ApprovalList, and a refused
// decision writes no receipt.
func testApprovalWhyAndReceipt(t *testing.T, s core.Store) {
	const why = "policy rule 3: deploy to prod* by a non-lead: ask"
	a := suspendedWith(t, s, thread("receipt"), []string{"console:bob"}, 1, func(x *approvals.Approval) { x.Why = why })
	got, err := s.ApprovalGet(ctx(t), a.ID)
	if err != nil || got.Why != why || got.Receipt != "" {
		t.Fatalf("suspended: why %q receipt %q, %v", got.Why, got.Receipt, err)
	}
	// A refused decision (not an approver) writes nothing.
	refused := approve("console:mallory")
	if _, err := s.ApprovalDecide(ctx(t), approvals.ApprovalDecideParams{ID: a.ID, Decide: func(cur *approvals.Approval) approvals.Outcome {
		out := approvals.Decide(cur, withAt(refused), env)
		if out.Approval != nil {
			out.Approval.Receipt = "forged"
		}
		return out
	}}); !errors.Is(err, approvals.ErrNotApprover) {
		t.Fatalf("refused decision: %v", err)
	}
	if got, _ := s.ApprovalGet(ctx(t), a.ID); got.Receipt != "" {
		t.Fatalf("a refused decision stored receipt %q", got.Receipt)
	}
	const receipt = "eyJhbGciOiJFZERTQSJ9.eyJqdGkiOiJ4In0.c2ln"
	stored, err := s.ApprovalDecide(ctx(t), approvals.ApprovalDecideParams{ID: a.ID, Decide: func(cur *approvals.Approval) approvals.Outcome {
		out := approvals.Decide(cur, withAt(approve("console:bob")), env)
		if out.Final {
			out.Approval.Receipt = receipt
		}
		return out
	}})
	if err != nil || stored.Receipt != receipt || stored.Why != why {
		t.Fatalf("decided: receipt %q why %q, %v", stored.Receipt, stored.Why, err)
	}
	got, err = s.ApprovalGet(ctx(t), a.ID)
	if err != nil || got.Receipt != receipt || got.Why != why || got.Status != approvals.StatusApproved {
		t.Fatalf("stored: receipt %q why %q status %s, %v", got.Receipt, got.Why, got.Status, err)
	}
	items, _, err := s.ApprovalList(ctx(t), approvals.ApprovalListParams{RunID: a.RunID})
	if err != nil || len(items) != 1 || items[0].Receipt != receipt || items[0].Why != why {
		t.Fatalf("listed: %+v, %v", items, err)
	}
}

// testDelegationKeepsPendingAndUpdatesCard: a delegation is written as a
// decision record of action delegate (with To) on an approval that stays
// pending, with its new eligible identities, its audit entry and an update
// of its card; the run keeps waiting.
func testDelegationKeepsPendingAndUpdatesCard(t *testing.T, s core.Store) {
	dir := approvals.NewDirectory(map[string][]string{"bob": {"console:bob"}, "dave": {"console:dave"}},
		map[string][]string{"sre": {"person:bob"}})
	a := suspendedWith(t, s, thread("delegate"), []string{"console:bob"}, 1, func(x *approvals.Approval) { x.Requester = "console:req" })
	before := len(outboxOfKind(t, s, core.KindCardUpdate, a.ID))
	at := t0.Add(time.Minute)
	got, err := s.ApprovalDecide(ctx(t), approvals.ApprovalDecideParams{ID: a.ID, Decide: func(cur *approvals.Approval) approvals.Outcome {
		return approvals.Delegate(cur, approvals.DelegateRequest{Actor: "console:bob", Channel: "console", To: "person:dave", Reason: "on call", At: at},
			approvals.Env{People: dir, Eligible: approvals.LiveEligible(cur.Approvers, cur, dir)})
	}})
	if err != nil {
		t.Fatalf("delegate: %v", err)
	}
	stored, err := s.ApprovalGet(ctx(t), a.ID)
	if err != nil || got.Status != approvals.StatusPending || stored.Status != approvals.StatusPending || len(stored.Decisions) != 1 {
		t.Fatalf("after delegating: %+v, %v", stored, err)
	}
	d := stored.Decisions[0]
	if d.Action != approvals.ActionDelegate || d.To != "person:dave" || d.Actor != "console:bob" || d.Reason != "on call" ||
		!slices.Equal(stored.Eligible, []string{"console:dave"}) {
		t.Fatalf("stored delegation %+v, eligible %v", d, stored.Eligible)
	}
	if n := len(outboxOfKind(t, s, core.KindCardUpdate, a.ID)); n != before+1 {
		t.Fatalf("card updates %d, want %d", n, before+1)
	}
	run, err := s.RunGet(ctx(t), a.RunID)
	if err != nil || run.Status != core.RunWaitingApproval {
		t.Fatalf("run %v, %v: want it still waiting", run, err)
	}
	entries, err := s.AuditList(ctx(t), approvals.AuditListParams{ApprovalID: a.ID, Kind: string(approvals.AuditApprovalDelegated), Limit: 10})
	if err != nil || len(entries) != 1 || entries[0].Actor != "console:bob" {
		t.Fatalf("audit %+v, %v", entries, err)
	}
	// The delegate decides: one decision, final, the run requeued.
	final, err := s.ApprovalDecide(ctx(t), approvals.ApprovalDecideParams{ID: a.ID, Decide: func(cur *approvals.Approval) approvals.Outcome {
		return approvals.Decide(cur, withAt(approve("console:dave")), approvals.Env{People: dir, Eligible: approvals.LiveEligible(cur.Approvers, cur, dir),
			Recheck: env.Recheck, Validate: env.Validate})
	}})
	if err != nil || final.Status != approvals.StatusApproved || final.CountedApprovals() != 1 {
		t.Fatalf("dave decides: %+v, %v", final, err)
	}
	if run, _ := s.RunGet(ctx(t), a.RunID); run.Status != core.RunQueued {
		t.Fatalf("run %s after the delegate's decision, want queued", run.Status)
	}
}

func withAt(r approvals.Request) approvals.Request {
	r.At, r.Channel = t0.Add(time.Minute), "console"
	return r
}
