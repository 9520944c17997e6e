package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// The scale rule (index 6 of the fixture's policy) with the contract's
// ladder, a leads group, and direct messages on the console for alice
// and the lead.
var testLadder = []approvals.Step{
	{After: 10 * time.Minute, Remind: true},
	{After: 30 * time.Minute, AddApprovers: []string{"group:leads"}},
	{After: 2 * time.Hour, Outcome: approvals.TerminalDeny},
}

func withLadder(ladder []approvals.Step) func(*Options) {
	return func(o *Options) {
		o.Policy.Rules[6].Escalation = ladder
		o.Groups["leads"] = []string{"console:lead"}
		o.Direct = func(id string) (core.Thread, bool) {
			if user, ok := strings.CutPrefix(id, "console:"); ok && (user == "alice" || user == "lead") {
				return core.Thread{Channel: "console", Key: "dm-" + user}, true
			}
			return core.Thread{}, false
		}
	}
}

// escalations lists the approval.escalated entries of a run's approval,
// by step kind.
func (h *harness) escalations(approvalID string) []string {
	h.t.Helper()
	var kinds []string
	for _, e := range h.auditKinds(approvals.AuditListParams{ApprovalID: approvalID, Kind: string(approvals.AuditApprovalEscalated)}) {
		var d struct{ Kind string }
		if err := json.Unmarshal(e.Detail, &d); err != nil {
			h.t.Fatal(err)
		}
		kinds = append(kinds, d.Kind)
	}
	return kinds
}

// waitEscalations waits until approvalID's ladder fired n steps.
func (h *harness) waitEscalations(approvalID string, n int) []string {
	h.t.Helper()
	var kinds []string
	waitFor(h.t, fmt.Sprintf("%d escalation steps of %s", n, approvalID), func() bool {
		kinds = h.escalations(approvalID)
		return len(kinds) >= n
	})
	return kinds
}

// pendingIn lists the pending outbox messages to thread.
func (h *harness) pendingIn(thread string) []*core.Delivery {
	h.t.Helper()
	items, _, err := h.store.OutboxList(context.Background(), core.OutboxListParams{Status: core.DeliveryPending, Limit: 1000})
	if err != nil {
		h.t.Fatal(err)
	}
	var out []*core.Delivery
	for _, d := range items {
		if d.Thread.String() == thread {
			out = append(out, d)
		}
	}
	return out
}

