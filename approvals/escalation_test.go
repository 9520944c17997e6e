package approvals

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// ladder is the CONTRACT's example: remind, add leads, deny.
var ladder = []Step{
	{After: 10 * time.Minute, Remind: true},
	{After: 30 * time.Minute, AddApprovers: []string{"group:leads"}},
	{After: 2 * time.Hour, Outcome: TerminalDeny},
}

func escalationDir() *Directory {
	return NewDirectory(map[string][]string{"alice": {"slack:U1", "console:alice"}},
		map[string][]string{"sre": {"slack:U1", "slack:U2", "console:req"}, "leads": {"slack:L1", "slack:U2", "agent:bot"}})
}

func climbing(t *testing.T, l []Step) *Approval {
	t.Helper()
	a := pending(1)
	a.Risk, a.Destructive = RiskExternal, false
	a.Climb(l, time.Hour)
	return a
}

func TestCheckLadder(t *testing.T) {
	t.Parallel()
	if i, err := CheckLadder(ladder); err != nil {
		t.Fatalf("the contract's ladder is refused at %d: %v", i, err)
	}
	bad := map[string]struct {
		l    []Step
		at   int
		want string
	}{
		"Nothing":        {[]Step{{After: time.Minute}}, 0, "needs remind"},
		"TwoThings":      {[]Step{{After: time.Minute, Remind: true, Outcome: TerminalDeny}}, 0, "one thing"},
		"NoAfter":        {[]Step{{Remind: true}}, 0, "positive"},
		"UnknownOutcome": {[]Step{{After: time.Minute, Outcome: "maybe"}}, 0, "want deny or approve"},
		"OutOfOrder":     {[]Step{{After: time.Hour, Remind: true}, {After: time.Minute, Remind: true}}, 1, "in order"},
		"OutcomeNotLast": {[]Step{{After: time.Minute, Outcome: TerminalDeny}, {After: time.Hour, Remind: true}}, 0, "last step"},
	}
	for name, c := range bad {
		i, err := CheckLadder(c.l)
		if err == nil || i != c.at || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: CheckLadder = %d, %v; want step %d: %q", name, i, err, c.at, c.want)
		}
	}
}

func TestClimbSetsEndAndFirstStep(t *testing.T) {
	t.Parallel()
	a := climbing(t, ladder)
	if !a.ExpiresAt.Equal(t0.Add(2*time.Hour)) || a.EscalationDue == nil || !a.EscalationDue.Equal(t0.Add(10*time.Minute)) {
		t.Fatalf("end %v, first step due %v: want the terminal step's 2h and the reminder's 10m", a.ExpiresAt, a.EscalationDue)
	}
	if n, _ := a.NextStep(); n.Kind != StepRemind || !strings.Contains(n.Sentence(), "reminded at 2026-11-29 14:10 UTC") {
		t.Fatalf("next = %+v %q", n, n.Sentence())
	}
	// No outcome: the ttl is the end, and a step after it never fires.
	b := climbing(t, []Step{{After: 20 * time.Minute, Remind: true}, {After: 90 * time.Minute, Remind: true}})
	if !b.ExpiresAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("end %v: want the ttl", b.ExpiresAt)
	}
	f, ok := Escalate(b, t0.Add(20*time.Minute), escalationDir())
	if !ok || f.Approval.EscalationDue != nil {
		t.Fatalf("after the first reminder the next is due %v; want none (the second falls after the end)", f.Approval.EscalationDue)
	}
	if n, _ := f.Approval.NextStep(); n.Kind != "expire" || !n.At.Equal(b.ExpiresAt) {
		t.Fatalf("next after the last step in time = %+v, want expiry", n)
	}
}

