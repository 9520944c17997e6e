package approvals

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)

func pending(quorum int) *Approval {
	return &Approval{
		ID: "ap1", RunID: "run1", Thread: "console:t1", Requester: "console:req", Tool: "deploy",
		Risk: RiskHighImpact, Destructive: true,
		ProposedArgs: map[string]any{"service": "api", "version": "1.2.3", "env": "staging"},
		Status:       StatusPending, Approvers: []string{"group:sre"},
		Eligible: []string{"slack:U1", "slack:U2", "console:req"}, Quorum: quorum,
		CreatedAt: t0, ExpiresAt: t0.Add(time.Hour),
	}
}

func testEnv(t *testing.T) Env {
	t.Helper()
	schema, err := CompileSchema("deploy", map[string]any{
		"type": "object", "required": []any{"service", "version"},
		"properties": map[string]any{
			"service": map[string]any{"type": "string", "pattern": "^[a-z0-9-]+$"},
			"version": map[string]any{"type": "string"},
			"env":     map[string]any{"type": "string", "default": "staging"},
		},
		"additionalProperties": false,
	})
	if err != nil {
		t.Fatal(err)
	}
	pol := &Policy{Rules: []Rule{
		{Tool: "deploy", Effect: EffectAsk, Approvers: []string{"group:sre"}},
		{Tool: "deploy", Args: map[string]string{"env": "prod*"}, Effect: EffectAsk, Approvers: []string{"group:sre"}, Quorum: 2},
		{Tool: "deploy", Args: map[string]string{"service": "billing"}, Effect: EffectDeny},
	}}
	groups := map[string][]string{"sre": {"slack:U1", "slack:U2", "console:req"}}
	return Env{
		Validate: schema.Apply,
		Recheck: func(args map[string]any) (Verdict, []string) {
			v := pol.Evaluate(ToolInfo{Name: "deploy", Risk: RiskHighImpact, Destructive: true}, args, Subject{})
			return v, Expand(v.Approvers, groups)
		},
	}
}

func req(actor string, action Action) Request {
	return Request{Actor: actor, Channel: "slack", Action: action, At: t0.Add(time.Minute)}
}

func TestDecideApprove(t *testing.T) {
	t.Parallel()
	a := pending(1)
	out := Decide(a, req("slack:U1", ActionApprove), testEnv(t))
	if out.Err != nil || !out.Final {
		t.Fatalf("approve: err=%v final=%v", out.Err, out.Final)
	}
	if out.Approval.Status != StatusApproved || out.Approval.ApprovedArgs["version"] != "1.2.3" {
		t.Fatalf("approval = %+v", out.Approval)
	}
	if a.Status != StatusPending || len(a.Decisions) != 0 {
		t.Fatalf("Decide mutated its input: %+v", a)
	}
	if len(out.Audit) != 1 || out.Audit[0].Kind != "approval.decided" {
		t.Fatalf("audit = %+v", out.Audit)
	}
}

func TestDecideRefusals(t *testing.T) {
	t.Parallel()
	decided := pending(1)
	decided.Status = StatusApproved
	decided.Decisions = []Decision{{Actor: "slack:U2", Action: ActionApprove, At: t0}}
	at := t0
	decided.DecidedAt = &at

	cases := []struct {
		name string
		a    *Approval
		r    Request
		want error
	}{
		{"NotApprover", pending(1), req("slack:U9", ActionApprove), ErrNotApprover},
		{"SelfApprovalHighImpact", pending(1), req("console:req", ActionApprove), ErrSelfApproval},
		{"AlreadyDecided", decided, req("slack:U1", ActionApprove), ErrAlreadyDecided},
		{"UnknownAction", pending(1), req("slack:U1", "launch"), ErrInvalidDecision},
		{"Unverified", pending(1), Request{Actor: "email:u1@example.com", Action: ActionApprove, Unverified: "no reply token", At: t0}, ErrUnverified},
		{"EditInvalidArgs", pending(1), Request{Actor: "slack:U1", Action: ActionEdit, Args: map[string]any{"service": "API!"}, At: t0}, nil},
		{"EditIntoDeny", pending(1), Request{Actor: "slack:U1", Action: ActionEdit, Args: map[string]any{"service": "billing", "version": "2"}, At: t0}, ErrDeniedByPolicy},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := Decide(c.a, c.r, testEnv(t))
			if out.Err == nil {
				t.Fatal("want a refusal")
			}
			if c.want != nil && !errors.Is(out.Err, c.want) {
				t.Fatalf("err = %v, want %v", out.Err, c.want)
			}
			if out.Approval != nil || out.Final {
				t.Fatalf("a refusal must change nothing: %+v", out)
			}
			if len(out.Audit) != 1 || out.Audit[0].Kind != "approval.refused" {
				t.Fatalf("a refusal must be audited: %+v", out.Audit)
			}
		})
	}
}

