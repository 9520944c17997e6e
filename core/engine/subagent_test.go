package engine

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	llm "github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/agentrun"
	"github.com/opsgate/opsgate/internal/fakellm"
)

// subSetup starts an engine whose default agent "ops" may call every tool
// and delegate to "reviewer" (tools status and deploy, max_steps 5), each
// answering from its own script.
func subSetup(t *testing.T, b backend, more ...func(*Options)) (h *harness, parent, child *fakellm.Script) {
	parent, child = llmServer().Script(t), llmServer().Script(t)
	h = setup(t, b, func(o *Options) {
		o.Agents = []Agent{
			{Name: "ops", ModelName: "default", Model: agentModel(t, parent.OpenAIURL()), Tools: []string{"*", "agent:reviewer"}, MaxSteps: 5, Default: true},
			{Name: "reviewer", Description: "Reviews a change before it ships.", ModelName: "default", Model: agentModel(t, child.OpenAIURL()),
				Tools: []string{"status", "deploy"}, MaxSteps: 5},
		}
		for _, f := range more {
			f(o)
		}
	})
	return h, parent, child
}

// childOf returns the sub-agent run that step idx of run started.
func (h *harness) childOf(runID string, idx int) *core.Run {
	h.t.Helper()
	var id string
	waitFor(h.t, "the sub-agent run", func() bool {
		run, err := h.store.RunGet(context.Background(), runID)
		if err != nil {
			h.t.Fatal(err)
		}
		for _, st := range run.Steps {
			if st.Index == idx {
				id, _ = st.Args[agentrun.SubRunID].(string)
			}
		}
		if id == "" {
			return false
		}
		_, err = h.store.RunGet(context.Background(), id)
		return err == nil
	})
	run, err := h.store.RunGet(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return run
}

// eventsOf lists run's events of type typ, their data decoded.
func (h *harness) eventsOf(runID, typ string) []map[string]any {
	h.t.Helper()
	evs, err := h.store.RunEventList(context.Background(), runID, 0, 1000)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []map[string]any
	for _, ev := range evs {
		if ev.Type == typ {
			var d map[string]any
			_ = json.Unmarshal(ev.Data, &d)
			out = append(out, d)
		}
	}
	return out
}

func TestSubagentAnswersItsParent(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h, parent, child := subSetup(t, b)
		parent.Push(call("agent_reviewer", `{"task":"check that api is healthy","reason":"a second look"}`), fakellm.Say("The reviewer says api is fine."))
		child.Push(call("status", `{"service":"api","reason":"asked to check api"}`), fakellm.Say("api looks fine."))
		rc := h.send("console:req", "console:sub-1", "is api ok? ask the reviewer")
		run := h.waitRun(rc.RunID, core.RunSucceeded, core.RunFailed)
		if run.Status != core.RunSucceeded || len(run.Steps) != 1 {
			t.Fatalf("parent %s (%s) steps %+v", run.Status, run.ErrorMessage, run.Steps)
		}
		st := run.Steps[0]
		if st.Tool != "agent:reviewer" || st.Status != core.StepSucceeded || st.Output != "api looks fine." {
			t.Fatalf("parent step %+v", st)
		}
		sub := h.childOf(run.ID, 0)
		if sub.Status != core.RunSucceeded || sub.Thread != core.SubSession(run.ID, 0, run.Thread) || sub.Requester != "console:req" {
			t.Fatalf("child %s thread %s requester %s", sub.Status, sub.Thread, sub.Requester)
		}
		if name, _ := core.AgentOf(sub.Flow); name != "reviewer" {
			t.Fatalf("child flow %q", sub.Flow)
		}
		// The child's call passed the gate and ran as the child's.
		if n := len(h.fx.status.callsFor(sub.ID)); n != 1 {
			t.Fatalf("status ran %d times for the child", n)
		}
		// The tool is declared with the reviewer's description; the
		// child gets the task as external content from ops; the parent
		// gets the answer as external content from agent:reviewer.
		tools, _ := parent.Requests()[0].JSON()["tools"].([]any)
		found := false
		for _, tl := range tools {
			fn, _ := tl.(map[string]any)["function"].(map[string]any)
			if fn["name"] == "agent_reviewer" {
				found = fn["description"] == "Reviews a change before it ships."
			}
		}
		if !found {
			t.Fatalf("agent_reviewer not declared with the reviewer's description: %v", tools)
		}
		if txt := requestText(t, child, 0); !containsAll(txt, `source="agent:ops"`, "check that api is healthy") {
			t.Fatalf("the child's task:\n%s", txt)
		}
		if txt := requestText(t, child, 0); strings.Contains(txt, "is api ok? ask the reviewer") {
			t.Fatalf("the child saw the parent's conversation:\n%s", txt)
		}
		if txt := requestText(t, parent, 1); !containsAll(txt, `<external_content source="agent:reviewer"`, "api looks fine.") {
			t.Fatalf("the parent's result:\n%s", txt)
		}
		if evs := h.eventsOf(run.ID, EventSubagentStarted); len(evs) != 1 || evs[0]["sessionId"] != sub.Thread.Key || evs[0]["agent"] != "reviewer" {
			t.Fatalf("subagent.started %v", evs)
		}
	})
}