// An escalation ladder across a restart: the reminder fires before it,
// add_approvers after it (with the time of both passed while the engine
// was down), the terminal deny last — each exactly once — and the card
// says what happens next at every point.
func TestEscalationLadderAcrossRestart(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b, withLadder(testLadder))
		rc := h.send("console:req", "console:t1", "scale api 3")
		a := h.waitApproval(rc.RunID)
		if !a.ExpiresAt.Equal(a.CreatedAt.Add(2*time.Hour)) || a.EscalationDue == nil {
			t.Fatalf("approval end %v (want the deny at 2h), first step due %v", a.ExpiresAt.Sub(a.CreatedAt), a.EscalationDue)
		}
		if c := h.eng.Card(a); !strings.Contains(c.Next, "reminded at") || !strings.Contains(c.PlainText(), "Next: the approvers are reminded at") {
			t.Fatalf("card before the first step: next %q", c.Next)
		}

		h.clk.Advance(11 * time.Minute)
		if kinds := h.waitEscalations(a.ID, 1); !slices.Equal(kinds, []string{approvals.StepRemind}) {
			t.Fatalf("steps after 11m: %v", kinds)
		}
		var reminders []string
		for _, d := range h.pendingIn("console:t1") {
			if d.Kind == core.KindReply {
				reminders = append(reminders, d.Text)
			}
		}
		if len(reminders) != 1 || !containsAll(reminders[0], "Reminder", a.ID, "group:sre", "Next: group:leads may also decide from") {
			t.Fatalf("thread reminder: %q", reminders)
		}
		if dm := h.pendingIn("console:dm-alice"); len(dm) != 1 || dm[0].Kind != core.KindReply || !containsAll(dm[0].Text, "waits for you", a.ID) {
			t.Fatalf("alice's direct reminder: %+v", dm)
		}

		// Down across the add_approvers step: it fires once after the
		// restart, never twice.
		h.quiesce()
		h.clk.Advance(25 * time.Minute)
		h.resume()
		if kinds := h.waitEscalations(a.ID, 2); !slices.Equal(kinds, []string{approvals.StepRemind, approvals.StepAddApprovers}) {
			t.Fatalf("steps after the restart: %v", kinds)
		}
		got, err := h.store.ApprovalGet(context.Background(), a.ID)
		if err != nil || !slices.Contains(got.Eligible, "console:lead") || !slices.Equal(got.CardThreads, []string{"console:dm-lead"}) {
			t.Fatalf("after add_approvers: %+v, %v", got, err)
		}
		if dm := h.pendingIn("console:dm-lead"); len(dm) != 1 || dm[0].Kind != core.KindCard || dm[0].ApprovalID != a.ID {
			t.Fatalf("the lead's card: %+v", dm)
		}
		if c := h.eng.Card(got); !strings.Contains(c.Next, "denied by default at") || !slices.Contains(c.Approvers, "group:leads") {
			t.Fatalf("card after add_approvers: next %q approvers %v", c.Next, c.Approvers)
		}

		// Another restart past the end: the default denies, once.
		h.quiesce()
		h.clk.Advance(2 * time.Hour)
		h.resume()
		run := h.waitRun(rc.RunID, core.RunRejected, core.RunFailed, core.RunSucceeded)
		if run.Status != core.RunRejected {
			t.Fatalf("run after the terminal step: %s %s", run.Status, run.ErrorMessage)
		}
		h.quiesce()
		if kinds := h.escalations(a.ID); !slices.Equal(kinds, []string{approvals.StepRemind, approvals.StepAddApprovers, approvals.StepDeny}) {
			t.Fatalf("every step once: %v", kinds)
		}
		got, _ = h.store.ApprovalGet(context.Background(), a.ID)
		if got.Status != approvals.StatusRejected || !got.Decisions[len(got.Decisions)-1].ByEscalation() {
			t.Fatalf("approval after the default: %s %+v", got.Status, got.Decisions)
		}
		// The decision updates the card in the thread and in the lead's DM.
		var updated []string
		for _, th := range []string{"console:t1", "console:dm-lead"} {
			for _, d := range h.pendingIn(th) {
				if d.Kind == core.KindCardUpdate && d.ApprovalID == a.ID {
					updated = append(updated, th)
				}
			}
		}
		if len(updated) != 2 {
			t.Fatalf("card updates in %v, want the thread and the lead's DM", updated)
		}
		if calls := h.fx.scale.callsFor(rc.RunID); len(calls) != 0 {
			t.Fatalf("a denied call ran: %+v", calls)
		}
	})
}

// Two replicas sweep the same approvals: every step fires exactly once.
func TestEscalationTwoReplicasFireEachStepOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ladder := []approvals.Step{{After: 10 * time.Minute, Remind: true}, {After: 20 * time.Minute, Remind: true},
			{After: 30 * time.Minute, AddApprovers: []string{"group:leads"}}}
		h := setup(t, b, withLadder(ladder))
		_, stop2 := h.replica()

		const n = 12
		var ids []string
		for i := range n {
			rc := h.send("console:req", fmt.Sprintf("console:rep%d", i), fmt.Sprintf("scale svc-%d %d", i, i))
			ids = append(ids, h.waitApproval(rc.RunID).ID)
		}
		h.clk.Advance(31 * time.Minute)
		for _, id := range ids {
			h.waitEscalations(id, 3)
		}
		h.quiesce()
		stop2()
		want := []string{approvals.StepRemind, approvals.StepRemind, approvals.StepAddApprovers}
		for _, id := range ids {
			if kinds := h.escalations(id); !slices.Equal(kinds, want) {
				t.Fatalf("approval %s: steps %v, want %v", id, kinds, want)
			}
		}
		if dm := h.pendingIn("console:dm-lead"); len(dm) != n {
			t.Fatalf("the lead got %d cards for %d approvals", len(dm), n)
		}
		if dm := h.pendingIn("console:dm-alice"); len(dm) != 2*n {
			t.Fatalf("alice got %d reminders for %d approvals of two reminders each", len(dm), n)
		}
	})
}