func TestDecideAlreadyDecidedNamesWinner(t *testing.T) {
	t.Parallel()
	first := Decide(pending(1), req("slack:U2", ActionApprove), testEnv(t))
	out := Decide(first.Approval, req("slack:U1", ActionReject), testEnv(t))
	var re *RefusedError
	if !errors.As(out.Err, &re) || len(re.By) != 1 || re.By[0] != "slack:U2" {
		t.Fatalf("err = %#v, want winner slack:U2", out.Err)
	}
}

func TestDecideInvalidEditNamesField(t *testing.T) {
	t.Parallel()
	out := Decide(pending(1), Request{Actor: "slack:U1", Action: ActionEdit, Args: map[string]any{"service": "API!", "version": "1"}, At: t0}, testEnv(t))
	var re *RefusedError
	if !errors.As(out.Err, &re) || re.Field != "service" {
		t.Fatalf("err = %#v, want field service", out.Err)
	}
	var ve *ValidationError
	if !errors.As(out.Err, &ve) {
		t.Fatalf("err %v must unwrap to *ValidationError", out.Err)
	}
}

func TestDecideSelfApprovalAllowedWhenConfigured(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	env.AllowSelfApproval = true
	if out := Decide(pending(1), req("console:req", ActionApprove), env); out.Err != nil || !out.Final {
		t.Fatalf("self-approval with allow_self_approval: %v", out.Err)
	}
	// A rule may allow it for itself alone.
	rule := testEnv(t)
	rule.Recheck = func(map[string]any) (Verdict, []string) {
		return Verdict{Effect: EffectAsk, Quorum: 1, AllowSelfApproval: true}, nil
	}
	if out := Decide(pending(1), req("console:req", ActionApprove), rule); out.Err != nil || !out.Final {
		t.Fatalf("self-approval under a rule with allow_self_approval: %v", out.Err)
	}
}

func TestDecideReject(t *testing.T) {
	t.Parallel()
	r := req("slack:U1", ActionReject)
	r.Reason = "not during the freeze"
	out := Decide(pending(2), r, testEnv(t))
	if out.Err != nil || !out.Final || out.Approval.Status != StatusRejected {
		t.Fatalf("reject: %+v", out)
	}
	if out.Approval.Decisions[0].Reason != "not during the freeze" || out.Grant != nil {
		t.Fatalf("reject must record feedback and grant nothing: %+v", out)
	}
}

func TestDecideQuorum(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	first := Decide(pending(2), req("slack:U1", ActionApprove), env)
	if first.Err != nil || first.Final || first.Approval.Status != StatusPending {
		t.Fatalf("first of two: %+v", first)
	}
	again := Decide(first.Approval, req("slack:U1", ActionApprove), env)
	if !errors.Is(again.Err, ErrDuplicateApproval) {
		t.Fatalf("same approver twice: err = %v", again.Err)
	}
	second := Decide(first.Approval, req("slack:U2", ActionApprove), env)
	if second.Err != nil || !second.Final || second.Approval.Status != StatusApproved {
		t.Fatalf("second approver: %+v", second)
	}
	if w := second.Approval.Winners(); len(w) != 2 {
		t.Fatalf("winners = %v", w)
	}
}

func TestDecideEdit(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	t.Run("AppliesDefaultsAndFinishes", func(t *testing.T) {
		out := Decide(pending(1), Request{Actor: "slack:U1", Action: ActionEdit, Args: map[string]any{"service": "api", "version": "1.2.4"}, At: t0}, env)
		if out.Err != nil || !out.Final || out.Approval.Status != StatusEdited {
			t.Fatalf("edit: %+v", out)
		}
		got := out.Approval.ApprovedArgs
		if got["version"] != "1.2.4" || got["env"] != "staging" {
			t.Fatalf("approved args = %v", got)
		}
		if out.Approval.ProposedArgs["version"] != "1.2.3" {
			t.Fatalf("proposed args must be kept apart: %v", out.Approval.ProposedArgs)
		}
	})
	t.Run("VoidsEarlierApprovalsAndRaisesQuorum", func(t *testing.T) {
		first := Decide(pending(2), req("slack:U1", ActionApprove), env)
		edit := Decide(first.Approval, Request{Actor: "slack:U2", Action: ActionEdit, Args: map[string]any{"service": "api", "version": "1", "env": "prod-eu"}, At: t0}, env)
		if edit.Err != nil || edit.Final {
			t.Fatalf("edit into a quorum-2 rule must wait for a second approval: %+v", edit)
		}
		if edit.Approval.CountedApprovals() != 1 || edit.Approval.Quorum != 2 {
			t.Fatalf("counted = %d quorum = %d", edit.Approval.CountedApprovals(), edit.Approval.Quorum)
		}
		done := Decide(edit.Approval, req("slack:U1", ActionApprove), env)
		if done.Err != nil || !done.Final || done.Approval.Status != StatusEdited {
			t.Fatalf("approval of the edited args: %+v", done)
		}
	})
}

