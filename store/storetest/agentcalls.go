package storetest

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/opsgate/opsgate/core"
)

// agentCalls is the store's agent call side; every backend must have it.
func agentCalls(t *testing.T, s core.Store) core.AgentCallStore {
	t.Helper()
	as, ok := s.(core.AgentCallStore)
	if !ok {
		t.Fatalf("%T does not implement core.AgentCallStore", s)
	}
	return as
}

// suspendForAgent claims a fresh run and suspends it with a pending call.
func suspendForAgent(t *testing.T, s core.Store, key string) (*core.AgentCall, string) {
	t.Helper()
	as := agentCalls(t, s)
	th := thread(key)
	runID := queueRun(t, s, th)
	claim(t, s, "w1", 10)
	call := &core.AgentCall{ID: newID("call"), RunID: runID, StepIndex: 0, Status: core.AgentCallPending,
		Task: core.AgentTask{Stage: "investigate", Instructions: "look", Skills: []string{"triage"},
			Tools: []core.AgentTaskTool{{ID: "status"}}, OutputSchema: json.RawMessage(`{"type":"object"}`)},
		CreatedAt: t0, UpdatedAt: t0}
	step := &core.Step{Index: 0, Tool: core.AgentTaskStep, Status: core.StepWaitingAgent, Args: map[string]any{"agent_call_id": call.ID}}
	if err := as.AgentCallCreate(ctx(t), call, core.Checkpoint{RunID: runID, Owner: "w1", Now: t0, Status: core.RunWaitingInput,
		Release: true, Step: step}); err != nil {
		t.Fatalf("AgentCallCreate: %v", err)
	}
	return call, runID
}

func testAgentCallCreateWithCheckpoint(t *testing.T, s core.Store) {
	as := agentCalls(t, s)
	call, runID := suspendForAgent(t, s, "agent-create")
	r := getRun(t, s, runID)
	mustEqual(t, "run status", r.Status, core.RunWaitingInput)
	mustEqual(t, "step status", r.Steps[0].Status, core.StepWaitingAgent)
	got, err := as.AgentCallGet(ctx(t), call.ID)
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "stage", got.Task.Stage, "investigate")
	mustEqual(t, "status", got.Status, core.AgentCallPending)
	if byStep, err := as.AgentCallForStep(ctx(t), runID, 0); err != nil || byStep.ID != call.ID {
		t.Errorf("AgentCallForStep = %+v, %v", byStep, err)
	}
	if _, err := as.AgentCallGet(ctx(t), "nope"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("unknown call: %v", err)
	}
	// A refused guard stores no call.
	other := &core.AgentCall{ID: newID("call"), RunID: runID, Status: core.AgentCallPending, CreatedAt: t0, UpdatedAt: t0}
	err = as.AgentCallCreate(ctx(t), other, core.Checkpoint{RunID: runID, Owner: "w1", Now: t0, Status: core.RunWaitingInput})
	if !errors.Is(err, core.ErrConflict) {
		t.Fatalf("create under a lost lease: %v", err)
	}
	if _, err := as.AgentCallGet(ctx(t), other.ID); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("refused create stored the call: %v", err)
	}
}

