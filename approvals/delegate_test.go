package approvals

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"
)

// delegation fixture: sre is alice and carol, leads is bob; dave is known
// but in no group; the requester is req.
func delegationDir(sre []string) *Directory {
	return NewDirectory(map[string][]string{
		"alice": {"slack:UALICE", "console:alice"}, "bob": {"slack:UBOB"}, "carol": {"slack:UCAROL"},
		"dave": {"slack:UDAVE"}, "req": {"console:req"},
	}, map[string][]string{"sre": sre, "leads": {"person:bob"}})
}

func delegationEnv(dir *Directory, a *Approval) Env {
	return Env{People: dir, Eligible: LiveEligible(a.Approvers, a, dir)}
}

func pendingFor(dir *Directory, quorum int) *Approval {
	a := pending(quorum)
	a.Eligible = dir.Expand(a.Approvers)
	return a
}

// Alice hands her approval to bob: bob may decide and alice no longer
// may; the hand-over is recorded, audited and updates the card.
func TestDelegateHandsTheSayOn(t *testing.T) {
	t.Parallel()
	dir := delegationDir([]string{"person:alice", "person:carol"})
	a := pendingFor(dir, 1)
	out := Delegate(a, DelegateRequest{Actor: "slack:UALICE", Channel: "slack", To: "person:bob", Reason: "on leave", At: t0.Add(time.Minute)},
		delegationEnv(dir, a))
	if out.Err != nil || out.Final || !out.UpdateCard || len(out.Audit) != 1 || out.Audit[0].Kind != AuditApprovalDelegated {
		t.Fatalf("delegate: %+v", out)
	}
	next := out.Approval
	d := next.Decisions[len(next.Decisions)-1]
	if d.Action != ActionDelegate || d.To != "person:bob" || d.Person != "person:alice" || d.Reason != "on leave" {
		t.Fatalf("recorded %+v", d)
	}
	if !slices.Contains(next.Eligible, "slack:UBOB") || slices.Contains(next.Eligible, "slack:UALICE") || slices.Contains(next.Eligible, "console:alice") {
		t.Fatalf("eligible %v", next.Eligible)
	}
	if got := Delegations(next.Approvers, next, dir); !slices.Equal(got, []string{"person:bob (handed on by slack:UALICE)"}) {
		t.Fatalf("delegations %v", got)
	}
	// Alice, through either identity, may no longer decide; bob may.
	for _, who := range []string{"slack:UALICE", "console:alice"} {
		if o := Decide(next, req(who, ActionApprove), delegationEnv(dir, next)); !errors.Is(o.Err, ErrNotApprover) {
			t.Fatalf("%s after handing on: %v", who, o.Err)
		}
	}
	o := Decide(next, req("slack:UBOB", ActionApprove), delegationEnv(dir, next))
	if o.Err != nil || o.Approval.Status != StatusApproved {
		t.Fatalf("bob: %v", o.Err)
	}
	if o.Approval.CountedApprovals() != 1 {
		t.Fatalf("a delegation counted as an approval: %d", o.Approval.CountedApprovals())
	}
}

// The hand-over is judged live: it stands while its delegator could
// decide under the live configuration; a chain falls with its first link.
func TestDelegationJudgedLive(t *testing.T) {
	t.Parallel()
	dir := delegationDir([]string{"person:alice", "person:carol"})
	a := pendingFor(dir, 1)
	out := Delegate(a, DelegateRequest{Actor: "slack:UALICE", To: "person:bob", At: t0.Add(time.Minute)}, delegationEnv(dir, a))
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	a = out.Approval
	out = Delegate(a, DelegateRequest{Actor: "slack:UBOB", To: "person:dave", At: t0.Add(2 * time.Minute)}, delegationEnv(dir, a))
	if out.Err != nil {
		t.Fatalf("bob hands on to dave: %v", out.Err)
	}
	a = out.Approval
	if got := LiveEligible(a.Approvers, a, dir); !slices.Equal(got, []string{"slack:UCAROL", "slack:UDAVE"}) {
		t.Fatalf("eligible %v", got)
	}
	// A reload removes alice from sre: her hand-over, and bob's after it,
	// no longer stand.
	reloaded := delegationDir([]string{"person:carol"})
	if got := LiveEligible(a.Approvers, a, reloaded); !slices.Equal(got, []string{"slack:UCAROL"}) {
		t.Fatalf("after the reload: %v", got)
	}
	if o := Decide(a, req("slack:UDAVE", ActionApprove), delegationEnv(reloaded, a)); !errors.Is(o.Err, ErrNotApprover) {
		t.Fatalf("dave after alice left sre: %v", o.Err)
	}
}