func TestSubagentApprovalWaitsInTheRootThread(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h, parent, child := subSetup(t, b)
		parent.Push(call("agent_reviewer", `{"task":"deploy api 1.2.3","reason":"ship it"}`), fakellm.Say("Shipped by the reviewer."))
		child.Push(call("deploy", `{"service":"api","version":"1.2.3","reason":"asked to ship"}`), fakellm.Say("Deployed 1.2.3."))
		rc := h.send("console:req", "slack:T1/C1/77", "ship api 1.2.3 through the reviewer")
		sub := h.childOf(rc.RunID, 0)
		a := h.waitApproval(sub.ID)
		if h.fx.deploy.total() != 0 {
			t.Fatal("deploy ran before a decision")
		}
		// The card goes to the thread the request came from.
		items, _, err := h.store.OutboxList(context.Background(), core.OutboxListParams{Status: core.DeliveryPending, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		cards := 0
		for _, m := range items {
			if m.ApprovalID == a.ID && m.Kind == core.KindCard {
				cards++
				if m.Thread.String() != "slack:T1/C1/77" {
					t.Fatalf("card went to %s", m.Thread)
				}
			}
		}
		if cards != 1 {
			t.Fatalf("%d cards for the child's approval", cards)
		}
		// The parent's events show the child's request with its session.
		perms := h.eventsOf(rc.RunID, core.EventPermissionRequested)
		if len(perms) != 1 || perms[0]["approval_id"] != a.ID || perms[0]["sessionId"] != sub.Thread.Key || perms[0]["subagent"] != "reviewer" {
			t.Fatalf("parent's permission.requested %v", perms)
		}
		if parentRun := h.waitRun(rc.RunID, core.RunWaitingInput); parentRun.Steps[0].Status != core.StepWaitingAgent {
			t.Fatalf("parent step %+v", parentRun.Steps[0])
		}
		if _, err := h.decide("console:alice", a.ID, "approve"); err != nil {
			t.Fatal(err)
		}
		run := h.waitRun(rc.RunID, core.RunSucceeded, core.RunFailed)
		if run.Status != core.RunSucceeded || h.fx.deploy.total() != 1 {
			t.Fatalf("parent %s, deploy ran %d times", run.Status, h.fx.deploy.total())
		}
		// The decision reaches the parent's events too, with the child's
		// session, and the child's own once.
		decided := h.eventsOf(rc.RunID, core.EventPermissionDecided)
		if len(decided) != 1 || decided[0]["approval_id"] != a.ID || decided[0]["status"] != "approved" ||
			decided[0]["sessionId"] != sub.Thread.Key || decided[0]["subagent_run"] != sub.ID {
			t.Fatalf("parent's permission.decided %v", decided)
		}
		if own := h.eventsOf(sub.ID, core.EventPermissionDecided); len(own) != 1 || own[0]["sessionId"] != nil {
			t.Fatalf("child's permission.decided %v", own)
		}
		if txt := requestText(t, parent, 1); !containsAll(txt, "Deployed 1.2.3.") {
			t.Fatalf("the parent's result:\n%s", txt)
		}
	})
}

func TestSubagentQuestionAnsweredInTheRootThread(t *testing.T) {
	askArgs := `{"questions":[{"id":"env","kind":"choice","text":"Which environment?","choices":["staging","prod"]}]}`
	eachBackend(t, func(t *testing.T, b backend) {
		h, parent, child := subSetup(t, b)
		parent.Push(call("agent_reviewer", `{"task":"find out the environment","reason":"need it"}`), fakellm.Say("It is prod."))
		child.Push(call("ask_user", askArgs), fakellm.Say("prod"))
		rc := h.send("console:req", "slack:T1/C1/88", "which env? ask the reviewer")
		sub := h.childOf(rc.RunID, 0)
		h.waitRun(sub.ID, core.RunWaitingInput)
		qs := h.eventsOf(rc.RunID, core.EventQuestionRequested)
		if len(qs) != 1 || qs[0]["sessionId"] != sub.Thread.Key || qs[0]["request_id"] != askActionID(0) {
			t.Fatalf("parent's question.requested %v", qs)
		}
		// A reply in the root thread answers the child's question.
		if rc2 := h.send("console:req", "slack:T1/C1/88", "prod"); rc2.RunID != sub.ID {
			t.Fatalf("the reply went to run %q, not the child %s", rc2.RunID, sub.ID)
		}
		run := h.waitRun(rc.RunID, core.RunSucceeded, core.RunFailed)
		if run.Status != core.RunSucceeded {
			t.Fatalf("parent %s: %s", run.Status, run.ErrorMessage)
		}
		if txt := requestText(t, child, 1); !containsAll(txt, `"answer":"prod"`) {
			t.Fatalf("the child did not get the answer:\n%s", txt)
		}
		if got := h.eventsOf(rc.RunID, core.EventQuestionAnswered); len(got) != 1 || got[0]["sessionId"] != sub.Thread.Key {
			t.Fatalf("parent's question.answered %v", got)
		}
	})
}