func testAgentCallChangeAtomic(t *testing.T, s core.Store) {
	as := agentCalls(t, s)
	call, runID := suspendForAgent(t, s, "agent-change")
	claimed := func(c *core.AgentCall) *core.AgentCall {
		n := *c
		n.Status, n.ClaimID, n.ClaimedBy, n.ServedBy, n.UpdatedAt = core.AgentCallClaimed, "c1", "agent:a", "w1", t0
		return &n
	}
	rec := &core.AgentReceipt{CallID: call.ID, ToolCallID: "t1", ToolID: "status", Seq: 1, Input: json.RawMessage(`{}`),
		Args: map[string]any{"service": "api"}, Status: core.ReceiptDispatching, CreatedAt: t0}
	// A checkpoint whose guard fails writes nothing: no call change, no receipt.
	_, err := as.AgentCallChange(ctx(t), core.AgentCallChangeParams{ID: call.ID, Change: func(c *core.AgentCall, rs []core.AgentReceipt) (core.AgentCallChange, error) {
		return core.AgentCallChange{Call: claimed(c), Receipt: rec, Checkpoint: &core.Checkpoint{RunID: runID, Now: t0,
			ExpectStatus: []core.RunStatus{core.RunRunning}}}, nil
	}})
	if !errors.Is(err, core.ErrConflict) {
		t.Fatalf("guarded change: %v", err)
	}
	if c, _ := as.AgentCallGet(ctx(t), call.ID); c.Status != core.AgentCallPending {
		t.Errorf("refused change wrote the call: %s", c.Status)
	}
	if rs, _ := as.AgentReceiptList(ctx(t), call.ID); len(rs) != 0 {
		t.Errorf("refused change wrote a receipt: %+v", rs)
	}
	// An error from Change writes nothing either and comes back as is.
	boom := errors.New("boom")
	if _, err := as.AgentCallChange(ctx(t), core.AgentCallChangeParams{ID: call.ID, Change: func(c *core.AgentCall, _ []core.AgentReceipt) (core.AgentCallChange, error) {
		return core.AgentCallChange{Call: claimed(c)}, boom
	}}); !errors.Is(err, boom) {
		t.Fatalf("change error: %v", err)
	}
	// A good change writes the call, the receipt and the run together.
	got, err := as.AgentCallChange(ctx(t), core.AgentCallChangeParams{ID: call.ID, Change: func(c *core.AgentCall, rs []core.AgentReceipt) (core.AgentCallChange, error) {
		return core.AgentCallChange{Call: claimed(c), Receipt: rec, Checkpoint: &core.Checkpoint{RunID: runID, Now: t0,
			ExpectStatus: []core.RunStatus{core.RunWaitingInput},
			Events:       []core.RunEvent{{RunID: runID, Type: "agent_call.claimed", Data: json.RawMessage(`{}`), At: t0}}}}, nil
	}})
	if err != nil || got.Status != core.AgentCallClaimed || got.ClaimedBy != "agent:a" {
		t.Fatalf("change: %+v %v", got, err)
	}
	c, _ := as.AgentCallGet(ctx(t), call.ID)
	mustEqual(t, "served by", c.ServedBy, "w1")
	rs, err := as.AgentReceiptList(ctx(t), call.ID)
	if err != nil || len(rs) != 1 || rs[0].Args["service"] != "api" || rs[0].Status != core.ReceiptDispatching {
		t.Fatalf("receipts: %+v %v", rs, err)
	}
	// The receipt is replaced by tool call id, keeping its place.
	done := *rec
	done.Status, done.Output = core.ReceiptSucceeded, "ok"
	if _, err := as.AgentCallChange(ctx(t), core.AgentCallChangeParams{ID: call.ID, Change: func(*core.AgentCall, []core.AgentReceipt) (core.AgentCallChange, error) {
		return core.AgentCallChange{Receipt: &done}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	rs, _ = as.AgentReceiptList(ctx(t), call.ID)
	if len(rs) != 1 || rs[0].Output != "ok" || rs[0].Seq != 1 {
		t.Fatalf("replaced receipt: %+v", rs)
	}
	list, _, err := as.AgentCallList(ctx(t), core.AgentCallListParams{Status: core.AgentCallClaimed, RunID: runID})
	if err != nil || len(list) != 1 || list[0].ID != call.ID {
		t.Fatalf("list: %+v %v", list, err)
	}
	if list, _, _ := as.AgentCallList(ctx(t), core.AgentCallListParams{Status: core.AgentCallPending, RunID: runID}); len(list) != 0 {
		t.Fatalf("status filter: %+v", list)
	}
}
