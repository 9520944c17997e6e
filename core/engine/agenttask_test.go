package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/agenttask"
)

// withTriage adds the flow "triage {service}": an agent task (with the
// status, deploy and delete_db tools, two assets and an output schema),
// then a status call.
func withTriage(t testing.TB, more ...func(*Options)) func(*Options) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.bin")
	data := make([]byte, agenttask.MaxAssetRead+10)
	for i := range data {
		data[i] = byte(i % 251)
	}
	if err := os.WriteFile(big, data, 0o600); err != nil {
		t.Fatal(err)
	}
	notes := filepath.Join(dir, "notes.md")
	if err := os.WriteFile(notes, []byte("# runbook\nrestart it ✓"), 0o600); err != nil {
		t.Fatal(err)
	}
	return func(o *Options) {
		o.Flows = append(o.Flows, Flow{Name: "triage", Command: "triage {service}", Steps: []FlowStep{
			{Name: "investigate", AgentTask: &AgentTask{
				Instructions: "Find out why {{.service}} is slow",
				Skills:       []string{"incident-triage"},
				Tools:        []string{"status", "deploy", "delete_db"},
				Assets: []core.AgentTaskAsset{
					{ID: "context", Text: "service={{.service}}"},
					{ID: "runbook", Path: notes, MediaType: "text/markdown"},
					{ID: "dump", Path: big},
				},
				OutputSchema: map[string]any{"type": "object", "required": []any{"summary"},
					"properties": map[string]any{"summary": map[string]any{"type": "string", "minLength": 1}}},
			}},
			{Tool: "status", Args: map[string]any{"service": "{{.service}}"}},
		}})
		for _, m := range more {
			m(o)
		}
	}
}

func agentCode(t *testing.T, err error) core.AgentErrorCode {
	t.Helper()
	var ae *core.AgentError
	if !errors.As(err, &ae) {
		t.Fatalf("want *core.AgentError, got %v", err)
	}
	return ae.Code
}