func TestEscalateFiresEachStepOnce(t *testing.T) {
	t.Parallel()
	dir := escalationDir()
	a := climbing(t, ladder)
	if _, ok := Escalate(a, t0.Add(9*time.Minute), dir); ok {
		t.Fatal("a step fired before it was due")
	}
	// slack:U2 already approved (quorum 2): only the others are reminded,
	// never the requester.
	a.Quorum = 2
	a.Decisions = []Decision{{Actor: "slack:U2", Person: "slack:U2", Action: ActionApprove, At: t0}}
	f, ok := Escalate(a, t0.Add(11*time.Minute), dir)
	if !ok || f.Index != 0 || f.Step.Kind() != StepRemind || !slices.Equal(f.Notify, []string{"slack:U1"}) {
		t.Fatalf("reminder = %+v, %v; want slack:U1 alone", f, ok)
	}
	if f.Approval.Escalated != 1 || !f.Approval.EscalationDue.Equal(t0.Add(30*time.Minute)) || f.Audit.Kind != AuditApprovalEscalated {
		t.Fatalf("after the reminder: escalated %d, due %v, audit %s", f.Approval.Escalated, f.Approval.EscalationDue, f.Audit.Kind)
	}
	if _, ok := Escalate(f.Approval, t0.Add(11*time.Minute), dir); ok {
		t.Fatal("the reminder fired twice")
	}
	if a.Escalated != 0 {
		t.Fatal("Escalate changed the approval it was given")
	}
	g, ok := Escalate(f.Approval, t0.Add(31*time.Minute), dir)
	// slack:U2 was eligible already, agents never are: only slack:L1 is new.
	if !ok || g.Step.Kind() != StepAddApprovers || !slices.Equal(g.Notify, []string{"slack:L1"}) {
		t.Fatalf("add_approvers = %+v", g)
	}
	n := g.Approval
	if !slices.Equal(n.AddedApprovers, []string{"group:leads"}) || !slices.Contains(n.Eligible, "slack:L1") || slices.Contains(n.Eligible, "agent:bot") {
		t.Fatalf("after add_approvers: added %v, eligible %v", n.AddedApprovers, n.Eligible)
	}
	if n.EscalationDue != nil {
		t.Fatalf("a terminal step was scheduled for the sweep: %v", n.EscalationDue)
	}
	if nx, _ := n.NextStep(); nx.Kind != StepDeny || !nx.At.Equal(t0.Add(2*time.Hour)) {
		t.Fatalf("next = %+v; want the deny at 2h", nx)
	}
	// The added lead decides, live: MayDecide and Decide accept them.
	env := testEnv(t)
	env.People, env.Eligible = dir, dir.Expand(n.Entries())
	if err := MayDecide(n, "slack:L1", env); err != nil {
		t.Fatalf("the escalated approver may not decide: %v", err)
	}
	n.Decisions = nil
	n.Quorum = 1
	if out := Decide(n, req("slack:L1", ActionApprove), env); out.Err != nil || out.Approval.Status != StatusApproved {
		t.Fatalf("the escalated approver's approval: %v", out.Err)
	}
}

func TestEscalatedApproverMayNotGrant(t *testing.T) {
	t.Parallel()
	dir := escalationDir()
	a := climbing(t, []Step{{After: time.Minute, AddApprovers: []string{"group:leads"}}})
	f, _ := Escalate(a, t0.Add(time.Minute), dir)
	env := testEnv(t)
	env.People, env.Eligible = dir, dir.Expand(f.Approval.Entries())
	for _, sc := range []Scope{ScopeTask, ScopeSession, ScopeForever} {
		r := req("slack:L1", ActionApprove)
		r.Scope = sc
		out := Decide(f.Approval, r, env)
		if !errors.Is(out.Err, ErrInvalidDecision) || !strings.Contains(out.Err.Error(), "escalation added") || out.Grant != nil {
			t.Errorf("scope %s by an escalated approver: %v", sc, out.Err)
		}
	}
	// One of the rule's own approvers may.
	r := req("slack:U1", ActionApprove)
	r.Scope = ScopeSession
	if out := Decide(f.Approval, r, env); out.Err != nil || out.Grant == nil {
		t.Fatalf("the rule's approver's session grant: %v", out.Err)
	}
}

