package storetest

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// escalationLadder reminds at 10m, adds leads at 30m and denies at 2h.
var escalationLadder = []approvals.Step{
	{After: 10 * time.Minute, Remind: true},
	{After: 30 * time.Minute, AddApprovers: []string{"group:leads"}},
	{After: 2 * time.Hour, Outcome: approvals.TerminalDeny},
}

var escalationDir = approvals.NewDirectory(nil, map[string][]string{"leads": {"console:lead"}})

// climbing is a suspended approval with escalationLadder.
func climbing(t *testing.T, s core.Store, name string) *approvals.Approval {
	t.Helper()
	return suspendedWith(t, s, thread(name), []string{"console:bob"}, 1, func(a *approvals.Approval) {
		a.Climb(escalationLadder, time.Hour)
	})
}

// fireAt has ApprovalEscalate fire the step a is due for at now, with
// the messages a step writes.
func fireAt(t *testing.T, s core.Store, id string, now time.Time) (*approvals.Approval, bool, error) {
	t.Helper()
	return s.ApprovalEscalate(ctx(t), core.ApprovalEscalateParams{ID: id, Fire: func(a *approvals.Approval) *core.Escalation {
		f, ok := approvals.Escalate(a, now, escalationDir)
		if !ok {
			return nil
		}
		th, _ := core.ParseThread(a.Thread)
		dm := core.Thread{Channel: "console", Key: "dm-" + a.ID}
		f.Approval.CardThreads = append(f.Approval.CardThreads, dm.String())
		return &core.Escalation{Approval: f.Approval, Audit: []approvals.AuditEntry{f.Audit}, Outbox: []core.OutboxMessage{
			{ID: newID("esc"), Thread: th, Kind: core.KindReply, Text: "reminder " + f.Step.Kind(), RunID: a.RunID},
		}}
	}})
}

// testEscalationFiresOnce: the ladder survives the store (its state
// round-trips), only due steps are listed, and twenty concurrent sweepers
// fire one step exactly once, with its message and audit entry.
func testEscalationFiresOnce(t *testing.T, s core.Store) {
	a := climbing(t, s, "escalate")
	got, err := s.ApprovalGet(ctx(t), a.ID)
	if err != nil || len(got.Ladder) != 3 || got.Ladder[1].AddApprovers[0] != "group:leads" || got.Ladder[2].Outcome != approvals.TerminalDeny ||
		got.Escalated != 0 || got.EscalationDue == nil || !got.EscalationDue.Equal(t0.Add(10*time.Minute)) || !got.ExpiresAt.Equal(t0.Add(2*time.Hour)) {
		t.Fatalf("stored ladder %+v escalated %d due %v end %v, %v", got.Ladder, got.Escalated, got.EscalationDue, got.ExpiresAt, err)
	}
	plain := suspended(t, s, thread("escalate-none"), []string{"console:bob"}, 1)
	if got, _ := s.ApprovalGet(ctx(t), plain.ID); got.Ladder != nil || got.EscalationDue != nil || got.AddedApprovers != nil || got.CardThreads != nil {
		t.Fatalf("an approval without a ladder reads back with %+v", got)
	}
	if ids, err := s.ApprovalListEscalating(ctx(t), t0.Add(10*time.Minute-time.Microsecond), 10); err != nil || len(ids) != 0 {
		t.Fatalf("listed before due: %v, %v", ids, err)
	}
	ids, err := s.ApprovalListEscalating(ctx(t), t0.Add(10*time.Minute), 10)
	if err != nil || !slices.Equal(ids, []string{a.ID}) {
		t.Fatalf("listed when due: %v, %v", ids, err)
	}
	before := len(allAudit(t, s))
	var fired atomic.Int64
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, ok, err := fireAt(t, s, a.ID, t0.Add(11*time.Minute)); err != nil {
				t.Error(err)
			} else if ok {
				fired.Add(1)
			}
		}()
	}
	wg.Wait()
	mustEqual(t, "sweepers that fired the reminder", fired.Load(), int64(1))
	mustEqual(t, "audit entries", len(allAudit(t, s))-before, 1)
	var reminders int
	for _, d := range allOutbox(t, s) {
		if d.RunID == a.RunID && d.Kind == core.KindReply && d.Text == "reminder remind" {
			reminders++
		}
	}
	mustEqual(t, "reminders queued", reminders, 1)
	got, _ = s.ApprovalGet(ctx(t), a.ID)
	if got.Escalated != 1 || !got.EscalationDue.Equal(t0.Add(30*time.Minute)) || len(got.CardThreads) != 1 {
		t.Fatalf("after the reminder: escalated %d due %v threads %v", got.Escalated, got.EscalationDue, got.CardThreads)
	}
	if ids, _ := s.ApprovalListEscalating(ctx(t), t0.Add(29*time.Minute), 10); len(ids) != 0 {
		t.Fatalf("listed again before the next step: %v", ids)
	}
	// The next step adds approvers; after it only the end is left.
	got, ok, err := fireAt(t, s, a.ID, t0.Add(30*time.Minute))
	if err != nil || !ok || !slices.Equal(got.AddedApprovers, []string{"group:leads"}) || !slices.Contains(got.Eligible, "console:lead") ||
		got.EscalationDue != nil {
		t.Fatalf("add_approvers: %+v, %v, %v", got, ok, err)
	}
	stored, _ := s.ApprovalGet(ctx(t), a.ID)
	if !slices.Equal(stored.AddedApprovers, got.AddedApprovers) || !slices.Contains(stored.Eligible, "console:lead") || stored.Escalated != 2 {
		t.Fatalf("stored after add_approvers: %+v", stored)
	}
	if ids, _ := s.ApprovalListEscalating(ctx(t), t0.Add(10*time.Hour), 10); len(ids) != 0 {
		t.Fatalf("listed with no step left: %v", ids)
	}
	// A decided approval escalates no more, and an unknown one is not found.
	if _, err := decideAs(t, s, a.ID, approve("console:lead")); err != nil {
		t.Fatalf("the added approver decides: %v", err)
	}
	if _, ok, err := s.ApprovalEscalate(ctx(t), core.ApprovalEscalateParams{ID: a.ID, Fire: func(a *approvals.Approval) *core.Escalation {
		n := a.Clone()
		n.Escalated++
		return &core.Escalation{Approval: n}
	}}); ok || err != nil {
		t.Fatalf("a decided approval escalated: %v, %v", ok, err)
	}
	if _, _, err := fireAt(t, s, "ap-nope", t0); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("unknown approval: %v", err)
	}
}