// pendingCall waits for the run to wait for its agent and returns the call.
func (h *harness) pendingCall(runID string) *core.AgentCall {
	h.t.Helper()
	h.waitRun(runID, core.RunWaitingInput)
	c, err := h.eng.store.AgentCallForStep(context.Background(), runID, 0)
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

var agent = core.Actor{ID: "agent:claude"}

func TestAgentTaskRoundTrip(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b, withTriage(t))
		ctx := context.Background()
		rc := h.send("console:req", "console:t1", "triage api")
		c := h.pendingCall(rc.RunID)
		if c.Status != core.AgentCallPending || c.Task.Instructions != "Find out why api is slow" || c.Task.Stage != "investigate" ||
			len(c.Task.Tools) != 3 || c.Task.Tools[1].ID != "deploy" || !strings.Contains(string(c.Task.Tools[1].InputSchema), "version") {
			t.Fatalf("task: %+v", c)
		}
		run, _ := h.store.RunGet(ctx, rc.RunID)
		if run.Steps[0].Status != core.StepWaitingAgent || run.Steps[0].Tool != core.AgentTaskStep {
			t.Fatalf("step: %+v", run.Steps)
		}
		ref := AgentRef{RunID: rc.RunID, CallID: c.ID}

		// Work before a claim is refused; a wrong run is unknown.
		if _, err := h.eng.AgentCallTool(ctx, agent, ref, "c1", "t0", "status", nil); agentCode(t, err) != core.AgentNotClaimed {
			t.Fatal(err)
		}
		if _, err := h.eng.AgentCallClaim(ctx, agent, AgentRef{RunID: "nope", CallID: c.ID}, "c1"); agentCode(t, err) != core.AgentNotFound {
			t.Fatal(err)
		}
		got, err := h.eng.AgentCallClaim(ctx, agent, ref, "c1")
		if err != nil || got.Status != core.AgentCallClaimed || got.ClaimedBy != agent.ID {
			t.Fatalf("claim: %+v %v", got, err)
		}
		// The same claim reconnecting resumes; any other conflicts.
		if again, err := h.eng.AgentCallClaim(ctx, agent, ref, "c1"); err != nil || again.ClaimID != "c1" {
			t.Fatalf("resume: %+v %v", again, err)
		}
		if _, err := h.eng.AgentCallClaim(ctx, agent, ref, "c2"); agentCode(t, err) != core.AgentClaimConflict {
			t.Fatal(err)
		}
		if _, err := h.eng.AgentCallClaim(ctx, core.Actor{ID: "agent:other"}, ref, "c1"); agentCode(t, err) != core.AgentClaimConflict {
			t.Fatal(err)
		}
		if _, err := h.eng.AgentCallTool(ctx, agent, ref, "c2", "t0", "status", nil); agentCode(t, err) != core.AgentNotOwner {
			t.Fatal(err)
		}

		// An allowed tool runs once; the same toolCallId returns the receipt.
		in := json.RawMessage(`{"service":"api"}`)
		r1, err := h.eng.AgentCallTool(ctx, agent, ref, "c1", "t1", "status", in)
		if err != nil || r1.Status != core.ReceiptSucceeded || !strings.Contains(r1.Output, "status ran") {
			t.Fatalf("status: %+v %v", r1, err)
		}
		r1b, err := h.eng.AgentCallTool(ctx, agent, ref, "c1", "t1", "status", json.RawMessage(` { "service" : "api" } `))
		if err != nil || r1b.Output != r1.Output || len(h.fx.status.callsFor(rc.RunID)) != 1 {
			t.Fatalf("kept receipt: %+v %v (%d calls)", r1b, err, len(h.fx.status.callsFor(rc.RunID)))
		}
		if calls := h.fx.status.callsFor(rc.RunID); calls[0].IdempotencyKey != rc.RunID+"/0/t1" {
			t.Fatalf("key %q", calls[0].IdempotencyKey)
		}
		if _, err := h.eng.AgentCallTool(ctx, agent, ref, "c1", "t1", "status", json.RawMessage(`{"service":"db"}`)); agentCode(t, err) != core.AgentToolConflict {
			t.Fatal(err)
		}
		if _, err := h.eng.AgentCallTool(ctx, agent, ref, "c1", "t9", "restart", in); agentCode(t, err) != core.AgentUnknownTool {
			t.Fatal(err)
		}
		if _, err := h.eng.AgentCallTool(ctx, agent, ref, "c1", "t9", "deploy", in); agentCode(t, err) != core.AgentInvalidInput {
			t.Fatal(err)
		}
		if _, err := h.eng.AgentCallTool(ctx, agent, ref, "c1", "t9", "status", json.RawMessage(`[1]`)); agentCode(t, err) != core.AgentInvalidInput {
			t.Fatal(err)
		}

		// Deny: recorded, never run.
		rd, err := h.eng.AgentCallTool(ctx, agent, ref, "c1", "t3", "delete_db", json.RawMessage(`{"name":"x"}`))
		if err != nil || rd.Status != core.ReceiptDenied || h.fx.drop.total() != 0 {
			t.Fatalf("deny: %+v %v", rd, err)
		}

		// Ask: a pending receipt at once, an approval people decide.
		dep := json.RawMessage(`{"service":"api","version":"2"}`)
		r2, err := h.eng.AgentCallTool(ctx, agent, ref, "c1", "t2", "deploy", dep)
		if err != nil || r2.Status != core.ReceiptPendingApproval || r2.ApprovalID == "" {
			t.Fatalf("ask: %+v %v", r2, err)
		}
		a, err := h.store.ApprovalGet(ctx, r2.ApprovalID)
		if err != nil || a.Requester != agent.ID || a.RunID != rc.RunID || a.Status != approvals.StatusPending || a.ProposedArgs["env"] != "staging" {
			t.Fatalf("approval: %+v %v", a, err)
		}
		if _, err := h.decide(agent.ID, a.ID, "approve"); decisionCode(t, err).Code != core.DecisionHumanRequired {
			t.Fatal(err)
		}
		if _, err := h.eng.AgentCallTool(ctx, agent, ref, "c1", "t4", "status", in); agentCode(t, err) != core.AgentToolInFlight {
			t.Fatal(err)
		}
		if _, err := h.eng.AgentCallComplete(ctx, agent, ref, "c1", json.RawMessage(`{"summary":"x"}`)); agentCode(t, err) != core.AgentToolInFlight {
			t.Fatal(err)
		}
		if p, err := h.eng.AgentCallTool(ctx, agent, ref, "c1", "t2", "deploy", dep); err != nil || p.Status != core.ReceiptPendingApproval || h.fx.deploy.total() != 0 {
			t.Fatalf("poll pending: %+v %v", p, err)
		}
		if _, err := h.decide("console:alice", a.ID, "approve"); err != nil {
			t.Fatal(err)
		}
		r2b, err := h.eng.AgentCallTool(ctx, agent, ref, "c1", "t2", "deploy", dep)
		if err != nil || r2b.Status != core.ReceiptSucceeded || h.fx.deploy.total() != 1 {
			t.Fatalf("after approval: %+v %v", r2b, err)
		}
		if _, err := h.eng.AgentCallTool(ctx, agent, ref, "c1", "t2", "deploy", dep); err != nil || h.fx.deploy.total() != 1 {
			t.Fatalf("poll again dispatched twice: %v", err)
		}
		if st := h.waitRun(rc.RunID, core.RunWaitingInput); st.Status != core.RunWaitingInput {
			t.Fatal(st.Status)
		}

		// Assets: by id, bounded, with their encoding.
		as, err := h.eng.AgentCallAsset(ctx, agent, ref, "c1", "context", 0)
		if err != nil || as.Content != "service=api" || as.Encoding != "utf-8" || as.NextOffset != -1 {
			t.Fatalf("context asset: %+v %v", as, err)
		}
		as, err = h.eng.AgentCallAsset(ctx, agent, ref, "c1", "runbook", 0)
		if err != nil || !strings.Contains(as.Content, "✓") || as.MediaType != "text/markdown" {
			t.Fatalf("runbook: %+v %v", as, err)
		}
		as, err = h.eng.AgentCallAsset(ctx, agent, ref, "c1", "dump", 0)
		if err != nil || as.Encoding != "base64" || as.NextOffset != agenttask.MaxAssetRead || as.Size != agenttask.MaxAssetRead+10 {
			t.Fatalf("dump: %+v %v", as.NextOffset, err)
		}
		if as, err = h.eng.AgentCallAsset(ctx, agent, ref, "c1", "dump", as.NextOffset); err != nil || as.NextOffset != -1 || len(as.Content) != 16 {
			t.Fatalf("dump tail: %+v %v", as, err)
		}
		if _, err := h.eng.AgentCallAsset(ctx, agent, ref, "c1", "../etc/passwd", 0); agentCode(t, err) != core.AgentUnknownAsset {
			t.Fatal(err)
		}

		// The result must match the schema; then the step continues.
		if _, err := h.eng.AgentCallComplete(ctx, agent, ref, "c1", json.RawMessage(`{"summary":""}`)); agentCode(t, err) != core.AgentInvalidResult {
			t.Fatal(err)
		}
		if _, err := h.eng.AgentCallComplete(ctx, agent, ref, "c1", json.RawMessage(`not json`)); agentCode(t, err) != core.AgentInvalidResult {
			t.Fatal(err)
		}
		if _, err := h.eng.AgentCallComplete(ctx, agent, ref, "c2", json.RawMessage(`{"summary":"ok"}`)); agentCode(t, err) != core.AgentNotOwner {
			t.Fatal(err)
		}
		after, err := h.eng.AgentCallComplete(ctx, agent, ref, "c1", json.RawMessage(`{"summary": "GC pauses"}`))
		if err != nil || after.ID != rc.RunID {
			t.Fatalf("complete: %+v %v", after, err)
		}
		done := h.waitRun(rc.RunID, core.RunSucceeded)
		if done.Steps[0].Status != core.StepSucceeded || done.Steps[0].Output != `{"summary":"GC pauses"}` || done.Steps[1].Status != core.StepSucceeded {
			t.Fatalf("steps: %+v", done.Steps)
		}
		// Late work and results are refused.
		if _, err := h.eng.AgentCallComplete(ctx, agent, ref, "c1", json.RawMessage(`{"summary":"again"}`)); agentCode(t, err) != core.AgentNotCurrent {
			t.Fatal(err)
		}
		if _, err := h.eng.AgentCallTool(ctx, agent, ref, "c1", "t5", "status", in); agentCode(t, err) != core.AgentNotCurrent {
			t.Fatal(err)
		}
		kinds := map[string]bool{}
		for _, e := range h.auditKinds(approvals.AuditListParams{RunID: rc.RunID}) {
			kinds[string(e.Kind)] = true
		}
		for _, k := range []string{"agent_call.requested", "agent_call.claimed", "agent_call.completed", "approval.requested", "policy.denied"} {
			if !kinds[k] {
				t.Errorf("no %s audit entry: %v", k, kinds)
			}
		}
	})
}