func TestLapseAppliesTheTerminalDefault(t *testing.T) {
	t.Parallel()
	a := climbing(t, ladder)
	out := Lapse(a, a.ExpiresAt)
	d := out.Approval.Decisions[len(out.Approval.Decisions)-1]
	if !out.Final || out.Approval.Status != StatusRejected || !d.ByEscalation() || d.Action != ActionReject ||
		!strings.Contains(d.Reason, "denies") {
		t.Fatalf("deny default: status %s, decision %+v", out.Approval.Status, d)
	}
	if len(out.Audit) != 2 || out.Audit[0].Kind != AuditApprovalEscalated || out.Audit[1].Kind != AuditApprovalDecided {
		t.Fatalf("audit %v", out.Audit)
	}

	approve := []Step{{After: time.Hour, Outcome: TerminalApprove}}
	b := climbing(t, approve)
	out = Lapse(b, b.ExpiresAt)
	d = out.Approval.Decisions[0]
	if out.Approval.Status != StatusApproved || d.Action != ActionApprove || d.Digest != b.Digest || out.Approval.ApprovedArgs == nil {
		t.Fatalf("approve default: %s %+v", out.Approval.Status, d)
	}
	// Never for a high_impact or destructive call, whatever the ladder.
	for name, mod := range map[string]func(*Approval){
		"HighImpact":  func(a *Approval) { a.Risk = RiskHighImpact },
		"Destructive": func(a *Approval) { a.Destructive = true },
	} {
		c := climbing(t, approve)
		mod(c)
		out := Lapse(c, c.ExpiresAt)
		if out.Approval.Status != StatusRejected || !strings.Contains(out.Approval.Decisions[0].Reason, "never approves") {
			t.Errorf("%s: approve default gave %s (%s)", name, out.Approval.Status, out.Approval.Decisions[0].Reason)
		}
	}
	// Without an outcome it expires.
	if out := Lapse(climbing(t, nil), t0.Add(time.Hour)); out.Approval.Status != StatusExpired {
		t.Fatalf("no ladder: %s", out.Approval.Status)
	}
	// A click after the end gets the default, and is told so.
	late := Decide(climbing(t, ladder), req("slack:U1", ActionApprove), testEnv(t))
	if late.Err != nil || late.Approval.Status != StatusApproved {
		t.Fatalf("a click before the end: %v", late.Err)
	}
	c := climbing(t, ladder)
	r := req("slack:U1", ActionApprove)
	r.At = c.ExpiresAt
	late = Decide(c, r, testEnv(t))
	if late.Approval.Status != StatusRejected || !errors.Is(late.Err, ErrAlreadyDecided) {
		t.Fatalf("a click at the end: %s, %v", late.Approval.Status, late.Err)
	}
}

func TestPolicyLadder(t *testing.T) {
	t.Parallel()
	def := []Step{{After: 20 * time.Minute, Remind: true}}
	p := &Policy{Escalation: def, Rules: []Rule{
		{Tool: "deploy", Effect: EffectAsk},
		{Tool: "deploy", Args: map[string]string{"env": "prod*"}, Effect: EffectAsk, Escalation: ladder},
		{Tool: "deploy", Args: map[string]string{"env": "dev"}, Effect: EffectAsk, Escalation: []Step{}},
	}}
	info := ToolInfo{Name: "deploy", Risk: RiskExternal}
	for env, want := range map[string][]Step{"staging": def, "prod-eu": ladder, "dev": {}} {
		if got := p.Ladder(p.Evaluate(info, map[string]any{"env": env}, Subject{})); !slices.EqualFunc(got, want, func(a, b Step) bool { return a.Kind() == b.Kind() && a.After == b.After }) {
			t.Errorf("env %s: ladder %v, want %v", env, got, want)
		}
	}
	if p.Ladder(p.Evaluate(ToolInfo{Name: "other", Risk: RiskExternal}, nil, Subject{})) == nil {
		t.Error("the default verdict has no ladder")
	}
	if (*Policy)(nil).Ladder(Verdict{}) != nil {
		t.Error("a nil policy has a ladder")
	}
	changed := *p
	changed.Escalation = nil
	if p.Version() == changed.Version() {
		t.Error("changing the default ladder keeps the policy version")
	}
}