func TestSubagentCancelledWithItsParent(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h, parent, child := subSetup(t, b)
		parent.Push(call("agent_reviewer", `{"task":"deploy api 9","reason":"ship"}`))
		child.Push(call("deploy", `{"service":"api","version":"9","reason":"asked"}`))
		rc := h.send("console:req", "console:sub-c", "ship api 9")
		sub := h.childOf(rc.RunID, 0)
		a := h.waitApproval(sub.ID)
		h.waitRun(rc.RunID, core.RunWaitingInput)
		if _, err := h.eng.Cancel(context.Background(), rc.RunID, core.Actor{ID: "console:alice"}); err != nil {
			t.Fatal(err)
		}
		if got := h.waitRun(sub.ID, core.RunCancelled, core.RunSucceeded, core.RunFailed); got.Status != core.RunCancelled {
			t.Fatalf("child %s", got.Status)
		}
		if got, err := h.store.ApprovalGet(context.Background(), a.ID); err != nil || got.Status != approvals.StatusExpired {
			t.Fatalf("child's approval %+v %v", got, err)
		}
		if _, err := h.decide("console:alice", a.ID, "approve"); err == nil {
			t.Fatal("a cancelled child's approval was decided")
		}
		if h.fx.deploy.total() != 0 {
			t.Fatal("deploy ran")
		}
		run := h.waitRun(rc.RunID, core.RunCancelled)
		if run.Steps[0].Status != core.StepCancelled {
			t.Fatalf("parent step %+v", run.Steps[0])
		}
		// Cancelled between its wait and its child's record (no child to
		// cancel yet): no child starts.
		late := maps.Clone(run.Steps[0].Args)
		late[agentrun.SubRunID] = h.eng.opts.NewID()
		id, err := h.eng.recordSubagent(context.Background(), run, "ops", "reviewer", 1, late)
		if err != nil || id != "" {
			t.Fatalf("a cancelled parent's late child: %q, %v", id, err)
		}
		if _, err := h.store.RunGet(context.Background(), late[agentrun.SubRunID].(string)); !errors.Is(err, core.ErrNotFound) {
			t.Fatalf("a cancelled parent's late child was recorded: %v", err)
		}
	})
}

func TestSubagentSurvivesARestart(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h, parent, child := subSetup(t, b)
		parent.Push(call("agent_reviewer", `{"task":"deploy api 2","reason":"ship"}`), fakellm.Say("Done."))
		child.Push(call("deploy", `{"service":"api","version":"2","reason":"asked"}`), fakellm.Say("Deployed 2."))
		rc := h.send("console:req", "console:sub-r", "ship api 2")
		sub := h.childOf(rc.RunID, 0)
		a := h.waitApproval(sub.ID)
		h.waitRun(rc.RunID, core.RunWaitingInput)
		// The process dies mid-child; a new one takes over from the store.
		h.shutdown()
		h.start()
		if _, err := h.decide("console:alice", a.ID, "approve"); err != nil {
			t.Fatal(err)
		}
		run := h.waitRun(rc.RunID, core.RunSucceeded, core.RunFailed)
		if run.Status != core.RunSucceeded || run.Steps[0].Output != "Deployed 2." || h.fx.deploy.total() != 1 {
			t.Fatalf("parent %s step %+v deploy %d", run.Status, run.Steps[0], h.fx.deploy.total())
		}
		if parent.Pending() != 0 || child.Pending() != 0 {
			t.Fatalf("unused replies: parent %d, child %d", parent.Pending(), child.Pending())
		}
	})
}