// Each step's effect on deciding: an approver escalation added decides
// (and is judged again at dispatch); an "approve" default runs the call.
func TestEscalationEffects(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		t.Run("AddedApproverDecides", func(t *testing.T) {
			h := setup(t, b, withLadder(testLadder))
			rc := h.send("console:req", "console:t1", "scale api 3")
			a := h.waitApproval(rc.RunID)
			if _, err := h.decide("console:lead", a.ID, "approve"); decisionCode(t, err).Code != core.DecisionNotApprover {
				t.Fatalf("the lead decided before the step: %v", err)
			}
			h.clk.Advance(31 * time.Minute)
			h.waitEscalations(a.ID, 2)
			if _, err := h.decide("console:lead", a.ID, "approve", func(d *core.Decision) { d.Scope = approvals.ScopeSession }); err == nil {
				t.Fatal("an escalated approver saved a session grant")
			}
			if _, err := h.decide("console:lead", a.ID, "approve"); err != nil {
				t.Fatalf("the escalated lead's approval: %v", err)
			}
			h.waitRun(rc.RunID, core.RunSucceeded)
			if calls := h.fx.scale.callsFor(rc.RunID); len(calls) != 1 {
				t.Fatalf("dispatches: %d", len(calls))
			}
		})
		t.Run("ApproveDefaultRuns", func(t *testing.T) {
			h := setup(t, b, withLadder([]approvals.Step{{After: 5 * time.Minute, Outcome: approvals.TerminalApprove}}))
			rc := h.send("console:req", "console:t1", "scale api 3")
			a := h.waitApproval(rc.RunID)
			h.clk.Advance(6 * time.Minute)
			h.waitRun(rc.RunID, core.RunSucceeded)
			if kinds := h.escalations(a.ID); !slices.Equal(kinds, []string{approvals.StepApprove}) {
				t.Fatalf("steps: %v", kinds)
			}
		})
		t.Run("NoLadderExpires", func(t *testing.T) {
			h := setup(t, b)
			rc := h.send("console:req", "console:t1", "scale api 3")
			a := h.waitApproval(rc.RunID)
			if a.Ladder != nil || h.eng.Card(a).Next != "" {
				t.Fatalf("an approval without a ladder: %+v", a.Ladder)
			}
			h.clk.Advance(61 * time.Minute)
			h.waitRun(rc.RunID, core.RunRejected, core.RunFailed)
			got, _ := h.store.ApprovalGet(context.Background(), a.ID)
			if got.Status != approvals.StatusExpired || len(h.escalations(a.ID)) != 0 {
				t.Fatalf("status %s", got.Status)
			}
		})
	})
}

// The backlog and escalation metrics: pending by risk, the oldest's age,
// steps fired, request → decision latency.
func TestApprovalMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	h := setup(t, backends[0], func(o *Options) {
		withLadder([]approvals.Step{{After: 10 * time.Minute, Remind: true}})(o)
		o.Registerer = reg
	})
	first := h.waitApproval(h.send("console:req", "console:t1", "scale api 3").RunID)
	h.waitApproval(h.send("console:req", "console:t2", "deploy api 1.0").RunID)
	h.clk.Advance(11 * time.Minute)
	h.waitEscalations(first.ID, 1)
	// The step is counted just after its store write: wait for the count,
	// not only for the stored step.
	var m map[string]float64
	waitFor(t, "the reminder counted", func() bool {
		m = gather(t, reg)
		return m[`opsgate_approval_escalations_total{step="remind"}`] >= 1
	})
	if got := m[`opsgate_approvals_pending{risk="external"}`]; got != 1 {
		t.Errorf("pending external = %v", got)
	}
	if got := m[`opsgate_approvals_pending{risk="high_impact"}`]; got != 1 {
		t.Errorf("pending high_impact = %v", got)
	}
	if got := m["opsgate_approval_oldest_pending_seconds"]; got < 11*60 || got > 12*60 {
		t.Errorf("oldest pending = %vs, want about 11 minutes", got)
	}
	if got := m[`opsgate_approval_escalations_total{step="remind"}`]; got != 1 {
		t.Errorf("reminders = %v", got)
	}
	if _, err := h.decide("console:alice", first.ID, "approve"); err != nil {
		t.Fatal(err)
	}
	m = gather(t, reg)
	if m["opsgate_approval_decision_seconds_count"] != 1 || m["opsgate_approval_decision_seconds_sum"] < 11*60 {
		t.Errorf("decision latency: count %v sum %v", m["opsgate_approval_decision_seconds_count"], m["opsgate_approval_decision_seconds_sum"])
	}
	if got := m[`opsgate_approvals_pending{risk="external"}`]; got != 0 {
		t.Errorf("pending external after the decision = %v", got)
	}
}

