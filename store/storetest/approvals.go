package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// approval makes a pending approval for a run's first step.
func approval(runID string, th core.Thread, eligible []string, quorum int) *approvals.Approval {
	return &approvals.Approval{ID: newID("ap"), RunID: runID, Thread: th.String(), Requester: "console:alice",
		Tool: "deploy", Destructive: true, Risk: approvals.RiskHighImpact, ProposedArgs: map[string]any{"env": "prod"},
		Preview: "would deploy api 1.2.3 to prod", Reason: "deploy api 1.2.3", Status: approvals.StatusPending,
		Approvers: []string{"group:sre"}, Eligible: eligible, Quorum: quorum, Rule: 2, CreatedAt: t0,
		ExpiresAt: t0.Add(time.Hour)}
}

// suspended makes a run waiting on a new approval, as the engine's suspend
// checkpoint does, and returns the approval.
func suspended(t *testing.T, s core.Store, th core.Thread, eligible []string, quorum int) *approvals.Approval {
	t.Helper()
	return suspendedWith(t, s, th, eligible, quorum, nil)
}

// suspendedWith is suspended with the approval adjusted by mod first.
func suspendedWith(t *testing.T, s core.Store, th core.Thread, eligible []string, quorum int, mod func(*approvals.Approval)) *approvals.Approval {
	t.Helper()
	id := queueRun(t, s, th)
	runs, err := s.RunClaim(ctx(t), core.RunClaimParams{Owner: "engine", Limit: 100, Now: t0, LeaseUntil: t0.Add(time.Hour)})
	if err != nil || !slices.ContainsFunc(runs, func(r *core.Run) bool { return r.ID == id }) {
		t.Fatalf("claim %s: %v, %v", id, runs, err)
	}
	a := approval(id, th, eligible, quorum)
	if mod != nil {
		mod(a)
	}
	if err := s.RunCheckpoint(ctx(t), core.Checkpoint{RunID: id, Owner: "engine", Now: t0, Status: core.RunWaitingApproval,
		Release: true, Approval: a, Step: &core.Step{Index: 0, Tool: "deploy", Status: core.StepWaitingApproval, ApprovalID: a.ID},
		Outbox: []core.OutboxMessage{{ID: newID("card"), Thread: th, Kind: core.KindCard, ApprovalID: a.ID, RunID: id}}}); err != nil {
		t.Fatalf("suspend %s: %v", id, err)
	}
	return a
}

var env = approvals.Env{
	Validate: func(args map[string]any) (map[string]any, error) { return args, nil },
	Recheck: func(map[string]any) (approvals.Verdict, []string) {
		return approvals.Verdict{Effect: approvals.EffectAllow, Rule: -1, Quorum: 1, RuleKey: approvals.DefaultRuleKey}, nil
	},
	PolicyVersion: "p-storetest",
}

// decideAs decides approval id with approvals.Decide for one request.
func decideAs(t *testing.T, s core.Store, id string, r approvals.Request) (*approvals.Approval, error) {
	t.Helper()
	if r.At.IsZero() {
		r.At = t0.Add(time.Minute)
	}
	if r.Channel == "" {
		r.Channel = "console"
	}
	return s.ApprovalDecide(ctx(t), approvals.ApprovalDecideParams{ID: id,
		Decide: func(a *approvals.Approval) approvals.Outcome { return approvals.Decide(a, r, env) }})
}

func approve(actor string) approvals.Request {
	return approvals.Request{Actor: actor, Action: approvals.ActionApprove, Scope: approvals.ScopeCall}
}

// outboxOfKind lists outbox messages of kind for approval id.
func outboxOfKind(t *testing.T, s core.Store, kind core.MessageKind, approvalID string) []*core.Delivery {
	t.Helper()
	var out []*core.Delivery
	for _, d := range allOutbox(t, s) {
		if d.Kind == kind && d.ApprovalID == approvalID {
			out = append(out, d)
		}
	}
	return out
}

