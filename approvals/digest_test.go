package approvals

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

func TestDigestIsCanonical(t *testing.T) {
	t.Parallel()
	base := Digest("deploy", map[string]any{"service": "api", "replicas": 2, "env": "prod"}, "rA", "p1")
	if !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(base) {
		t.Fatalf("digest %q is not sha256:<hex>", base)
	}
	// The same call written differently: key order, 2 as a float or a
	// json.Number, arguments that went through JSON.
	var decoded map[string]any
	if err := json.Unmarshal([]byte(`{"env":"prod","replicas":2.0,"service":"api"}`), &decoded); err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string]map[string]any{
		"Float":   {"env": "prod", "service": "api", "replicas": 2.0},
		"Number":  {"replicas": json.Number("2"), "service": "api", "env": "prod"},
		"Decoded": decoded,
	} {
		if got := Digest("deploy", args, "rA", "p1"); got != base {
			t.Errorf("%s: digest %s, want %s", name, got, base)
		}
	}
	// Anything else the approver saw makes another digest.
	for name, got := range map[string]string{
		"Tool":   Digest("restart", map[string]any{"service": "api", "replicas": 2, "env": "prod"}, "rA", "p1"),
		"Args":   Digest("deploy", map[string]any{"service": "api", "replicas": 3, "env": "prod"}, "rA", "p1"),
		"Rule":   Digest("deploy", map[string]any{"service": "api", "replicas": 2, "env": "prod"}, "rB", "p1"),
		"Policy": Digest("deploy", map[string]any{"service": "api", "replicas": 2, "env": "prod"}, "rA", "p2"),
	} {
		if got == base {
			t.Errorf("%s changed but the digest did not", name)
		}
	}
	if Digest("status", nil, "r", "p") != Digest("status", map[string]any{}, "r", "p") {
		t.Error("no arguments and {} are different digests")
	}
}

func TestPolicyVersion(t *testing.T) {
	t.Parallel()
	p := &Policy{Rules: []Rule{{Tool: "deploy", Effect: EffectAsk, Approvers: []string{"group:sre"}}}, Default: DefaultAuto}
	same := &Policy{Rules: []Rule{{Tool: "deploy", Effect: EffectAsk, Approvers: []string{"group:sre"}}}, Default: DefaultAuto}
	if p.Version() != same.Version() || !strings.HasPrefix(p.Version(), "p") || len(p.Version()) != 17 {
		t.Fatalf("versions %q and %q", p.Version(), same.Version())
	}
	for name, mod := range map[string]func(*Policy){
		"RuleAdded":         func(q *Policy) { q.Rules = append(q.Rules, Rule{Tool: "x", Effect: EffectDeny}) },
		"ApproversChanged":  func(q *Policy) { q.Rules[0].Approvers = []string{"group:leads"} },
		"Default":           func(q *Policy) { q.Default = DefaultAsk },
		"ForeverHighImpact": func(q *Policy) { q.ForeverHighImpact = true },
	} {
		q := &Policy{Rules: []Rule{{Tool: "deploy", Effect: EffectAsk, Approvers: []string{"group:sre"}}}, Default: DefaultAuto}
		mod(q)
		if q.Version() == p.Version() {
			t.Errorf("%s: the version did not change", name)
		}
	}
	var none *Policy
	if none.Version() != (&Policy{}).Version() {
		t.Error("a nil policy and an empty one have different versions")
	}
}

// digested is a pending approval with its digest, as the gate asks.
func digested(quorum int) *Approval {
	a := pending(quorum)
	a.RuleKey, a.PolicyVersion = "rA", "p1"
	a.Digest = Digest(a.Tool, a.ProposedArgs, a.RuleKey, a.PolicyVersion)
	return a
}

func TestDecisionsRecordTheDigest(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	env.PolicyVersion = "p2"
	a := digested(2)
	out := Decide(a, req("slack:U1", ActionApprove), env)
	if out.Err != nil || out.Approval.Decisions[0].Digest != a.Digest {
		t.Fatalf("approve: %v, decisions %+v", out.Err, out.Approval.Decisions)
	}
	// An edit is a new call: a new digest under the live rule and policy,
	// recorded on the approval and on the edit.
	e := req("slack:U2", ActionEdit)
	e.Args = map[string]any{"service": "api", "version": "1.2.4"}
	out = Decide(out.Approval, e, env)
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	ed := out.Approval
	want := Digest("deploy", map[string]any{"service": "api", "version": "1.2.4", "env": "staging"}, ed.RuleKey, "p2")
	if ed.Digest != want || ed.Digest == a.Digest || ed.PolicyVersion != "p2" || ed.RuleKey == "rA" {
		t.Fatalf("edited approval digest %s rule %s policy %s, want %s", ed.Digest, ed.RuleKey, ed.PolicyVersion, want)
	}
	if d := ed.Decisions[1]; d.Digest != ed.Digest || !ed.Decisions[0].Superseded {
		t.Fatalf("decisions %+v", ed.Decisions)
	}
	// The edited call (staging) needs one approval: the edit is it.
	final := ed
	if final.Status != StatusEdited {
		t.Fatalf("edited approval is %s", final.Status)
	}
	if why := final.DigestProblem(final.Args()); why != "" {
		t.Fatalf("the decided call does not match its digest: %s", why)
	}
}

func TestAttack_DigestMismatchFound(t *testing.T) {
	t.Parallel()
	out := Decide(digested(1), req("slack:U1", ActionApprove), testEnv(t))
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	a := out.Approval
	tampered := map[string]any{"service": "api", "version": "6.6.6", "env": "staging"}
	if why := a.DigestProblem(tampered); !strings.Contains(why, "hash to") {
		t.Fatalf("tampered arguments passed: %q", why)
	}
	// Arguments and digest rewritten together: the decision still names
	// what its approver saw.
	b := a.Clone()
	b.ApprovedArgs, b.Digest = tampered, Digest(b.Tool, tampered, b.RuleKey, b.PolicyVersion)
	if why := b.DigestProblem(b.Args()); !strings.Contains(why, "slack:U1 decided on") {
		t.Fatalf("rewritten digest passed: %q", why)
	}
	// The digest blanked: the decision's still counts.
	c := a.Clone()
	c.Digest = ""
	if why := c.DigestProblem(c.Args()); why == "" {
		t.Fatal("a blanked digest passed")
	}
	// An approval from before digests has nothing to compare.
	legacy := pending(1)
	legacy.Decisions = []Decision{{Actor: "slack:U1", Action: ActionApprove}}
	if why := legacy.DigestProblem(legacy.ProposedArgs); why != "" {
		t.Fatalf("legacy approval refused: %s", why)
	}
}