func TestAgentTaskRejectedToolAndFail(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b, withTriage(t))
		ctx := context.Background()
		rc := h.send("console:req", "console:t1", "triage api")
		c := h.pendingCall(rc.RunID)
		ref := AgentRef{RunID: rc.RunID, CallID: c.ID}
		if _, err := h.eng.AgentCallClaim(ctx, agent, ref, "c1"); err != nil {
			t.Fatal(err)
		}
		dep := json.RawMessage(`{"service":"api","version":"2"}`)
		r, err := h.eng.AgentCallTool(ctx, agent, ref, "c1", "t1", "deploy", dep)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.decide("console:alice", r.ApprovalID, "reject", func(d *core.Decision) { d.Reason = "not now" }); err != nil {
			t.Fatal(err)
		}
		r, err = h.eng.AgentCallTool(ctx, agent, ref, "c1", "t1", "deploy", dep)
		if err != nil || r.Status != core.ReceiptRejected || r.Output != "not now" || h.fx.deploy.total() != 0 {
			t.Fatalf("rejected: %+v %v", r, err)
		}
		// A pending ask is withdrawn when the agent fails the task.
		r, err = h.eng.AgentCallTool(ctx, agent, ref, "c1", "t2", "deploy", dep)
		if err != nil || r.Status != core.ReceiptPendingApproval {
			t.Fatal(r, err)
		}
		if _, err := h.eng.AgentCallFail(ctx, agent, ref, "c1", ""); agentCode(t, err) != core.AgentBadRequest {
			t.Fatal(err)
		}
		if _, err := h.eng.AgentCallFail(ctx, agent, ref, "c1", "cannot reproduce"); err != nil {
			t.Fatal(err)
		}
		run := h.waitRun(rc.RunID, core.RunFailed)
		if run.ErrorCode != "agent_failed" || run.ErrorMessage != "cannot reproduce" {
			t.Fatalf("run: %+v", run)
		}
		if a, _ := h.store.ApprovalGet(ctx, r.ApprovalID); a.Status != approvals.StatusExpired {
			t.Fatalf("approval left %s", a.Status)
		}
	})
}