func TestDecideSessionGrant(t *testing.T) {
	t.Parallel()
	r := req("slack:U1", ActionApprove)
	r.Scope = ScopeSession
	a := pending(1)
	a.Risk = RiskExternal
	out := Decide(a, r, testEnv(t))
	if out.Err != nil || out.Grant == nil || out.Grant.Thread != "console:t1" || out.Grant.Tool != "deploy" ||
		out.Grant.Requester != "console:req" || out.Grant.RuleKey == "" || out.Grant.ExpiresAt == nil ||
		!out.Grant.ExpiresAt.Equal(r.At.Add(DefaultSessionTTL)) {
		t.Fatalf("grant = %+v, err %v", out.Grant, out.Err)
	}
	if len(out.Audit) != 2 || out.Audit[1].Kind != "grant.created" {
		t.Fatalf("audit = %+v", out.Audit)
	}
}

func TestDecideAfterExpiryIsExpiredNotDecided(t *testing.T) {
	t.Parallel()
	expired := Expire(pending(1), t0.Add(2*time.Hour)).Approval
	out := Decide(expired, req("slack:U1", ActionApprove), testEnv(t))
	if !errors.Is(out.Err, ErrExpired) || errors.Is(out.Err, ErrAlreadyDecided) {
		t.Fatalf("err = %v, want ErrExpired (410), not already decided", out.Err)
	}
	if out.Approval != nil || len(out.Audit) != 1 || out.Audit[0].Kind != "approval.refused" {
		t.Fatalf("a late decision changes nothing but the audit: %+v", out)
	}
}

func TestDecideExpired(t *testing.T) {
	t.Parallel()
	r := req("slack:U1", ActionApprove)
	r.At = t0.Add(2 * time.Hour)
	out := Decide(pending(1), r, testEnv(t))
	if !errors.Is(out.Err, ErrExpired) {
		t.Fatalf("err = %v", out.Err)
	}
	if !out.Final || out.Approval.Status != StatusExpired {
		t.Fatalf("a late decision finalizes the expiry: %+v", out)
	}
}

func TestSchemaApply(t *testing.T) {
	t.Parallel()
	s, err := CompileSchema("t", map[string]any{
		"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer", "default": 3}},
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Apply(map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := got["n"]; !ok || n == nil {
		t.Fatalf("default not applied: %v", got)
	}
	if got, err := s.Apply(map[string]any{"n": "7"}); err != nil || fmt.Sprint(got["n"]) != "7" {
		t.Fatalf("a numeric string from a chat surface must be read as a number: %v, %v", got, err)
	}
	if _, err := s.Apply(map[string]any{"n": "three"}); err == nil {
		t.Fatal("a string for an integer must fail")
	}
	if _, err := CompileSchema("bad", map[string]any{"type": 12}); err == nil {
		t.Fatal("an invalid schema must not compile")
	}
}

func TestSchemaDocumentIsACopyOfTheConfiguredSchema(t *testing.T) {
	raw := map[string]any{"type": "object", "required": []any{"service"},
		"properties": map[string]any{"service": map[string]any{"type": "string", "pattern": "^[a-z]+$"}, "replicas": map[string]any{"type": "integer", "default": 2}}}
	s, err := CompileSchema("deploy", raw)
	if err != nil {
		t.Fatal(err)
	}
	doc := s.Document()
	props := doc["properties"].(map[string]any)
	if props["service"].(map[string]any)["pattern"] != "^[a-z]+$" || props["replicas"].(map[string]any)["default"] != float64(2) {
		t.Fatalf("document %v", doc)
	}
	props["service"] = "changed"
	if again := s.Document(); again["properties"].(map[string]any)["service"] == "changed" {
		t.Fatal("Document returned the schema's own map: a caller changed it")
	}
	if (*Schema)(nil).Document() != nil {
		t.Fatal("a nil schema has a document")
	}
}

// A released approval is an expiry that says why, and only Release makes
// one: a plain expiry is not taken for a release.
func TestReleaseIsAnExpiryWithItsReason(t *testing.T) {
	now := t0.Add(time.Minute)
	o := Release(pending(1), now, "the app's event stream closed")
	a := o.Approval
	if a.Status != StatusExpired || !o.Final || len(o.Audit) != 1 || o.Audit[0].Kind != AuditApprovalExpired || o.Audit[0].Actor != "system" {
		t.Fatalf("release outcome %+v", o)
	}
	if why, ok := a.Released(); !ok || why != "the app's event stream closed" {
		t.Fatalf("Released() = %q, %v", why, ok)
	}
	if !strings.Contains(string(o.Audit[0].Detail), "released") {
		t.Errorf("audit detail %s does not say it was released", o.Audit[0].Detail)
	}
	if _, ok := Expire(pending(1), now).Approval.Released(); ok {
		t.Error("a plain expiry reads as released")
	}
	if _, ok := pending(1).Released(); ok {
		t.Error("a pending approval reads as released")
	}
}