func eventsOfType(t *testing.T, s core.Store, runID, typ string) int {
	t.Helper()
	evs, err := s.RunEventList(ctx(t), runID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

func testDecideApproves(t *testing.T, s core.Store) {
	th := thread("approve")
	a := suspended(t, s, th, []string{"console:bob"}, 1)
	runs, cancelRuns := s.Subscribe(core.TopicRuns)
	defer cancelRuns()
	outbox, cancelOutbox := s.Subscribe(core.TopicOutbox)
	defer cancelOutbox()
	got, err := decideAs(t, s, a.ID, approve("console:bob"))
	if err != nil {
		t.Fatalf("approve: %v", err)
	}
	if got.Status != approvals.StatusApproved || len(got.Decisions) != 1 || got.Decisions[0].Actor != "console:bob" ||
		got.DecidedAt == nil || !got.DecidedAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("returned approval = %+v", got)
	}
	stored, err := s.ApprovalGet(ctx(t), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Status != approvals.StatusApproved || fmt.Sprint(stored.ApprovedArgs) != fmt.Sprint(a.ProposedArgs) {
		t.Errorf("stored approval = %+v", stored)
	}
	r := getRun(t, s, a.RunID)
	if r.Status != core.RunQueued || r.Owner != "" {
		t.Errorf("run after approval: status %s owner %q, want queued, none", r.Status, r.Owner)
	}
	mustEqual(t, "permission.decided events", eventsOfType(t, s, a.RunID, core.EventPermissionDecided), 1)
	updates := outboxOfKind(t, s, core.KindCardUpdate, a.ID)
	if len(updates) != 1 || updates[0].Thread != th || updates[0].RunID != a.RunID {
		t.Errorf("card updates = %+v, want one in %s for run %s", updates, th, a.RunID)
	}
	audit := allAudit(t, s)
	if len(audit) != 1 || audit[0].Kind != "approval.decided" || audit[0].ApprovalID != a.ID {
		t.Errorf("audit = %+v", audit)
	}
	if !waitWake(runs, 5*time.Second) || !waitWake(outbox, 5*time.Second) {
		t.Error("approval did not wake runs and outbox subscribers")
	}
	sameIDs(t, "claim after approval", claim(t, s, "engine2", 10), a.RunID)
}

func testDecideFiftyConcurrent(t *testing.T, s core.Store) {
	const n = 50
	var eligible []string
	for i := range n {
		eligible = append(eligible, fmt.Sprintf("console:u%d", i))
	}
	a := suspended(t, s, thread("fifty"), eligible, 1)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = decideAs(t, s, a.ID, approve(eligible[i]))
		}()
	}
	wg.Wait()
	var winners []string
	for i, err := range errs {
		if err == nil {
			winners = append(winners, eligible[i])
		}
	}
	if len(winners) != 1 {
		t.Fatalf("winners = %v, want exactly one", winners)
	}
	for i, err := range errs {
		if err == nil {
			continue
		}
		var re *approvals.RefusedError
		if !errors.As(err, &re) || !errors.Is(err, approvals.ErrAlreadyDecided) {
			t.Errorf("%s: err = %v, want RefusedError(ErrAlreadyDecided)", eligible[i], err)
			continue
		}
		if fmt.Sprint(re.By) != fmt.Sprint(winners) {
			t.Errorf("%s: refused By = %v, want %v", eligible[i], re.By, winners)
		}
	}
	stored, err := s.ApprovalGet(ctx(t), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored.Decisions) != 1 || stored.Decisions[0].Actor != winners[0] {
		t.Errorf("stored decisions = %+v, want only %s", stored.Decisions, winners[0])
	}
	mustEqual(t, "card updates", len(outboxOfKind(t, s, core.KindCardUpdate, a.ID)), 1)
	mustEqual(t, "permission.decided events", eventsOfType(t, s, a.RunID, core.EventPermissionDecided), 1)
	audit := allAudit(t, s)
	mustEqual(t, "audit entries (1 decided + 49 refused)", len(audit), n)
	mustEqual(t, "VerifyChain", approvals.VerifyChain("", audit), int64(0))
}

func testDecideConcurrentQuorum(t *testing.T, s core.Store) {
	const n = 10
	var eligible []string
	for i := range n {
		eligible = append(eligible, fmt.Sprintf("console:q%d", i))
	}
	a := suspended(t, s, thread("quorum-concurrent"), eligible, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = decideAs(t, s, a.ID, approve(eligible[i]))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("%s: %v", eligible[i], err)
		}
	}
	got, err := s.ApprovalGet(ctx(t), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != approvals.StatusApproved || got.CountedApprovals() != n {
		t.Errorf("after %d concurrent approvals: status %s with %d counted, want approved with %d (a vote was lost)",
			n, got.Status, got.CountedApprovals(), n)
	}
	mustEqual(t, "run status", getRun(t, s, a.RunID).Status, core.RunQueued)
}