// Every refusal names its reason and changes nothing but the audit.
func TestDelegateRefusals(t *testing.T) {
	t.Parallel()
	dir := delegationDir([]string{"person:alice", "person:carol"})
	at := t0.Add(time.Minute)
	approvedBy := func() *Approval {
		a := pendingFor(dir, 2)
		a.Decisions = []Decision{{Actor: "slack:UALICE", Person: "person:alice", Action: ActionApprove, At: t0}}
		return a
	}
	decided := pendingFor(dir, 1)
	decided.Status = StatusApproved
	expired := pendingFor(dir, 1)
	expired.Status = StatusExpired
	cases := []struct {
		name string
		a    *Approval
		r    DelegateRequest
		want error
	}{
		{"NotAnApprover", pendingFor(dir, 1), DelegateRequest{Actor: "slack:UDAVE", To: "person:bob", At: at}, ErrNotApprover},
		{"Agent", pendingFor(dir, 1), DelegateRequest{Actor: "agent:x", To: "person:bob", At: at}, ErrHumanRequired},
		{"NoTarget", pendingFor(dir, 1), DelegateRequest{Actor: "slack:UALICE", At: at}, ErrInvalidDecision},
		{"UnknownPerson", pendingFor(dir, 1), DelegateRequest{Actor: "slack:UALICE", To: "person:zed", At: at}, ErrInvalidDecision},
		{"UnknownGroup", pendingFor(dir, 1), DelegateRequest{Actor: "slack:UALICE", To: "group:nope", At: at}, ErrInvalidDecision},
		{"BareIdentity", pendingFor(dir, 1), DelegateRequest{Actor: "slack:UALICE", To: "slack:UBOB", At: at}, ErrInvalidDecision},
		{"ToThemselves", pendingFor(dir, 1), DelegateRequest{Actor: "slack:UALICE", To: "person:alice", At: at}, ErrInvalidDecision},
		{"ToTheRequester", pendingFor(dir, 1), DelegateRequest{Actor: "slack:UALICE", To: "person:req", At: at}, ErrInvalidDecision},
		{"AfterApproving", approvedBy(), DelegateRequest{Actor: "console:alice", To: "person:bob", At: at}, ErrInvalidDecision},
		{"Decided", decided, DelegateRequest{Actor: "slack:UALICE", To: "person:bob", At: at}, ErrAlreadyDecided},
		{"Expired", expired, DelegateRequest{Actor: "slack:UALICE", To: "person:bob", At: at}, ErrExpired},
		{"PastExpiry", pendingFor(dir, 1), DelegateRequest{Actor: "slack:UALICE", To: "person:bob", At: t0.Add(2 * time.Hour)}, ErrExpired},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := Delegate(tc.a, tc.r, delegationEnv(dir, tc.a))
			if !errors.Is(out.Err, tc.want) {
				t.Fatalf("err %v, want %v", out.Err, tc.want)
			}
			if len(out.Audit) == 0 || out.Audit[0].Kind != AuditApprovalRefused || out.UpdateCard {
				t.Fatalf("outcome %+v", out)
			}
			if tc.name != "PastExpiry" && out.Approval != nil {
				t.Fatalf("a refusal changed the approval: %+v", out.Approval)
			}
		})
	}
}