// gather flattens reg's series into "name{labels}" → value (histograms
// as _count and _sum).
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			if len(labels) > 0 {
				name += "{" + strings.Join(labels, ",") + "}"
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[name] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[name] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[name+"_count"] = float64(m.GetHistogram().GetSampleCount())
				out[name+"_sum"] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

// Narrower grants: a task grant covers the run's later steps and never the
// next run; a session grant "for" a while ends then; a revoked grant
// covers nothing.
func TestNarrowerGrants(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		twice := func(o *Options) {
			o.Flows = append(o.Flows, Flow{Name: "scale2", Command: "scale2 {service}", Steps: []FlowStep{
				{Tool: "scale", Args: map[string]any{"service": "{{.service}}", "replicas": "1", "env": "staging"}},
				{Tool: "scale", Args: map[string]any{"service": "{{.service}}", "replicas": "2", "env": "staging"}},
			}})
		}
		t.Run("TaskGrantNotReachingNextRun", func(t *testing.T) {
			h := setup(t, b, twice)
			rc := h.send("console:req", "console:t1", "scale2 api")
			a := h.waitApproval(rc.RunID)
			offers := h.eng.GrantOffers(a)
			if len(offers) != 3 || offers[0].Scope != approvals.ScopeTask || offers[0].Grant == nil || offers[0].Grant.RunID != rc.RunID {
				t.Fatalf("offers: %+v", offers)
			}
			if _, err := h.decide("console:alice", a.ID, "approve", func(d *core.Decision) { d.Scope = approvals.ScopeTask }); err != nil {
				t.Fatal(err)
			}
			h.waitRun(rc.RunID, core.RunSucceeded)
			if calls := h.fx.scale.callsFor(rc.RunID); len(calls) != 2 {
				t.Fatalf("the task grant's run dispatched %d calls", len(calls))
			}
			if es := h.auditKinds(approvals.AuditListParams{RunID: rc.RunID, Kind: string(approvals.AuditGrantApplied)}); len(es) != 1 {
				t.Fatalf("grant.applied entries: %d", len(es))
			}
			// Same requester, same thread, same rule: the next run asks.
			rc2 := h.send("console:req", "console:t1", "scale2 api")
			h.waitApproval(rc2.RunID)
		})
		t.Run("ForEnds", func(t *testing.T) {
			h := setup(t, b)
			rc := h.send("console:req", "console:t1", "scale api 1")
			a := h.waitApproval(rc.RunID)
			if _, err := h.decide("console:alice", a.ID, "approve", func(d *core.Decision) {
				d.Scope, d.For = approvals.ScopeSession, 2*time.Hour
			}); decisionCode(t, err).Code != core.DecisionBadRequest {
				t.Fatalf("a session grant for longer than session_ttl: %v", err)
			}
			if _, err := h.decide("console:alice", a.ID, "approve", func(d *core.Decision) {
				d.Scope, d.For = approvals.ScopeSession, 5*time.Minute
			}); err != nil {
				t.Fatal(err)
			}
			h.waitRun(rc.RunID, core.RunSucceeded)
			rc2 := h.send("console:req", "console:t1", "scale api 2")
			h.waitRun(rc2.RunID, core.RunSucceeded)
			h.clk.Advance(6 * time.Minute)
			rc3 := h.send("console:req", "console:t1", "scale api 3")
			h.waitApproval(rc3.RunID)
		})
		t.Run("RevokeEnds", func(t *testing.T) {
			h := setup(t, b)
			rc := h.send("console:req", "console:t1", "scale api 1")
			a := h.waitApproval(rc.RunID)
			if _, err := h.decide("console:alice", a.ID, "approve", func(d *core.Decision) { d.Scope = approvals.ScopeForever }); err != nil {
				t.Fatal(err)
			}
			h.waitRun(rc.RunID, core.RunSucceeded)
			g, err := h.eng.RevokeGrant(context.Background(), approvals.GrantID(a.ID), core.Actor{ID: "console:bob"})
			if err != nil || g.RevokedBy != "console:bob" {
				t.Fatalf("revoke: %+v %v", g, err)
			}
			rc2 := h.send("console:other", "console:t9", "scale api 1")
			h.waitApproval(rc2.RunID)
		})
	})
}

// The sweep's many steps due at once: a burst after an outage fires every
// one, in bounded passes, and stops.
func TestEscalateDueDrainsABurst(t *testing.T) {
	t.Parallel()
	h := setup(t, backends[0], withLadder([]approvals.Step{{After: time.Minute, Remind: true}, {After: 2 * time.Minute, Remind: true}}))
	h.quiesce()
	ctx := context.Background()
	var ids []string
	for i := range 3 {
		rc, err := h.eng.HandleEvent(ctx, h.event("console:req", fmt.Sprintf("console:burst%d", i), "scale api 1"))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rc.RunID)
	}
	h.resume()
	for _, id := range ids {
		h.waitApproval(id)
	}
	h.quiesce()
	h.clk.Advance(30 * time.Minute)
	n, err := h.eng.EscalateDue(ctx)
	if err != nil || n != 6 {
		t.Fatalf("EscalateDue fired %d, %v; want both reminders of 3 approvals", n, err)
	}
	if n, err := h.eng.EscalateDue(ctx); err != nil || n != 0 {
		t.Fatalf("a second pass fired %d, %v", n, err)
	}
}
