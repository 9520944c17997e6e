package engine

import (
	"context"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/api"
	"github.com/opsgate/opsgate/internal/fakellm"
)

// TestAgentAttendanceAcrossReplicas: replica A serves the app's event
// stream of an Agent API session (its api.Attendance holds the session);
// replica B claims and executes the turn. B's gate asks its own
// Attendance, which reads A's hold from the shared store: the approval
// waits instead of being denied as one nobody can answer. Once A's stream
// closed, B sees nobody and the wait can be released (what the API's drain
// does), and the turn goes on without the call.
func TestAgentAttendanceAcrossReplicas(t *testing.T) {
	t.Parallel()
	b := backends[1] // two processes on one database: Postgres
	sc := llmServer().Script(t)
	var att attendanceFunc
	h := setup(t, b, withAgent(agentModel(t, sc.OpenAIURL()), func(o *Options) {
		if att != nil {
			o.AgentAttendance = att
		}
	}))
	// Replica A only serves the stream here: its engine stops, so B is
	// the one that claims the turn.
	h.quiesce()
	attA := api.NewSharedAttendance(api.AttendanceOptions{Store: h.store.(api.AttendanceStore), Replica: "a", Renew: time.Second})
	s2, err := b.open(context.Background(), h.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s2.Close() })
	attB := api.NewSharedAttendance(api.AttendanceOptions{Store: s2.(api.AttendanceStore), Replica: "b", Renew: time.Second})
	att = attB.Attended
	e2 := h.newEngine(s2)
	stop2 := h.runEngine(e2)
	t.Cleanup(stop2)

	ctx := context.Background()
	thread := core.Thread{Channel: core.AgentSessionChannel, Key: "ses-attend"}
	releaseA := attA.Hold(ctx, thread.Key)
	sc.Push(call("deploy", `{"service":"api","version":"7","reason":"asked"}`), fakellm.Say("Not deployed."))
	rc, err := e2.StartAgentTurn(ctx, AgentTurn{Thread: thread, Actor: core.Actor{ID: "api:app"}, Text: "ship api 7", Channel: core.AgentSessionChannel})
	if err != nil {
		t.Fatal(err)
	}
	run := h.waitRun(rc.RunID, core.RunWaitingApproval, core.RunSucceeded, core.RunFailed)
	if run.Status != core.RunWaitingApproval {
		t.Fatalf("turn executed on replica b while replica a holds its stream: %s, want waiting_approval (the ask denied as unattended)", run.Status)
	}
	items, _, err := h.store.ApprovalList(ctx, approvals.ApprovalListParams{RunID: rc.RunID, Status: approvals.StatusPending, Limit: 10})
	if err != nil || len(items) != 1 {
		t.Fatalf("pending approvals of the turn: %v %v", items, err)
	}
	// A's stream closes: its hold is gone from the store, so B (and A)
	// see nobody, and the wait is released as one nobody can answer.
	if !releaseA() {
		t.Error("a's only stream released: not reported last")
	}
	if attB.Attended(thread) || attA.Attended(thread) {
		t.Fatal("attended after the only stream closed")
	}
	if err := e2.ReleaseAgentApprovals(ctx, rc.RunID, "the app's event stream closed"); err != nil {
		t.Fatal(err)
	}
	run = h.waitRun(rc.RunID, core.RunSucceeded, core.RunFailed)
	if run.Status != core.RunSucceeded || len(h.fx.deploy.callsFor(rc.RunID)) != 0 {
		t.Fatalf("after the release: run %s, deploy called %d times", run.Status, len(h.fx.deploy.callsFor(rc.RunID)))
	}

	// Nobody holds the session now: B's next ask is denied at once.
	sc.Push(call("deploy", `{"service":"api","version":"8","reason":"asked"}`), fakellm.Say("Could not."))
	rc2, err := e2.StartAgentTurn(ctx, AgentTurn{Thread: thread, Actor: core.Actor{ID: "api:app"}, Text: "ship api 8", Channel: core.AgentSessionChannel})
	if err != nil {
		t.Fatal(err)
	}
	if run := h.waitRun(rc2.RunID, core.RunWaitingApproval, core.RunSucceeded, core.RunFailed); run.Status != core.RunSucceeded {
		t.Fatalf("unattended turn: %s, want succeeded with the call denied", run.Status)
	}
}

// attendanceFunc adapts a func to Options.AgentAttendance.
type attendanceFunc func(core.Thread) bool

// Attended implements Options.AgentAttendance.
func (f attendanceFunc) Attended(t core.Thread) bool { return f(t) }