func TestSubagentLostWakeUpIsSwept(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h, parent, child := subSetup(t, b)
		parent.Push(call("agent_reviewer", `{"task":"deploy api 3","reason":"ship"}`), fakellm.Say("The reviewer could not finish."))
		child.Push(call("deploy", `{"service":"api","version":"3","reason":"asked"}`))
		rc := h.send("console:req", "console:sub-s", "ship api 3")
		sub := h.childOf(rc.RunID, 0)
		h.waitApproval(sub.ID)
		h.waitRun(rc.RunID, core.RunWaitingInput)
		h.quiesce()
		// The child ends but the process dies before it wakes its parent.
		ctx := context.Background()
		if err := h.store.RunCheckpoint(ctx, core.Checkpoint{RunID: sub.ID, Now: h.clk.Now(), Status: core.RunFailed, Release: true,
			ErrorCode: "model_error", ErrorMessage: "the model went away"}); err != nil {
			t.Fatal(err)
		}
		h.resume()
		// The sweep notices once the parent waited longer than a lease.
		h.clk.Advance(2 * time.Second)
		run := h.waitRun(rc.RunID, core.RunSucceeded, core.RunFailed)
		if run.Status != core.RunSucceeded || run.Steps[0].Status != core.StepFailed || !strings.Contains(run.Steps[0].Error, "the model went away") {
			t.Fatalf("parent %s step %+v", run.Status, run.Steps[0])
		}
		if txt := requestText(t, parent, 1); !containsAll(txt, "the agent's turn ended failed: the model went away") {
			t.Fatalf("the parent was not told:\n%s", txt)
		}
	})
}

func TestSubagentDepthIsCapped(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		// ping and pong delegate to each other until refused (config
		// check refuses such a cycle; the engine caps it anyway).
		delegating := func(to string) *fakellm.Model {
			return &fakellm.Model{Record: true, Respond: func(req *llm.Request) (*llm.Response, error) {
				last := req.Messages[len(req.Messages)-1]
				if last.Role == llm.RoleTool {
					return &llm.Response{Text: "done: " + last.Text}, nil
				}
				return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "c1", Name: "agent_" + to, Arguments: `{"task":"go deeper","reason":"depth"}`}}}, nil
			}}
		}
		ping, pong := delegating("pong"), delegating("ping")
		h := setup(t, b, func(o *Options) {
			o.Agents = []Agent{
				{Name: "ping", ModelName: "default", Model: ping, Tools: []string{"agent:pong"}, MaxSteps: 5, Default: true},
				{Name: "pong", ModelName: "default", Model: pong, Tools: []string{"agent:ping"}, MaxSteps: 5},
			}
		})
		rc := h.send("console:req", "console:sub-d", "go")
		run := h.waitRun(rc.RunID, core.RunSucceeded, core.RunFailed)
		if run.Status != core.RunSucceeded {
			t.Fatalf("root %s: %s", run.Status, run.ErrorMessage)
		}
		// root (0) → pong (1) → ping (2) → pong (3), whose call is refused.
		ids := []string{run.ID}
		for d := 1; d <= MaxSubagentDepth; d++ {
			ids = append(ids, h.childOf(ids[d-1], 0).ID)
		}
		deepest, err := h.store.RunGet(context.Background(), ids[MaxSubagentDepth])
		if err != nil {
			t.Fatal(err)
		}
		if l, _ := agentrun.LinkOf(deepest); l.Depth != MaxSubagentDepth || deepest.Steps[0].Status != core.StepFailed ||
			!strings.Contains(deepest.Steps[0].Error, "nest at most 3 deep") {
			t.Fatalf("deepest depth %d step %+v", l.Depth, deepest.Steps[0])
		}
		if got := ping.Calls() + pong.Calls(); got != 2*int64(MaxSubagentDepth+1) {
			t.Fatalf("%d model turns, want %d", got, 2*(MaxSubagentDepth+1))
		}
	})
}

func TestSubagentGetsWhatStepsTheParentHasLeft(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h, parent, child := subSetup(t, b, func(o *Options) { o.Agents[0].MaxSteps = 2 })
		parent.Push(fakellm.Turn{Calls: []fakellm.Call{
			{Name: "status", Args: `{"service":"api","reason":"first"}`},
			{Name: "agent_reviewer", Args: `{"task":"check twice","reason":"second"}`},
		}}, fakellm.Say("ok"))
		child.Push(fakellm.Turn{Calls: []fakellm.Call{
			{Name: "status", Args: `{"service":"a","reason":"one"}`},
			{Name: "status", Args: `{"service":"b","reason":"two"}`},
		}}, fakellm.Say("checked one"))
		rc := h.send("console:req", "console:sub-m", "check")
		h.waitRun(rc.RunID, core.RunSucceeded)
		sub := h.childOf(rc.RunID, 1)
		if l, _ := agentrun.LinkOf(sub); l.MaxSteps != 1 {
			t.Fatalf("child max_steps %d, want the 1 the parent had left", l.MaxSteps)
		}
		if n := len(h.fx.status.callsFor(sub.ID)); n != 1 {
			t.Fatalf("the child ran %d tools, more than the parent had left", n)
		}
	})
}