// One person's say never counts twice: quorum 2, alice hands to the leads
// group; bob (a lead) and carol (sre) make the quorum, alice cannot.
func TestDelegationAndQuorum(t *testing.T) {
	t.Parallel()
	dir := delegationDir([]string{"person:alice", "person:carol"})
	a := pendingFor(dir, 2)
	out := Delegate(a, DelegateRequest{Actor: "slack:UALICE", To: "group:leads", At: t0.Add(time.Minute)}, delegationEnv(dir, a))
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	a = out.Approval
	for _, who := range []string{"slack:UBOB", "slack:UCAROL"} {
		o := Decide(a, req(who, ActionApprove), delegationEnv(dir, a))
		if o.Err != nil {
			t.Fatalf("%s: %v", who, o.Err)
		}
		a = o.Approval
	}
	if a.Status != StatusApproved || a.CountedApprovals() != 2 {
		t.Fatalf("status %s with %d approvals", a.Status, a.CountedApprovals())
	}
}

// Delegation inside MayDecide's eligibility with approver groups a
// surface vouches for (the console's identity provider): one vouched in
// the group an approval was handed to may decide it, with via_group
// audited; one eligible only through a vouched group may decide but not
// hand it on (a hand-over is judged live later, without that sign-in);
// one who handed it on stays refused whatever group is vouched.
func TestDelegationAndVouchedGroups(t *testing.T) {
	t.Parallel()
	dir := delegationDir([]string{"person:alice", "person:carol"})
	a := pendingFor(dir, 1)
	out := Delegate(a, DelegateRequest{Actor: "slack:UALICE", To: "group:leads", At: t0.Add(time.Minute)}, delegationEnv(dir, a))
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	handed := out.Approval

	t.Run("VouchedInTheTargetGroupDecides", func(t *testing.T) {
		r := req("console:erin@example.com", ActionApprove)
		r.Groups = []string{"leads"}
		o := Decide(handed, r, delegationEnv(dir, handed))
		if o.Err != nil || o.Approval.Status != StatusApproved {
			t.Fatalf("vouched lead: %v", o.Err)
		}
		var d map[string]any
		if err := json.Unmarshal(o.Audit[0].Detail, &d); err != nil || d["via_group"] != "leads" {
			t.Fatalf("audit detail %s: want via_group leads", o.Audit[0].Detail)
		}
		// Dispatch counts it while the hand-over stands, and not once the
		// delegator has left sre (a reload).
		if got := o.Approval.Decisions[len(o.Approval.Decisions)-1]; got.Via != "leads" || !ViaStands(got.Via, handed.Approvers, o.Approval, dir) {
			t.Fatalf("decision %+v does not stand through leads", got)
		}
		if ViaStands("leads", handed.Approvers, o.Approval, delegationDir([]string{"person:carol"})) {
			t.Fatal("a vouched decision stood after its hand-over fell")
		}
	})
	t.Run("NotHandedNotVouched", func(t *testing.T) {
		r := req("console:erin@example.com", ActionApprove)
		r.Groups = []string{"leads"}
		if o := Decide(a, r, delegationEnv(dir, a)); !errors.Is(o.Err, ErrNotApprover) {
			t.Fatalf("leads before any hand-over: %v", o.Err)
		}
	})
	t.Run("VouchedOnlyMayNotHandOn", func(t *testing.T) {
		o := Delegate(a, DelegateRequest{Actor: "console:erin@example.com", To: "person:bob", Groups: []string{"sre"}, At: t0.Add(time.Minute)},
			delegationEnv(dir, a))
		if !errors.Is(o.Err, ErrNotApprover) || o.Approval != nil || len(o.Audit) != 1 || o.Audit[0].Kind != AuditApprovalRefused {
			t.Fatalf("hand-over by a vouched-only approver: %+v", o)
		}
	})
	t.Run("DelegatorStaysOutWhateverVouched", func(t *testing.T) {
		r := req("console:alice", ActionApprove)
		r.Groups = []string{"sre", "leads"}
		if o := Decide(handed, r, delegationEnv(dir, handed)); !errors.Is(o.Err, ErrNotApprover) {
			t.Fatalf("alice after handing on, vouched in sre: %v", o.Err)
		}
	})
}