func TestAgentTaskCancelInvalidatesOwnership(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b, withTriage(t))
		ctx := context.Background()
		rc := h.send("console:req", "console:t1", "triage api")
		c := h.pendingCall(rc.RunID)
		ref := AgentRef{RunID: rc.RunID, CallID: c.ID}
		if _, err := h.eng.AgentCallClaim(ctx, agent, ref, "c1"); err != nil {
			t.Fatal(err)
		}
		r, err := h.eng.AgentCallTool(ctx, agent, ref, "c1", "t1", "deploy", json.RawMessage(`{"service":"api","version":"2"}`))
		if err != nil {
			t.Fatal(err)
		}
		run, err := h.eng.Cancel(ctx, rc.RunID, core.Actor{ID: "console:req"})
		if err != nil || run.Status != core.RunCancelled || run.Steps[0].Status != core.StepCancelled {
			t.Fatalf("cancel: %+v %v", run, err)
		}
		cur, _ := h.eng.store.AgentCallGet(ctx, c.ID)
		if cur.Status != core.AgentCallCancelled {
			t.Fatalf("call %s", cur.Status)
		}
		if _, err := h.eng.AgentCallComplete(ctx, agent, ref, "c1", json.RawMessage(`{"summary":"late"}`)); agentCode(t, err) != core.AgentCancelled {
			t.Fatal(err)
		}
		if _, err := h.eng.AgentCallTool(ctx, agent, ref, "c1", "t2", "status", json.RawMessage(`{"service":"api"}`)); agentCode(t, err) != core.AgentCancelled {
			t.Fatal(err)
		}
		if a, _ := h.store.ApprovalGet(ctx, r.ApprovalID); a.Status != approvals.StatusExpired {
			t.Fatalf("approval %s", a.Status)
		}
	})
}

// A restart interrupts claimed tasks (RUN_INTERRUPTED); pending ones wait
// on, and the next process can hand them out.
func TestAgentTaskRestart(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b, withTriage(t))
		ctx := context.Background()
		claimed := h.send("console:req", "console:t1", "triage api")
		pending := h.send("console:req", "console:t2", "triage db")
		c := h.pendingCall(claimed.RunID)
		p := h.pendingCall(pending.RunID)
		if _, err := h.eng.AgentCallClaim(ctx, agent, AgentRef{RunID: claimed.RunID, CallID: c.ID}, "c1"); err != nil {
			t.Fatal(err)
		}
		h.shutdown()
		h.start()
		run := h.waitRun(claimed.RunID, core.RunInterrupted)
		if run.ErrorCode != agenttask.CodeRunInterrupted || run.Steps[0].Status != core.StepInterrupted {
			t.Fatalf("run: %+v", run)
		}
		if _, err := h.eng.AgentCallClaim(ctx, agent, AgentRef{RunID: claimed.RunID, CallID: c.ID}, "c1"); agentCode(t, err) != core.AgentRunInterrupted {
			t.Fatal(err)
		}
		if got, err := h.eng.AgentCallClaim(ctx, agent, AgentRef{RunID: pending.RunID, CallID: p.ID}, "c9"); err != nil || got.Status != core.AgentCallClaimed {
			t.Fatalf("pending task after restart: %+v %v", got, err)
		}
	})
}