func testDecideDedupsEvent(t *testing.T, s core.Store) {
	a := suspended(t, s, thread("dedup-decision"), []string{"console:bob", "console:carol"}, 2)
	var calls atomic.Int32
	key := &approvals.EventKey{Channel: "slack", EventID: newID("click"), Actor: "console:bob", Thread: a.Thread,
		Text: "approve", At: t0, Raw: []byte(`{"a":1}`)}
	decide := func() (*approvals.Approval, error) {
		return s.ApprovalDecide(ctx(t), approvals.ApprovalDecideParams{ID: a.ID, Event: key,
			Decide: func(cur *approvals.Approval) approvals.Outcome {
				calls.Add(1)
				return approvals.Decide(cur, approvals.Request{Actor: "console:bob", Channel: "slack",
					Action: approvals.ActionApprove, At: t0.Add(time.Minute)}, env)
			}})
	}
	if _, err := decide(); err != nil {
		t.Fatalf("first decision: %v", err)
	}
	got, err := decide()
	if !errors.Is(err, approvals.ErrDuplicateEvent) {
		t.Fatalf("second delivery err = %v, want ErrDuplicateEvent", err)
	}
	mustEqual(t, "Decide calls", calls.Load(), int32(1))
	if got == nil || len(got.Decisions) != 1 || got.Status != approvals.StatusPending {
		t.Errorf("approval after duplicate = %+v, want pending with one decision", got)
	}
	mustEqual(t, "audit entries", len(allAudit(t, s)), 1)
	// The decision's text is part of the thread's history.
	th, err := core.ParseThread(a.Thread)
	if err != nil {
		t.Fatal(err)
	}
	msgs, _, err := s.ThreadMessages(ctx(t), core.ThreadMessagesParams{Thread: th, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range msgs {
		found = found || (m.ID == key.EventID && m.Text == "approve" && m.Actor == "console:bob")
	}
	if !found {
		t.Errorf("thread history %+v lacks the decision event with its text", msgs)
	}
	// The event key is shared with the inbox: the same platform event
	// cannot also start a run.
	res, err := s.InboxRecord(ctx(t), core.InboxRecordParams{Event: core.ChannelEvent{Channel: "slack", EventID: key.EventID}})
	if err != nil || !res.Duplicate {
		t.Errorf("InboxRecord of a decision event = %+v, %v; want Duplicate", res, err)
	}
}

func testDecideRefusal(t *testing.T, s core.Store) {
	a := suspended(t, s, thread("refuse"), []string{"console:bob"}, 1)
	got, err := decideAs(t, s, a.ID, approve("console:mallory"))
	if !errors.Is(err, approvals.ErrNotApprover) {
		t.Fatalf("err = %v, want ErrNotApprover", err)
	}
	if got == nil || got.Status != approvals.StatusPending || len(got.Decisions) != 0 {
		t.Errorf("approval after refusal = %+v", got)
	}
	audit := allAudit(t, s)
	if len(audit) != 1 || audit[0].Kind != "approval.refused" || audit[0].Actor != "console:mallory" {
		t.Errorf("audit = %+v, want one approval.refused by mallory", audit)
	}
	mustEqual(t, "run status", getRun(t, s, a.RunID).Status, core.RunWaitingApproval)
	mustEqual(t, "card updates", len(outboxOfKind(t, s, core.KindCardUpdate, a.ID)), 0)
	if _, err := decideAs(t, s, "no-such-approval", approve("console:bob")); !errors.Is(err, approvals.ErrNotFound) {
		t.Errorf("decide unknown approval err = %v, want approvals.ErrNotFound", err)
	}
}

func testDecideQuorum(t *testing.T, s core.Store) {
	a := suspended(t, s, thread("quorum"), []string{"console:bob", "console:carol"}, 2)
	got, err := decideAs(t, s, a.ID, approve("console:bob"))
	if err != nil || got.Status != approvals.StatusPending || got.CountedApprovals() != 1 {
		t.Fatalf("first approval = %+v, %v; want pending with 1 of 2", got, err)
	}
	mustEqual(t, "run status after 1 of 2", getRun(t, s, a.RunID).Status, core.RunWaitingApproval)
	if _, err := decideAs(t, s, a.ID, approve("console:bob")); !errors.Is(err, approvals.ErrDuplicateApproval) {
		t.Errorf("same approver twice err = %v, want ErrDuplicateApproval", err)
	}
	got, err = decideAs(t, s, a.ID, approve("console:carol"))
	if err != nil || got.Status != approvals.StatusApproved || fmt.Sprint(got.Winners()) != "[console:bob console:carol]" {
		t.Fatalf("second approval = %+v, %v", got, err)
	}
	mustEqual(t, "run status after 2 of 2", getRun(t, s, a.RunID).Status, core.RunQueued)
	mustEqual(t, "audit", len(allAudit(t, s)), 3)
}

func testDecideGrant(t *testing.T, s core.Store) {
	th := thread("grant")
	external := func(a *approvals.Approval) { a.Risk, a.Tool = approvals.RiskExternal, newID("tool") }
	a := suspendedWith(t, s, th, []string{"console:bob"}, 1, external)
	if gs, _, err := s.GrantList(ctx(t), approvals.GrantListParams{Tool: a.Tool}); err != nil || len(gs) != 0 {
		t.Fatalf("GrantList before = %+v, %v; want none", gs, err)
	}
	r := approve("console:bob")
	r.Scope = approvals.ScopeSession
	if _, err := decideAs(t, s, a.ID, r); err != nil {
		t.Fatal(err)
	}
	gs, next, err := s.GrantList(ctx(t), approvals.GrantListParams{Tool: a.Tool, ActiveAt: t0.Add(2 * time.Minute)})
	if err != nil || len(gs) != 1 || next != "" {
		t.Fatalf("GrantList after = %+v, %q, %v", gs, next, err)
	}
	g := gs[0]
	exp := t0.Add(time.Minute + approvals.DefaultSessionTTL)
	if g.ID != approvals.GrantID(a.ID) || g.Scope != approvals.ScopeSession || g.Thread != th.String() || g.Tool != a.Tool ||
		g.Requester != "console:alice" || g.ApprovalID != a.ID || g.Actor != "console:bob" || !g.At.Equal(t0.Add(time.Minute)) ||
		g.ExpiresAt == nil || !g.ExpiresAt.Equal(exp) || g.RevokedAt != nil || g.Args != nil {
		t.Errorf("grant = %+v", g)
	}
	// Expired grants are not active.
	if gs, _, _ := s.GrantList(ctx(t), approvals.GrantListParams{Tool: a.Tool, ActiveAt: exp}); len(gs) != 0 {
		t.Errorf("expired grant listed as active: %+v", gs)
	}
	if gs, _, _ := s.GrantList(ctx(t), approvals.GrantListParams{Tool: "other_tool"}); len(gs) != 0 {
		t.Errorf("GrantList(other tool) = %+v", gs)
	}
	// A forever grant keeps its exact arguments and has no expiry.
	b := suspendedWith(t, s, thread("grant-forever"), []string{"console:bob"}, 1, external)
	r.Scope = approvals.ScopeForever
	if _, err := decideAs(t, s, b.ID, r); err != nil {
		t.Fatal(err)
	}
	gs, _, err = s.GrantList(ctx(t), approvals.GrantListParams{Tool: b.Tool, ActiveAt: t0.Add(1000 * time.Hour)})
	if err != nil || len(gs) != 1 || gs[0].Scope != approvals.ScopeForever || gs[0].ExpiresAt != nil ||
		fmt.Sprint(gs[0].Args) != fmt.Sprint(b.ProposedArgs) || gs[0].Thread != "" || gs[0].RuleKey != approvals.DefaultRuleKey {
		t.Fatalf("forever grant = %+v, %v", gs, err)
	}
}

// testApprovalDigest: an approval keeps its digest, rule key and policy
// version; a decision keeps the digest it was made on; an edit's new
// digest (and rule) replaces the old, on both write paths.
func testApprovalDigest(t *testing.T, s core.Store) {
	a := suspendedWith(t, s, thread("digest"), []string{"console:bob", "console:carol"}, 2, func(x *approvals.Approval) {
		x.RuleKey, x.PolicyVersion = "rAsk", "p-ask"
		x.Digest = approvals.Digest(x.Tool, x.ProposedArgs, x.RuleKey, x.PolicyVersion)
	})
	got, err := s.ApprovalGet(ctx(t), a.ID)
	if err != nil || got.Digest != a.Digest || got.RuleKey != "rAsk" || got.PolicyVersion != "p-ask" || !strings.HasPrefix(got.Digest, "sha256:") {
		t.Fatalf("stored approval digest %q rule %q policy %q, %v; want %q", got.Digest, got.RuleKey, got.PolicyVersion, err, a.Digest)
	}
	got, err = decideAs(t, s, a.ID, approve("console:bob"))
	if err != nil || len(got.Decisions) != 1 || got.Decisions[0].Digest != a.Digest {
		t.Fatalf("approval: %+v, %v; want the decision on %s", got, err, a.Digest)
	}
	edit := approvals.Request{Actor: "console:carol", Action: approvals.ActionEdit, Args: map[string]any{"env": "staging"}}
	got, err = decideAs(t, s, a.ID, edit)
	if err != nil {
		t.Fatal(err)
	}
	want := approvals.Digest(a.Tool, map[string]any{"env": "staging"}, approvals.DefaultRuleKey, "p-storetest")
	stored, err := s.ApprovalGet(ctx(t), a.ID)
	if err != nil || stored.Digest != want || stored.RuleKey != approvals.DefaultRuleKey || stored.PolicyVersion != "p-storetest" ||
		stored.Rule != -1 || stored.Decisions[1].Digest != want || got.Digest != want {
		t.Fatalf("edited approval digest %q rule %q/%d policy %q decisions %+v, %v; want %s", stored.Digest, stored.RuleKey, stored.Rule,
			stored.PolicyVersion, stored.Decisions, err, want)
	}
	if why := stored.DigestProblem(stored.Args()); why != "" {
		t.Fatalf("the stored decided call does not match its digest: %s", why)
	}
}

func testGrantRevoke(t *testing.T, s core.Store) {
	a := suspendedWith(t, s, thread("grant-revoke"), []string{"console:bob"}, 1, func(a *approvals.Approval) {
		a.Risk, a.Tool = approvals.RiskExternal, newID("tool")
	})
	r := approve("console:bob")
	r.Scope, r.Pattern = approvals.ScopeForever, map[string]string{"env": "prod*"}
	if _, err := decideAs(t, s, a.ID, r); err != nil {
		t.Fatal(err)
	}
	id := approvals.GrantID(a.ID)
	before := len(allAudit(t, s))
	at := t0.Add(time.Hour)
	audit := []approvals.AuditEntry{{At: at, Kind: "grant.revoked", Actor: "console:carol", Detail: []byte(`{"grant":"` + id + `"}`)}}
	g, err := s.GrantRevoke(ctx(t), approvals.GrantRevokeParams{ID: id, Actor: "console:carol", At: at, Audit: audit})
	if err != nil || g.RevokedAt == nil || !g.RevokedAt.Equal(at) || g.RevokedBy != "console:carol" || g.Pattern["env"] != "prod*" {
		t.Fatalf("GrantRevoke = %+v, %v", g, err)
	}
	mustEqual(t, "audit entries added by the revoke", len(allAudit(t, s))-before, 1)
	if gs, _, _ := s.GrantList(ctx(t), approvals.GrantListParams{Tool: a.Tool, ActiveAt: at}); len(gs) != 0 {
		t.Errorf("revoked grant listed as active: %+v", gs)
	}
	if gs, _, _ := s.GrantList(ctx(t), approvals.GrantListParams{Tool: a.Tool}); len(gs) != 1 || gs[0].RevokedAt == nil {
		t.Errorf("revoked grant missing from the full list: %+v", gs)
	}
	if _, err := s.GrantRevoke(ctx(t), approvals.GrantRevokeParams{ID: id, Actor: "console:carol", At: at, Audit: audit}); !errors.Is(err, approvals.ErrGrantRevoked) {
		t.Errorf("second revoke err = %v, want ErrGrantRevoked", err)
	}
	mustEqual(t, "audit entries after a refused revoke", len(allAudit(t, s))-before, 1)
	if _, err := s.GrantRevoke(ctx(t), approvals.GrantRevokeParams{ID: "g-nope", Actor: "x", At: at}); !errors.Is(err, approvals.ErrNotFound) {
		t.Errorf("unknown grant err = %v, want ErrNotFound", err)
	}
}

func testDecideCAS(t *testing.T, s core.Store) {
	a := suspended(t, s, thread("cas"), []string{"console:bob"}, 1)
	if _, err := decideAs(t, s, a.ID, approve("console:bob")); err != nil {
		t.Fatal(err)
	}
	// A careless decide func that finalizes without looking (an expiry
	// sweeper racing the approval) must lose the compare-and-set.
	got, err := s.ApprovalDecide(ctx(t), approvals.ApprovalDecideParams{ID: a.ID,
		Decide: func(cur *approvals.Approval) approvals.Outcome { return approvals.Expire(cur, t0.Add(2*time.Hour)) }})
	var re *approvals.RefusedError
	if !errors.As(err, &re) || !errors.Is(err, approvals.ErrAlreadyDecided) || fmt.Sprint(re.By) != "[console:bob]" {
		t.Fatalf("err = %v, want RefusedError(ErrAlreadyDecided) by console:bob", err)
	}
	if got == nil || got.Status != approvals.StatusApproved {
		t.Errorf("approval = %+v, want approved", got)
	}
	mustEqual(t, "card updates", len(outboxOfKind(t, s, core.KindCardUpdate, a.ID)), 1)
}

func testApprovalExpiry(t *testing.T, s core.Store) {
	first := suspended(t, s, thread("exp-1"), []string{"console:bob"}, 1)
	second := suspended(t, s, thread("exp-2"), []string{"console:bob"}, 1)
	ids, err := s.ApprovalListExpired(ctx(t), t0.Add(time.Hour), 10)
	if err != nil {
		t.Fatal(err)
	}
	sameIDs(t, "expired at expiry", ids, first.ID, second.ID)
	ids, err = s.ApprovalListExpired(ctx(t), t0.Add(time.Hour-time.Microsecond), 10)
	if err != nil || len(ids) != 0 {
		t.Errorf("expired just before expiry = %v, %v", ids, err)
	}
	now := t0.Add(time.Hour)
	got, err := s.ApprovalDecide(ctx(t), approvals.ApprovalDecideParams{ID: first.ID,
		Decide: func(a *approvals.Approval) approvals.Outcome { return approvals.Expire(a, now) }})
	if err != nil || got.Status != approvals.StatusExpired {
		t.Fatalf("expire = %+v, %v", got, err)
	}
	mustEqual(t, "run told (requeued)", getRun(t, s, first.RunID).Status, core.RunQueued)
	mustEqual(t, "card updates", len(outboxOfKind(t, s, core.KindCardUpdate, first.ID)), 1)
	// A decision that arrives late expires the approval itself.
	late := approve("console:bob")
	late.At = now.Add(time.Second)
	if _, err := decideAs(t, s, second.ID, late); !errors.Is(err, approvals.ErrExpired) {
		t.Errorf("late decision err = %v, want ErrExpired", err)
	}
	ids, err = s.ApprovalListExpired(ctx(t), now.Add(time.Hour), 10)
	if err != nil || len(ids) != 0 {
		t.Errorf("expired after sweeping = %v, %v; want none", ids, err)
	}
}

func testApprovalGetNotFound(t *testing.T, s core.Store) {
	_, err := s.ApprovalGet(ctx(t), "no-such-approval")
	if !errors.Is(err, approvals.ErrNotFound) || !errors.Is(err, core.ErrNotFound) {
		t.Errorf("ApprovalGet(unknown) err = %v, want approvals.ErrNotFound (and core.ErrNotFound)", err)
	}
}

func testApprovalList(t *testing.T, s core.Store) {
	var all []*approvals.Approval
	for i := range 4 {
		all = append(all, suspended(t, s, thread(fmt.Sprintf("alist-%d", i)), []string{"console:bob"}, 1))
	}
	if _, err := decideAs(t, s, all[1].ID, approve("console:bob")); err != nil {
		t.Fatal(err)
	}
	page1, next, err := s.ApprovalList(ctx(t), approvals.ApprovalListParams{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	page2, next2, err := s.ApprovalList(ctx(t), approvals.ApprovalListParams{Limit: 2, Cursor: next})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range append(page1, page2...) {
		got = append(got, a.ID)
	}
	sameIDs(t, "approvals newest first", got, all[3].ID, all[2].ID, all[1].ID, all[0].ID)
	if next2 != "" {
		t.Errorf("last page cursor = %q", next2)
	}
	pending, _, err := s.ApprovalList(ctx(t), approvals.ApprovalListParams{Status: approvals.StatusPending})
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "pending", len(pending), 3)
	byRun, _, err := s.ApprovalList(ctx(t), approvals.ApprovalListParams{RunID: all[2].RunID})
	if err != nil || len(byRun) != 1 || byRun[0].ID != all[2].ID {
		t.Errorf("by run = %+v, %v", byRun, err)
	}
}

// testCheckpointRecordsExecutedArgs: the checkpoint that marks an approved
// step dispatching writes the step's args into the approval's
// executed_args in the same transaction; a refused checkpoint writes
// nothing, and a step without an approval touches no approval.
func testCheckpointRecordsExecutedArgs(t *testing.T, s core.Store) {
	th := thread("executed")
	a := suspended(t, s, th, []string{"console:bob"}, 1)
	if _, err := decideAs(t, s, a.ID, approve("console:bob")); err != nil {
		t.Fatalf("approve: %v", err)
	}
	if got, err := s.ApprovalGet(ctx(t), a.ID); err != nil || got.ExecutedArgs != nil {
		t.Fatalf("before dispatch: executed args %v, %v; want none", got.ExecutedArgs, err)
	}
	sameIDs(t, "claim after approval", claim(t, s, "engine", 10), a.RunID)
	executed := map[string]any{"env": "staging", "replicas": float64(2)}
	dispatching := func(owner string) core.Checkpoint {
		return core.Checkpoint{RunID: a.RunID, Owner: owner, Now: t0.Add(2 * time.Minute),
			Step: &core.Step{Index: 0, Tool: "deploy", Status: core.StepDispatching, Args: executed, ApprovalID: a.ID,
				IdempotencyKey: a.RunID + "/0", Attempts: 1}}
	}
	if err := s.RunCheckpoint(ctx(t), dispatching("someone-else")); !errors.Is(err, core.ErrConflict) {
		t.Fatalf("checkpoint by a non-owner: %v, want ErrConflict", err)
	}
	if got, err := s.ApprovalGet(ctx(t), a.ID); err != nil || got.ExecutedArgs != nil {
		t.Errorf("after a refused checkpoint: executed args %v, %v; want none", got.ExecutedArgs, err)
	}
	if err := s.RunCheckpoint(ctx(t), dispatching("engine")); err != nil {
		t.Fatalf("dispatching checkpoint: %v", err)
	}
	got, err := s.ApprovalGet(ctx(t), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got.ExecutedArgs) != fmt.Sprint(executed) || fmt.Sprint(got.ProposedArgs) != fmt.Sprint(a.ProposedArgs) ||
		fmt.Sprint(got.ApprovedArgs) != fmt.Sprint(a.ProposedArgs) || got.Status != approvals.StatusApproved {
		t.Errorf("after dispatch: proposed %v approved %v executed %v status %s; want executed %v, the rest unchanged",
			got.ProposedArgs, got.ApprovedArgs, got.ExecutedArgs, got.Status, executed)
	}
	// The step's result (no longer dispatching) leaves executed_args alone.
	done := dispatching("engine")
	done.Step.Status, done.Step.Args = core.StepSucceeded, map[string]any{"env": "other"}
	if err := s.RunCheckpoint(ctx(t), done); err != nil {
		t.Fatalf("result checkpoint: %v", err)
	}
	if got, err := s.ApprovalGet(ctx(t), a.ID); err != nil || fmt.Sprint(got.ExecutedArgs) != fmt.Sprint(executed) {
		t.Errorf("after the result: executed args %v, %v; want %v", got.ExecutedArgs, err, executed)
	}
	// Another run's step naming this approval (a bug elsewhere) does not
	// rewrite it: the approval belongs to its own run.
	other := queueRun(t, s, thread("executed-other"))
	sameIDs(t, "claim other", claim(t, s, "engine", 10), other)
	if err := s.RunCheckpoint(ctx(t), core.Checkpoint{RunID: other, Owner: "engine", Now: t0,
		Step: &core.Step{Index: 0, Tool: "deploy", Status: core.StepDispatching, Args: map[string]any{"env": "prod"}, ApprovalID: a.ID}}); err != nil {
		t.Fatalf("other run's checkpoint: %v", err)
	}
	if got, err := s.ApprovalGet(ctx(t), a.ID); err != nil || fmt.Sprint(got.ExecutedArgs) != fmt.Sprint(executed) {
		t.Errorf("after another run's checkpoint: executed args %v, %v; want %v", got.ExecutedArgs, err, executed)
	}
}
