package approvals

import (
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// Each TestAttack_ case is an attack that worked against the trust model
// before people, live eligibility, bound grants and a keyed audit chain.

// alice is one human with a console and a Slack identity.
func aliceDirectory() *Directory {
	return NewDirectory(
		map[string][]string{"alice": {"console:u1", "slack:U1"}, "bob": {"slack:U2"}},
		map[string][]string{"sre": {"person:alice", "person:bob", "slack:U3"}},
	)
}

func peopleApproval(quorum int, risk Risk) *Approval {
	a := pending(quorum)
	a.Requester, a.Risk = "console:u1", risk
	a.Eligible = aliceDirectory().Expand([]string{"group:sre"})
	return a
}

func peopleEnv(t *testing.T) Env {
	env := testEnv(t)
	env.People = aliceDirectory()
	return env
}

func TestAttack_SelfApprovalAcrossIdentities(t *testing.T) {
	t.Parallel()
	// alice asks from the console and approves her own high-impact call
	// from Slack.
	out := Decide(peopleApproval(1, RiskHighImpact), req("slack:U1", ActionApprove), peopleEnv(t))
	if !errors.Is(out.Err, ErrSelfApproval) || out.Approval != nil {
		t.Fatalf("self-approval through a second identity: err = %v, approval %+v", out.Err, out.Approval)
	}
}

func TestAttack_OneHumanMeetsQuorumOfTwo(t *testing.T) {
	t.Parallel()
	a := peopleApproval(2, RiskHighImpact)
	a.Requester = "slack:U3"
	env := peopleEnv(t)
	first := Decide(a, req("console:u1", ActionApprove), env)
	if first.Err != nil || first.Final {
		t.Fatalf("first approval: %+v", first)
	}
	second := Decide(first.Approval, req("slack:U1", ActionApprove), env)
	if !errors.Is(second.Err, ErrDuplicateApproval) || second.Final {
		t.Fatalf("the same person through another identity met quorum 2: %+v", second)
	}
	if n := first.Approval.CountedApprovals(); n != 1 {
		t.Fatalf("counted approvals = %d, want 1 person", n)
	}
	third := Decide(first.Approval, req("slack:U2", ActionApprove), env)
	if third.Err != nil || !third.Final || third.Approval.Status != StatusApproved {
		t.Fatalf("a second person: %+v", third)
	}
}

func TestAttack_SelfApprovalBelowHighImpact(t *testing.T) {
	t.Parallel()
	for _, risk := range []Risk{RiskRead, RiskReversible, RiskExternal} {
		out := Decide(peopleApproval(1, risk), req("console:u1", ActionApprove), peopleEnv(t))
		if !errors.Is(out.Err, ErrSelfApproval) {
			t.Errorf("risk %s: requester approved their own call: %v", risk, out.Err)
		}
		// Rejecting one's own call stays possible.
		if out := Decide(peopleApproval(1, risk), req("console:u1", ActionReject), peopleEnv(t)); out.Err != nil {
			t.Errorf("risk %s: own reject refused: %v", risk, out.Err)
		}
	}
}

// An agent, or a schedule (a requester, never an approver), never decides:
// even listed among the eligible (a hand-edited row, a config that slipped
// through), its decisions are refused, and it never expands.
func TestAttack_AgentDecides(t *testing.T) {
	t.Parallel()
	for _, machine := range []string{"agent:claude", "schedule:nightly"} {
		a := pending(1)
		a.Risk = RiskExternal
		a.Eligible = append(a.Eligible, machine)
		for _, action := range []Action{ActionApprove, ActionReject, ActionEdit} {
			r := req(machine, action)
			r.Args = map[string]any{"service": "api", "version": "9"}
			out := Decide(a, r, testEnv(t))
			if !errors.Is(out.Err, ErrHumanRequired) || out.Approval != nil {
				t.Errorf("%s %s: err = %v", machine, action, out.Err)
			}
		}
	}
	// Machines never expand into eligible identities either.
	d := NewDirectory(map[string][]string{"bot": {"schedule:x"}}, map[string][]string{"g": {"agent:x", "schedule:x", "slack:U1"}})
	if got := d.Expand([]string{"group:g", "agent:y", "schedule:y", "person:bot"}); len(got) != 1 || got[0] != "slack:U1" {
		t.Fatalf("Expand = %v", got)
	}
	for id, want := range map[string]bool{"schedule:x": true, "agent:y": true, "slack:U1": false, "console:schedule": false} {
		if NeverDecides(id) != want {
			t.Errorf("NeverDecides(%q) = %v", id, !want)
		}
	}
}

func TestAttack_RemovedApproverDecidesPending(t *testing.T) {
	t.Parallel()
	// slack:U2 was in the group when the card was sent, and was removed
	// from it before deciding.
	env := testEnv(t)
	env.Eligible = Expand([]string{"group:sre"}, map[string][]string{"sre": {"slack:U1", "console:req"}})
	out := Decide(pending(1), req("slack:U2", ActionApprove), env)
	if !errors.Is(out.Err, ErrNotApprover) {
		t.Fatalf("removed approver decided: %v", out.Err)
	}
	// Someone added since the card was sent was not promised it.
	env.Eligible = append(env.Eligible, "slack:U9")
	if out := Decide(pending(1), req("slack:U9", ActionApprove), env); !errors.Is(out.Err, ErrNotApprover) {
		t.Fatalf("approver added after the card decided: %v", out.Err)
	}
	if out := Decide(pending(1), req("slack:U1", ActionApprove), env); out.Err != nil {
		t.Fatalf("an approver still in the group: %v", out.Err)
	}
}

func TestAttack_SessionGrantUnderQuorumTwo(t *testing.T) {
	t.Parallel()
	a := pending(2)
	a.Risk = RiskExternal
	r := req("slack:U1", ActionApprove)
	r.Scope = ScopeSession
	if out := Decide(a, r, testEnv(t)); !errors.Is(out.Err, ErrInvalidDecision) || out.Grant != nil {
		t.Fatalf("session grant under quorum 2: %+v", out)
	}
	hi := pending(1)
	if out := Decide(hi, r, testEnv(t)); !errors.Is(out.Err, ErrInvalidDecision) || out.Grant != nil {
		t.Fatalf("session grant on high_impact: %+v", out)
	}
}

func TestAttack_SessionGrantIsBlanket(t *testing.T) {
	t.Parallel()
	exp := t0.Add(time.Hour)
	g := &Grant{ID: "g1", Scope: ScopeSession, Tool: "deploy", Thread: "console:t1", Requester: "console:req",
		RuleKey: "rA", Actor: "slack:U1", At: t0, ExpiresAt: &exp}
	ask := Verdict{Effect: EffectAsk, Quorum: 1, RuleKey: "rA"}
	base := Call{Tool: "deploy", Risk: RiskExternal, Thread: "console:t1", Requester: "console:req", Verdict: ask,
		Args: map[string]any{"env": "staging"}, Eligible: []string{"slack:U1", "slack:U2"}}
	if !g.Covers(base, t0.Add(time.Minute), false) {
		t.Fatal("the grant does not cover the call it was made for")
	}
	cases := map[string]func(c *Call) time.Time{
		"OtherRequester": func(c *Call) time.Time { c.Requester = "console:mallory"; return t0 },
		"OtherRule":      func(c *Call) time.Time { c.Verdict.RuleKey = "rProd"; return t0 },
		"QuorumTwo":      func(c *Call) time.Time { c.Verdict.Quorum = 2; return t0 },
		"HighImpact":     func(c *Call) time.Time { c.Risk = RiskHighImpact; return t0 },
		"OtherThread":    func(c *Call) time.Time { c.Thread = "console:t2"; return t0 },
		"OtherTool":      func(c *Call) time.Time { c.Tool = "restart"; return t0 },
		"Expired":        func(c *Call) time.Time { return t0.Add(2 * time.Hour) },
		"Denied":         func(c *Call) time.Time { c.Verdict.Effect = EffectDeny; return t0 },
		// The granter was removed from the rule's approvers by a reload.
		"GranterNoLongerEligible": func(c *Call) time.Time { c.Eligible = []string{"slack:U2"}; return t0 },
	}
	for name, mod := range cases {
		c := base
		at := mod(&c)
		if g.Covers(c, at, false) {
			t.Errorf("%s: a session grant covered it", name)
		}
	}
	for _, machine := range []string{"agent:claude", "schedule:nightly"} {
		byMachine := *g
		byMachine.Actor = machine
		if c := base; byMachine.Covers(func() Call { c.Eligible = append(c.Eligible, machine); return c }(), t0, false) {
			t.Errorf("a grant made by %s covered a call", machine)
		}
	}
	unbound := *g
	unbound.RuleKey = ""
	if c := base; unbound.Covers(func() Call { c.Verdict.RuleKey = ""; return c }(), t0, false) {
		t.Error("a grant bound to no rule covered a call")
	}
}

func TestForeverGrant(t *testing.T) {
	t.Parallel()
	a := pending(1)
	a.Risk = RiskExternal
	r := req("slack:U1", ActionApprove)
	r.Scope = ScopeForever
	out := Decide(a, r, testEnv(t))
	if out.Err != nil || out.Grant == nil || out.Grant.Scope != ScopeForever || out.Grant.ExpiresAt != nil ||
		!SameArgs(out.Grant.Args, a.ProposedArgs) {
		t.Fatalf("forever grant = %+v, %v", out.Grant, out.Err)
	}
	g := out.Grant
	rule := Rule{Tool: "deploy", Effect: EffectAsk, Approvers: []string{"group:sre"}}.Key() // testEnv's first rule
	if g.RuleKey != rule {
		t.Fatalf("forever grant bound to rule %q, want the asking rule's %q", g.RuleKey, rule)
	}
	call := Call{Tool: "deploy", Risk: RiskExternal, Thread: "console:other", Requester: "slack:U9",
		Verdict: Verdict{Effect: EffectAsk, Quorum: 1, RuleKey: rule}, Args: map[string]any{"service": "api", "version": "1.2.3", "env": "staging"},
		Eligible: []string{"slack:U1", "slack:U2"}}
	if !g.Covers(call, t0.Add(24*time.Hour), false) {
		t.Fatal("a forever grant does not cover its exact arguments")
	}
	// Issue 26, item 2: a forever grant is bound to its rule and to its
	// granter's live eligibility under it.
	other := call
	other.Verdict.RuleKey = "rLeads"
	if g.Covers(other, t0, false) {
		t.Fatal("a forever grant covered a call another rule asks for")
	}
	other = call
	other.Eligible = []string{"slack:U2"}
	if g.Covers(other, t0, false) {
		t.Fatal("a forever grant outlived its granter's eligibility")
	}
	call.Args = map[string]any{"service": "api", "version": "1.2.4", "env": "staging"}
	if g.Covers(call, t0, false) {
		t.Fatal("a forever grant covered other arguments")
	}
	revoked := *g
	revoked.RevokedAt = &t0
	call.Args = a.ProposedArgs
	if revoked.Covers(call, t0.Add(time.Minute), false) {
		t.Fatal("a revoked grant still covers")
	}

	// A pattern must name every argument and match the call.
	r.Pattern = map[string]string{"service": "api", "version": "1.2.*"}
	if out := Decide(a, r, testEnv(t)); !errors.Is(out.Err, ErrInvalidDecision) {
		t.Fatalf("a pattern leaving env open was accepted: %v", out.Err)
	}
	r.Pattern = map[string]string{"service": "api", "version": "2.*", "env": "staging"}
	if out := Decide(a, r, testEnv(t)); !errors.Is(out.Err, ErrInvalidDecision) {
		t.Fatalf("a pattern that does not match the call was accepted: %v", out.Err)
	}
	r.Pattern = map[string]string{"service": "api", "version": "1.2.*", "env": "staging"}
	out = Decide(a, r, testEnv(t))
	if out.Err != nil || out.Grant.Pattern["version"] != "1.2.*" || out.Grant.Args != nil {
		t.Fatalf("pattern grant = %+v, %v", out.Grant, out.Err)
	}
	call.Args = map[string]any{"service": "api", "version": "1.2.9", "env": "staging"}
	if !out.Grant.Covers(call, t0, false) {
		t.Fatal("the pattern does not cover a matching call")
	}

	// high_impact only with the policy's consent, when made and when used.
	hi := pending(1)
	r.Pattern = nil
	if out := Decide(hi, r, testEnv(t)); !errors.Is(out.Err, ErrInvalidDecision) {
		t.Fatalf("forever grant on high_impact without forever_high_impact: %v", out.Err)
	}
	env := testEnv(t)
	env.ForeverHighImpact = true
	out = Decide(hi, r, env)
	if out.Err != nil || out.Grant == nil {
		t.Fatalf("forever grant with forever_high_impact: %v", out.Err)
	}
	call.Risk, call.Args = RiskHighImpact, hi.ProposedArgs
	if out.Grant.Covers(call, t0, false) || !out.Grant.Covers(call, t0, true) {
		t.Fatal("forever_high_impact is not re-checked when the grant is used")
	}
}

func TestAttack_DestructiveRunsUnderDefaultAllow(t *testing.T) {
	t.Parallel()
	p := &Policy{Default: DefaultAllow}
	if v := p.Evaluate(ToolInfo{Name: "wipe", Risk: RiskReversible, Destructive: true}, nil, Subject{}); v.Effect != EffectAsk {
		t.Fatalf("destructive tool under default allow: %s", v.Effect)
	}
	if v := p.Evaluate(ToolInfo{Name: "status", Risk: RiskRead}, nil, Subject{}); v.Effect != EffectAllow {
		t.Fatalf("read tool under default allow: %s", v.Effect)
	}
	p.Rules = []Rule{{Tool: "wipe", Effect: EffectAllow}}
	if v := p.Evaluate(ToolInfo{Name: "wipe", Destructive: true}, nil, Subject{}); v.Effect != EffectAllow {
		t.Fatalf("an explicit allow rule: %s", v.Effect)
	}
}

func TestAttack_ResealedAuditChainVerifies(t *testing.T) {
	t.Parallel()
	key := AuditKey("0123456789abcdef0123456789abcdef")
	var c []AuditEntry
	prev := ""
	for i := range 5 {
		e := AuditEntry{At: t0.Add(time.Duration(i) * time.Second), Kind: "approval.decided", Actor: "slack:U1",
			Detail: json.RawMessage(`{"status":"approved"}`)}
		e.SealKeyed(int64(i+1), prev, key)
		prev = e.Hash
		c = append(c, e)
	}
	if bad := VerifyChainKeyed("", c, key); bad != 0 {
		t.Fatalf("intact keyed chain bad at %d", bad)
	}
	// Rewrite entry 3 and re-seal it and everything after with the public
	// algorithm, as someone with write access to the database can.
	forged := append([]AuditEntry(nil), c...)
	forged[2].Detail = json.RawMessage(`{"status":"rejected"}`)
	prev = forged[1].Hash
	for i := 2; i < len(forged); i++ {
		forged[i].Seal(forged[i].Seq, prev)
		prev = forged[i].Hash
	}
	if bad := VerifyChainKeyed("", forged, key); bad != 3 {
		t.Fatalf("re-sealed chain: bad = %d, want 3", bad)
	}
	// Or under a key of their own.
	prev = forged[1].Hash
	for i := 2; i < len(forged); i++ {
		forged[i].SealKeyed(forged[i].Seq, prev, AuditKey("another key another key another k"))
		prev = forged[i].Hash
	}
	if bad := VerifyChainKeyed("", forged, key); bad != 3 {
		t.Fatalf("chain re-sealed under another key: bad = %d, want 3", bad)
	}
}

func TestAuditLegacyPrefixThenKeyed(t *testing.T) {
	t.Parallel()
	key := AuditKey("0123456789abcdef0123456789abcdef")
	legacy := chain(3)
	e := AuditEntry{At: t0, Kind: "audit.keyed", Actor: "system"}
	e.SealKeyed(4, legacy[2].Hash, key)
	all := append(legacy, e)
	if bad := VerifyChainKeyed("", all, key); bad != 0 {
		t.Fatalf("legacy prefix then keyed: bad = %d", bad)
	}
	// Altering a legacy entry and re-sealing the legacy prefix breaks the
	// first keyed link.
	all[1].Actor = "slack:U9"
	all[1].Seal(2, all[0].Hash)
	all[2].Seal(3, all[1].Hash)
	if bad := VerifyChainKeyed("", all, key); bad != 4 {
		t.Fatalf("altered legacy prefix: bad = %d, want 4", bad)
	}
}