// A replica that dies (its lease lapses) loses the tasks it served: any
// other replica's sweep interrupts them, also with a tool in flight.
func TestAgentTaskReplicaLoss(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b, withTriage(t))
		ctx := context.Background()
		rc := h.send("console:req", "console:t1", "triage api")
		c := h.pendingCall(rc.RunID)
		// Another replica (never running its loop) serves the agent.
		other := h.newEngine(h.store)
		ref := AgentRef{RunID: rc.RunID, CallID: c.ID}
		if _, err := other.AgentCallClaim(ctx, agent, ref, "c1"); err != nil {
			t.Fatal(err)
		}
		gate := make(chan struct{})
		h.fx.status.mu.Lock()
		h.fx.status.gate = gate
		h.fx.status.mu.Unlock()
		done := make(chan error, 1)
		go func() {
			_, err := other.AgentCallTool(ctx, agent, ref, "c1", "t1", "status", json.RawMessage(`{"service":"api"}`))
			done <- err
		}()
		waitFor(t, "the dispatch", func() bool { return h.fx.status.total() == 1 })
		if st := h.waitRun(rc.RunID, core.RunWaitingInput); st.Status != core.RunWaitingInput {
			t.Fatal(st.Status)
		}
		h.clk.Advance(2 * time.Second) // past the other replica's lease
		run := h.waitRun(rc.RunID, core.RunInterrupted)
		if run.ErrorCode != agenttask.CodeRunInterrupted {
			t.Fatalf("run: %+v", run)
		}
		rs, _ := h.eng.store.AgentReceiptList(ctx, c.ID)
		if len(rs) != 1 || rs[0].Status != core.ReceiptInterrupted {
			t.Fatalf("receipts: %+v", rs)
		}
		close(gate)
		if err := <-done; err != nil {
			t.Fatalf("late dispatch result: %v", err)
		}
	})
}

func TestAgentTaskReceiptLimit(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b, withTriage(t))
		ctx := context.Background()
		rc := h.send("console:req", "console:t1", "triage api")
		c := h.pendingCall(rc.RunID)
		ref := AgentRef{RunID: rc.RunID, CallID: c.ID}
		if _, err := h.eng.AgentCallClaim(ctx, agent, ref, "c1"); err != nil {
			t.Fatal(err)
		}
		for i := range agenttask.MaxAgentReceipts {
			// Denied calls are receipts too, and cost no dispatch.
			if _, err := h.eng.AgentCallTool(ctx, agent, ref, "c1", fmt.Sprintf("t%d", i), "delete_db", json.RawMessage(`{"name":"x"}`)); err != nil {
				t.Fatal(i, err)
			}
		}
		if _, err := h.eng.AgentCallTool(ctx, agent, ref, "c1", "one-more", "status", json.RawMessage(`{"service":"api"}`)); agentCode(t, err) != core.AgentTooManyCalls {
			t.Fatal(err)
		}
		// A kept receipt is still returned.
		if r, err := h.eng.AgentCallTool(ctx, agent, ref, "c1", "t7", "delete_db", json.RawMessage(`{"name":"x"}`)); err != nil || r.Status != core.ReceiptDenied {
			t.Fatal(r, err)
		}
	})
}

func TestAgentTaskNeedsKnownTools(t *testing.T) {
	h := &harness{t: t, fx: newFixture(), clk: &clock{}}
	o := h.fx.options(t, nil, h.clk)
	o.Store = fakeStore{}
	o.Flows = []Flow{{Name: "x", Command: "x", Steps: []FlowStep{{AgentTask: &AgentTask{Instructions: "do", Tools: []string{"nope"}}}}}}
	if _, err := New(o); err == nil || !strings.Contains(err.Error(), `unknown tool "nope"`) {
		t.Fatal(err)
	}
	o.Flows[0].Steps[0].AgentTask = &AgentTask{Instructions: "do", OutputSchema: map[string]any{"type": 7}}
	if _, err := New(o); err == nil || !strings.Contains(err.Error(), "output_schema") {
		t.Fatal(err)
	}
	// Every core.Store keeps agent calls: a well-formed task builds.
	o.Flows[0].Steps[0].AgentTask = &AgentTask{Instructions: "do"}
	if _, err := New(o); err != nil {
		t.Fatal(err)
	}
}