func TestTaskGrantCoversItsRunOnly(t *testing.T) {
	t.Parallel()
	a := pending(1)
	a.Risk = RiskExternal
	r := req("slack:U1", ActionApprove)
	r.Scope = ScopeTask
	out := Decide(a, r, testEnv(t))
	g := out.Grant
	if out.Err != nil || g == nil || g.Scope != ScopeTask || g.RunID != "run1" || g.ExpiresAt == nil ||
		!g.ExpiresAt.Equal(r.At.Add(DefaultSessionTTL)) {
		t.Fatalf("task grant = %+v, %v", g, out.Err)
	}
	call := Call{Tool: "deploy", RunID: "run1", Risk: RiskExternal, Thread: "console:t1", Requester: "console:req",
		Verdict: Verdict{Effect: EffectAsk, Quorum: 1, RuleKey: g.RuleKey}, Args: map[string]any{"env": "prod"}, Eligible: []string{"slack:U1"}}
	if !g.Covers(call, t0.Add(2*time.Minute), false) {
		t.Fatal("a task grant does not cover a later call of its run")
	}
	next := call
	next.RunID = "run2"
	if g.Covers(next, t0.Add(2*time.Minute), false) {
		t.Fatal("a task grant reached the next run")
	}
	hi := call
	hi.Risk = RiskHighImpact
	if g.Covers(hi, t0.Add(2*time.Minute), false) {
		t.Fatal("a task grant covered a high_impact call")
	}
	if out := Decide(pending(1), r, testEnv(t)); !errors.Is(out.Err, ErrInvalidDecision) {
		t.Fatalf("scope task on a high_impact call: %v", out.Err)
	}
}

func TestGrantFor(t *testing.T) {
	t.Parallel()
	a := pending(1)
	a.Risk = RiskExternal
	for name, c := range map[string]struct {
		scope Scope
		dur   time.Duration
		want  string // "" accepted
		until time.Duration
	}{
		"SessionShorter":  {ScopeSession, 10 * time.Minute, "", 10 * time.Minute},
		"SessionTooLong":  {ScopeSession, 2 * time.Hour, "longer than a session grant may last", 0},
		"ForeverBounded":  {ScopeForever, 48 * time.Hour, "", 48 * time.Hour},
		"TaskTakesNoFor":  {ScopeTask, time.Hour, "bounds a session or forever grant", 0},
		"CallTakesNoFor":  {ScopeCall, time.Hour, "scope call saves none", 0},
		"DefaultTakesFor": {"", time.Hour, "scope call saves none", 0},
		"Negative":        {ScopeForever, -time.Hour, "positive", 0},
	} {
		r := req("slack:U1", ActionApprove)
		r.Scope, r.For = c.scope, c.dur
		out := Decide(a, r, testEnv(t))
		if c.want != "" {
			if !errors.Is(out.Err, ErrInvalidDecision) || !strings.Contains(out.Err.Error(), c.want) {
				t.Errorf("%s: %v, want %q", name, out.Err, c.want)
			}
			continue
		}
		if out.Err != nil || out.Grant == nil || out.Grant.ExpiresAt == nil || !out.Grant.ExpiresAt.Equal(r.At.Add(c.until)) ||
			out.Approval.Decisions[0].For != c.dur.String() {
			t.Errorf("%s: grant %+v, %v", name, out.Grant, out.Err)
		}
	}
}

func TestGrantOfferListsWhatItCovers(t *testing.T) {
	t.Parallel()
	a := pending(1)
	a.Risk, a.RuleKey = RiskExternal, "rDeploy"
	now := t0.Add(5 * time.Minute)
	g, err := GrantOffer(a, ScopeSession, nil, 0, now, Env{SessionTTL: 30 * time.Minute})
	if err != nil || g.Scope != ScopeSession || g.RuleKey != "rDeploy" || g.Requester != "console:req" || g.Thread != "console:t1" ||
		!g.ExpiresAt.Equal(now.Add(30*time.Minute)) || g.Actor != "" {
		t.Fatalf("session offer = %+v, %v", g, err)
	}
	g, err = GrantOffer(a, ScopeForever, nil, 0, now, Env{})
	if err != nil || !SameArgs(g.Args, a.ProposedArgs) || g.ExpiresAt != nil {
		t.Fatalf("forever offer = %+v, %v", g, err)
	}
	g, err = GrantOffer(a, ScopeTask, nil, 0, now, Env{})
	if err != nil || g.RunID != "run1" {
		t.Fatalf("task offer = %+v, %v", g, err)
	}
	if _, err := GrantOffer(pending(2), ScopeSession, nil, 0, now, Env{}); err == nil || !strings.Contains(err.Error(), "quorum 1") {
		t.Fatalf("an offer under quorum 2: %v", err)
	}
	if _, err := GrantOffer(a, ScopeCall, nil, 0, now, Env{}); err == nil {
		t.Fatal("scope call offered a grant")
	}
}