// testDecisionUpdatesEveryCard: a decision updates the card in the
// request's thread and in every thread the card was also sent to, on
// both write paths.
func testDecisionUpdatesEveryCard(t *testing.T, s core.Store) {
	a := climbing(t, s, "cards")
	if _, ok, err := fireAt(t, s, a.ID, t0.Add(10*time.Minute)); err != nil || !ok {
		t.Fatalf("fire: %v %v", ok, err)
	}
	if _, err := decideAs(t, s, a.ID, approve("console:bob")); err != nil {
		t.Fatal(err)
	}
	var threads []string
	for _, d := range outboxOfKind(t, s, core.KindCardUpdate, a.ID) {
		threads = append(threads, d.Thread.String())
	}
	slices.Sort(threads)
	want := []string{a.Thread, "console:dm-" + a.ID}
	slices.Sort(want)
	if !slices.Equal(threads, want) {
		t.Fatalf("card updates went to %v, want %v", threads, want)
	}
}

// testApprovalPendingStats: pending approvals per risk with the oldest.
func testApprovalPendingStats(t *testing.T, s core.Store) {
	if st, err := s.ApprovalPendingStats(ctx(t)); err != nil || len(st) != 0 {
		t.Fatalf("empty store: %+v, %v", st, err)
	}
	at := func(d time.Duration, risk approvals.Risk) func(*approvals.Approval) {
		return func(a *approvals.Approval) { a.CreatedAt, a.Risk = t0.Add(d), risk }
	}
	suspendedWith(t, s, thread("stats-1"), []string{"console:bob"}, 1, at(time.Minute, approvals.RiskHighImpact))
	suspendedWith(t, s, thread("stats-2"), []string{"console:bob"}, 1, at(-time.Minute, approvals.RiskHighImpact))
	suspendedWith(t, s, thread("stats-3"), []string{"console:bob"}, 1, at(0, approvals.RiskExternal))
	done := suspendedWith(t, s, thread("stats-4"), []string{"console:bob"}, 1, at(-time.Hour, approvals.RiskExternal))
	if _, err := decideAs(t, s, done.ID, approve("console:bob")); err != nil {
		t.Fatal(err)
	}
	st, err := s.ApprovalPendingStats(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	want := []core.PendingStat{{Risk: approvals.RiskExternal, Count: 1, Oldest: t0}, {Risk: approvals.RiskHighImpact, Count: 2, Oldest: t0.Add(-time.Minute)}}
	if len(st) != 2 || st[0].Risk != want[0].Risk || st[0].Count != 1 || !st[0].Oldest.Equal(want[0].Oldest) ||
		st[1].Risk != want[1].Risk || st[1].Count != 2 || !st[1].Oldest.Equal(want[1].Oldest) {
		t.Fatalf("stats = %+v, want %+v", st, want)
	}
}

// testTaskGrantKeepsItsRun: a task grant is stored with its run and
// its bound; a session grant with "for" keeps the shorter end.
func testTaskGrantKeepsItsRun(t *testing.T, s core.Store) {
	external := func(a *approvals.Approval) { a.Risk, a.Tool = approvals.RiskExternal, newID("tool") }
	a := suspendedWith(t, s, thread("grant-task"), []string{"console:bob"}, 1, external)
	r := approve("console:bob")
	r.Scope = approvals.ScopeTask
	if _, err := decideAs(t, s, a.ID, r); err != nil {
		t.Fatal(err)
	}
	gs, _, err := s.GrantList(ctx(t), approvals.GrantListParams{Tool: a.Tool, ActiveAt: t0.Add(2 * time.Minute)})
	if err != nil || len(gs) != 1 || gs[0].Scope != approvals.ScopeTask || gs[0].RunID != a.RunID || gs[0].ExpiresAt == nil {
		t.Fatalf("task grant = %+v, %v", gs, err)
	}
	b := suspendedWith(t, s, thread("grant-for"), []string{"console:bob"}, 1, external)
	r.Scope, r.For = approvals.ScopeSession, 5*time.Minute
	if _, err := decideAs(t, s, b.ID, r); err != nil {
		t.Fatal(err)
	}
	if gs, _, _ := s.GrantList(ctx(t), approvals.GrantListParams{Tool: b.Tool, ActiveAt: t0.Add(6 * time.Minute)}); len(gs) != 0 {
		t.Fatalf("a session grant for 5m is active after 5m: %+v", gs)
	}
	if gs, _, _ := s.GrantList(ctx(t), approvals.GrantListParams{Tool: b.Tool, ActiveAt: t0.Add(5 * time.Minute)}); len(gs) != 1 || gs[0].RunID != "" {
		t.Fatalf("a session grant for 5m within its 5m: %+v", gs)
	}
}
