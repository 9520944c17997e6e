package approvals

import (
	"encoding/json"
	"errors"
	"testing"
)

// TestDecideVouchedGroup: a surface that vouches for the decider's group
// (the console's OIDC sign-in) makes a person the configuration does not
// list eligible for approvals that name the group — and only those; an
// agent stays refused whatever it is vouched for, and the audit entry
// says which group made the decider eligible.
func TestDecideVouchedGroup(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	env.Eligible = []string{"slack:U1", "slack:U2", "console:req"}

	t.Run("NotListedNoGroupRefused", func(t *testing.T) {
		out := Decide(pending(1), req("console:carol@example.com", ActionApprove), env)
		if !errors.Is(out.Err, ErrNotApprover) || out.Approval != nil {
			t.Fatalf("got %v, want ErrNotApprover", out.Err)
		}
	})
	t.Run("OtherGroupRefused", func(t *testing.T) {
		r := req("console:carol@example.com", ActionApprove)
		r.Groups = []string{"devs", "leads"}
		if out := Decide(pending(1), r, env); !errors.Is(out.Err, ErrNotApprover) {
			t.Fatalf("got %v, want ErrNotApprover", out.Err)
		}
	})
	t.Run("VouchedGroupApproves", func(t *testing.T) {
		r := req("console:carol@example.com", ActionApprove)
		r.Groups = []string{"devs", "sre"}
		out := Decide(pending(1), r, env)
		if out.Err != nil || out.Approval == nil || out.Approval.Status != StatusApproved {
			t.Fatalf("got %v %+v, want approved", out.Err, out.Approval)
		}
		var d map[string]any
		if err := json.Unmarshal(out.Audit[0].Detail, &d); err != nil || d["via_group"] != "sre" {
			t.Fatalf("audit detail %s: want via_group sre", out.Audit[0].Detail)
		}
		// The decision keeps the group, so dispatch can judge it again.
		if got := out.Approval.Decisions[0].Via; got != "sre" {
			t.Fatalf("decision via %q, want sre", got)
		}
	})
	t.Run("ListedApproverHasNoViaGroup", func(t *testing.T) {
		r := req("slack:U1", ActionApprove)
		r.Groups = []string{"sre"}
		out := Decide(pending(1), r, env)
		if out.Err != nil {
			t.Fatal(out.Err)
		}
		var d map[string]any
		_ = json.Unmarshal(out.Audit[0].Detail, &d)
		if _, ok := d["via_group"]; ok || out.Approval.Decisions[0].Via != "" {
			t.Fatalf("audit detail %s (decision via %q) names a group for a listed approver", out.Audit[0].Detail, out.Approval.Decisions[0].Via)
		}
	})
	t.Run("EditNeedsGroupOfTheNewRule", func(t *testing.T) {
		r := req("console:carol@example.com", ActionEdit)
		r.Groups = []string{"sre"}
		r.Args = map[string]any{"service": "api", "version": "1.2.4", "env": "prod-eu"}
		out := Decide(pending(1), r, env)
		if out.Err != nil || out.Approval == nil {
			t.Fatalf("edit by vouched sre member: %v", out.Err)
		}
	})
	t.Run("AgentNeverDecides", func(t *testing.T) {
		r := req("agent:claude", ActionApprove)
		r.Groups = []string{"sre"}
		if out := Decide(pending(1), r, env); !errors.Is(out.Err, ErrHumanRequired) {
			t.Fatalf("got %v, want ErrHumanRequired", out.Err)
		}
	})
	t.Run("RequesterStillSelf", func(t *testing.T) {
		a := pending(1)
		a.Requester = "console:carol@example.com"
		r := req("console:carol@example.com", ActionApprove)
		r.Groups = []string{"sre"}
		if out := Decide(a, r, env); !errors.Is(out.Err, ErrSelfApproval) {
			t.Fatalf("got %v, want ErrSelfApproval", out.Err)
		}
	})
}
