package engine

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/internal/fakellm"
)

// TestInvariants runs every rule of docs/architecture.md's invariants 2–4
// and the trust rules against every caller of the gate (core/gate), on
// both stores. Callers are registered once, in invCallers; every row must
// have a cell for every caller — a missing cell fails the test. A cell
// where the rule does not apply as written says why and asserts what the
// caller does instead (notApplicable), never skips.
func TestInvariants(t *testing.T) {
	t.Parallel()
	for _, row := range invRows {
		for _, c := range invCallers {
			if cell, ok := row.cells[c.name]; !ok || cell.check == nil {
				t.Errorf("rule %s has no cell for caller %s: say what the rule means for it, or why it does not apply", row.rule, c.name)
			}
		}
		for name := range row.cells {
			if !slices.ContainsFunc(invCallers, func(c *invCaller) bool { return c.name == name }) {
				t.Errorf("rule %s has a cell for %s, which is no registered caller", row.rule, name)
			}
		}
	}
	if t.Failed() {
		return
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			for _, row := range invRows {
				t.Run(row.rule, func(t *testing.T) {
					t.Parallel()
					for _, c := range invCallers {
						cell := row.cells[c.name]
						name := c.name
						if cell.why != "" {
							name += "(n/a)"
						}
						t.Run(name, func(t *testing.T) {
							t.Parallel()
							if cell.why != "" {
								t.Logf("does not apply as written: %s", cell.why)
							}
							cell.check(t, setupInv(t, b, c))
						})
					}
				})
			}
		})
	}
}

// invCaller is one kind of caller of the gate.
type invCaller struct {
	name string
	// agent: an LLM agent makes the calls; batch: with a second gated call
	// on the same card, decided by "Approve all"; task: an external
	// agent's task calls them; upstream: the tools are an upstream MCP
	// server's, known only through Options.Lookup; delegation: the calls
	// are an agent's delegations to sub-agents named for the tools
	// ("agent:act", …), whose dispatch is the start of the child's turn.
	agent, batch, task, upstream, delegation bool
	// start makes one call of tool with args, by requester, in a fresh
	// thread; reason is the model's (agent callers).
	start func(ih *invHarness, requester, tool string, args map[string]any, reason string) *invCall
	// settle waits for the call to end and names its end.
	settle func(ih *invHarness, c *invCall) string
}

// invCallers are every caller of the gate: adding one adds a column, and
// every row must then say what it means for it.
var invCallers = []*invCaller{
	{name: "flow_step", start: startFlow, settle: settleStep},
	{name: "agent_loop", agent: true, start: startAgent, settle: settleStep},
	{name: "approve_all", agent: true, batch: true, start: startAgent, settle: settleStep},
	{name: "agent_task", task: true, start: startTask, settle: settleReceipt},
	{name: "upstream_tool", upstream: true, start: startFlow, settle: settleStep},
	{name: "delegation", agent: true, delegation: true, start: startAgent, settle: settleStep},
}

func startFlow(ih *invHarness, requester, tool string, args map[string]any, _ string) *invCall {
	rc := ih.send(requester, freshThread(), commandText(tool, args))
	if rc.RunID == "" {
		ih.t.Fatalf("%q started no run", commandText(tool, args))
	}
	return &invCall{tool: tool, args: args, runID: rc.RunID, key: rc.RunID + "/0"}
}

// startAgent has the model call tool (and, for the batch caller, ask for
// a second gated call in the same turn: redo on "sibling").
func startAgent(ih *invHarness, requester, tool string, args map[string]any, reason string) *invCall {
	turn := fakellm.Turn{Calls: []fakellm.Call{{ID: "call-0", Name: ih.wire(tool), Args: argsJSON(ih.argsFor(args), reason)}}}
	if ih.caller.batch {
		turn.Calls = append(turn.Calls, fakellm.Call{ID: "call-1", Name: "redo", Args: argsJSON(map[string]any{"target": "sibling"}, "the sibling call")})
	}
	ih.script.Push(turn, fakellm.Say("done"))
	rc := ih.send(requester, freshThread(), "please "+tool)
	return &invCall{tool: tool, args: args, runID: rc.RunID, key: rc.RunID + "/0"}
}

// startTask starts a run of the flow "task", claims its agent task as
// agent:worker and calls tool for it; the requester of the call is the
// agent.
func startTask(ih *invHarness, requester, tool string, args map[string]any, _ string) *invCall {
	ctx := context.Background()
	rc := ih.send(requester, freshThread(), "task")
	ac := ih.pendingCall(rc.RunID)
	ref := AgentRef{RunID: rc.RunID, CallID: ac.ID}
	if _, err := ih.eng.AgentCallClaim(ctx, invAgent, ref, "claim-1"); err != nil {
		ih.t.Fatal(err)
	}
	input, _ := json.Marshal(args)
	c := &invCall{tool: tool, args: args, runID: rc.RunID, ref: ref, toolCallID: "tc-0", input: input,
		key: idempotencyKey(rc.RunID, ac.StepIndex) + "/tc-0"}
	if _, err := ih.eng.AgentCallTool(ctx, invAgent, ref, "claim-1", c.toolCallID, ih.prefix+tool, input); err != nil {
		if _, ok := err.(*core.AgentError); !ok {
			ih.t.Fatal(err)
		}
	}
	return c
}

func (ih *invHarness) call(tool string, args map[string]any) *invCall {
	return ih.caller.start(ih, "console:req", tool, args, "the invariant asks")
}

// invCell is one rule for one caller.
type invCell struct {
	// why, when set, says why the rule does not apply to the caller as
	// written; check then asserts what the caller does instead.
	why   string
	check func(t *testing.T, ih *invHarness)
}

func cell(f func(t *testing.T, ih *invHarness)) invCell { return invCell{check: f} }

func notApplicable(why string, f func(t *testing.T, ih *invHarness)) invCell {
	return invCell{why: why, check: f}
}

// every is the same cell for the six callers, spelled out so a new
// caller is a missing cell until its row says what it means for it.
func every(f func(t *testing.T, ih *invHarness)) map[string]invCell {
	return map[string]invCell{"flow_step": cell(f), "agent_loop": cell(f), "approve_all": cell(f), "agent_task": cell(f), "upstream_tool": cell(f),
		"delegation": cell(f)}
}

// with is cells with some replaced.
func with(cells map[string]invCell, more map[string]invCell) map[string]invCell {
	for k, v := range more {
		cells[k] = v
	}
	return cells
}

type invRow struct {
	rule  string
	cells map[string]invCell
}

var invRows = []invRow{
	{"OneDecisionPerApproval", every(oneDecision)},
	{"DenyIsFinal", every(denyIsFinal)},
	{"DenyAddedByReloadWhileWaiting", every(denyByReload)},
	{"DenyFinalUnderForeverGrant", every(denyUnderGrant)},
	{"DestructiveDefaultAsks", with(every(destructiveAsks), map[string]invCell{
		"delegation": notApplicable("a delegation is never destructive: it changes nothing itself and each call of the child passes the gate, "+
			"so with no rule naming it the default lets it start", delegationUnasked),
	})},
	{"CrashAfterStartNonIdempotentInterrupted", with(every(crashInterrupted("act")), map[string]invCell{
		"delegation": notApplicable("a delegation is idempotent: the child is recorded under a key made of the parent's run and step, "+
			"so a re-dispatch after a crash finds the same child and none starts twice", crashRedispatchedTool("act")),
	})},
	{"CrashAfterStartIdempotentRedispatchedSameKey", with(every(crashRedispatchedTool("redo")), map[string]invCell{
		"agent_task": notApplicable("an agent task ends RUN_INTERRUPTED when the replica serving it stops (docs/mcp.md): "+
			"the external agent, not opsgate, holds the task's state, so opsgate re-dispatches none of its calls, idempotent or not",
			crashInterrupted("redo")),
	})},
	{"EditRevalidatedAndRejudged", every(editRejudged)},
	{"ApprovalExpires", every(expires)},
	{"QuorumCountsPersons", every(quorumPersons)},
	{"SelfApprovalByPersons", with(every(selfApproval), map[string]invCell{
		"agent_task": notApplicable("the requester of an agent task's call is the agent (agent:worker), never a person; "+
			"the person who started the run may decide it", agentIsTheRequester),
	})},
	{"AgentsNeverDecide", every(agentsNeverDecide)},
	{"EligibilityJudgedLive", every(eligibilityLive)},
	{"DigestMismatchRefused", every(digestMismatch)},
	{"GrantBoundToRuleAndGranter", every(grantBound)},
	{"GatedCallNeedsAReason", map[string]invCell{
		"agent_loop":  cell(reasonRequired),
		"approve_all": cell(reasonRequiredInBatch),
		"flow_step": notApplicable("a flow step has no model: its card's reason is the request that started the run",
			reasonIsTheRequest),
		"upstream_tool": notApplicable("a flow step has no model: its card's reason is the request that started the run",
			reasonIsTheRequest),
		"agent_task": notApplicable("call_agent_tool carries no reason: the card names the run's request, the agent and its task",
			reasonIsTheTask),
		"delegation": cell(reasonRequired),
	}},
}

// --- the rules ----------------------------------------------------------

// oneDecision: two approvers at once; exactly one decision is recorded,
// the other is told it was decided, the tool runs once.
func oneDecision(t *testing.T, ih *invHarness) {
	c := ih.call("act", map[string]any{"target": "one"})
	a := ih.approval(c)
	var wg sync.WaitGroup
	codes := make([]core.DecisionCode, 2)
	for i, actor := range []string{"console:alice", "console:bob"} {
		wg.Add(1)
		go func() { defer wg.Done(); codes[i] = ih.decide(actor, a, "approve") }()
	}
	wg.Wait()
	o := ih.outcome(c)
	mustStatus(t, "after two decisions", o, "ran")
	if len(o.calls) != 1 {
		t.Fatalf("dispatched %d times", len(o.calls))
	}
	got, err := ih.store.ApprovalGet(context.Background(), a.ID)
	if err != nil || len(got.Decisions) != 1 || len(got.Winners()) != 1 {
		t.Fatalf("approval decisions %+v, %v: want exactly one", got.Decisions, err)
	}
	if !ih.caller.batch && !(slices.Contains(codes, "") && slices.Contains(codes, core.DecisionAlreadyDecided)) {
		t.Fatalf("refusals %q: want one winner and one already_decided", codes)
	}
}

func denyIsFinal(t *testing.T, ih *invHarness) {
	c := ih.call("act", map[string]any{"target": "forbidden-1"})
	o := ih.outcome(c)
	mustStatus(t, "a denied call", o, "denied")
	if len(o.calls) != 0 {
		t.Fatal("a denied call ran")
	}
	ih.noApproval(c)
}

func denyByReload(t *testing.T, ih *invHarness) {
	c := ih.call("act", map[string]any{"target": "late-1"})
	a := ih.approval(c)
	ih.reload(nil, ih.rule("act", map[string]string{"target": "late*"}, approvals.EffectDeny))
	if code := ih.decide("console:alice", a, "approve"); code != "" {
		t.Fatalf("approve: %s", code)
	}
	o := ih.outcome(c)
	mustStatus(t, "approved, then denied by a reload", o, "denied")
	if len(o.calls) != 0 {
		t.Fatal("a call denied while it waited ran")
	}
}

func denyUnderGrant(t *testing.T, ih *invHarness) {
	args := map[string]any{"target": "granted-1"}
	first := ih.call("act", args)
	a := ih.approval(first)
	if code := ih.decideOne("console:alice", a, "approve", func(d *core.Decision) { d.Scope = approvals.ScopeForever }); code != "" {
		t.Fatalf("approve for ever: %s", code)
	}
	mustStatus(t, "the granting call", ih.outcome(first), "ran")
	second := ih.call("act", args)
	mustStatus(t, "a call the grant covers", ih.outcome(second), "ran")
	ih.noApproval(second)
	ih.reload(nil, ih.rule("act", map[string]string{"target": "granted*"}, approvals.EffectDeny))
	third := ih.call("act", args)
	o := ih.outcome(third)
	mustStatus(t, "a denied call under a forever grant", o, "denied")
	if len(o.calls) != 0 {
		t.Fatal("the grant let a denied call run")
	}
}

func destructiveAsks(t *testing.T, ih *invHarness) {
	c := ih.call("wipe", map[string]any{"target": "w-1"})
	a := ih.approval(c)
	if !slices.Equal(a.Approvers, []string{"group:ops"}) || !a.Destructive {
		t.Fatalf("approval approvers %v destructive %v", a.Approvers, a.Destructive)
	}
	if n := len(ih.dispatches(c)); n != 0 {
		t.Fatalf("a destructive call ran %d times before anyone decided", n)
	}
	if code := ih.decideOne("console:alice", a, "reject"); code != "" {
		t.Fatalf("reject: %s", code)
	}
	mustStatus(t, "rejected", ih.outcome(c), "rejected")
}

// crashAt approves c's call and "kills" the process serving it right after
// its dispatch start record commits, then starts it again. For an agent
// task another replica serves the poll that dispatches, dies, and its lease
// lapses.
func crashAt(t *testing.T, ih *invHarness, c *invCall) {
	a := ih.approval(c)
	hit := ih.crash.arm(c.key)
	if code := ih.decide("console:alice", a, "approve"); code != "" {
		t.Fatalf("approve: %s", code)
	}
	if ih.caller.task {
		other := ih.newEngine(ih.store)
		if _, err := other.AgentCallTool(context.Background(), invAgent, c.ref, "claim-1", c.toolCallID, ih.prefix+c.tool, c.input); err == nil {
			t.Fatal("the dying replica's poll went on after its start record")
		}
	}
	select {
	case <-hit:
	case <-time.After(2 * time.Minute): // a hang backstop
		t.Fatal("no start record")
	}
	if ih.caller.task {
		ih.clk.Advance(2 * time.Second) // past the dead replica's lease
		return
	}
	ih.quiesce()
	ih.resume()
}

// crashInterrupted: a call cut by a crash after its start record, of a
// tool that may not run twice, is interrupted: its outcome is unknown.
func crashInterrupted(tool string) func(t *testing.T, ih *invHarness) {
	return func(t *testing.T, ih *invHarness) {
		c := ih.call(tool, map[string]any{"target": "crash-1"})
		crashAt(t, ih, c)
		o := ih.outcome(c)
		mustStatus(t, "a "+tool+" call cut by a crash", o, "interrupted", "error:"+string(core.AgentRunInterrupted))
		if len(o.calls) != 0 {
			t.Fatalf("a call whose outcome is unknown was dispatched again (%d)", len(o.calls))
		}
	}
}

// crashRedispatchedTool: a call of tool cut by a crash after its start
// record, of a tool that may run again, is dispatched again with the same
// key, once.
func crashRedispatchedTool(tool string) func(t *testing.T, ih *invHarness) {
	return func(t *testing.T, ih *invHarness) { crashRedispatched(t, ih, tool) }
}

func crashRedispatched(t *testing.T, ih *invHarness, tool string) {
	c := ih.call(tool, map[string]any{"target": "crash-2"})
	crashAt(t, ih, c)
	o := ih.outcome(c)
	mustStatus(t, "an idempotent call after a crash", o, "ran")
	if len(o.calls) != 1 || o.calls[0].IdempotencyKey != c.key {
		t.Fatalf("re-dispatch %+v: want one call with key %s", o.calls, c.key)
	}
	run, _ := ih.store.RunGet(context.Background(), c.runID)
	for _, st := range run.Steps {
		if st.Index == c.idx && (st.Attempts != 2 || st.IdempotencyKey != c.key) {
			t.Fatalf("step attempts %d key %s", st.Attempts, st.IdempotencyKey)
		}
	}
}

func editRejudged(t *testing.T, ih *invHarness) {
	c := ih.call("act", map[string]any{"target": "e-1"})
	a := ih.approval(c)
	edit := func(args map[string]any) func(*core.Decision) { return func(d *core.Decision) { d.Args = args } }
	// The schema refuses a target act's pattern does not take; a
	// delegation's, an edit without its task.
	bad := map[string]any{"target": "BAD!"}
	if ih.caller.delegation {
		bad = map[string]any{"target": "e-1"}
	}
	if code := ih.decideOne("console:alice", a, "edit", edit(bad)); code != core.DecisionInvalidArgs {
		t.Fatalf("an edit the schema refuses: %q", code)
	}
	if code := ih.decideOne("console:alice", a, "edit", edit(ih.argsFor(map[string]any{"target": "forbidden-e"}))); code != core.DecisionDenied {
		t.Fatalf("an edit into a deny: %q", code)
	}
	if code := ih.decideOne("console:alice", a, "edit", edit(ih.argsFor(map[string]any{"target": "e-2", "env": "prod-eu"}))); code != "" {
		t.Fatalf("a valid edit: %q", code)
	}
	got, _ := ih.store.ApprovalGet(context.Background(), a.ID)
	if got.Status != approvals.StatusPending || got.Quorum != 2 || got.Digest == a.Digest || got.Digest == "" {
		t.Fatalf("the edited call (prod, two approvals) was not re-judged: %s quorum %d digest %s", got.Status, got.Quorum, got.Digest)
	}
	if code := ih.decide("console:bob", a, "approve"); code != "" {
		t.Fatalf("second approval: %q", code)
	}
	o := ih.outcome(c)
	mustStatus(t, "the edited call", o, "ran")
	if len(o.calls) != 1 || o.calls[0].Args["target"] != "e-2" || o.calls[0].Args["env"] != "prod-eu" {
		t.Fatalf("ran %+v, want the edited arguments", o.calls)
	}
}

func expires(t *testing.T, ih *invHarness) {
	c := ih.call("act", map[string]any{"target": "x-1"})
	a := ih.approval(c)
	ih.clk.Advance(2 * time.Hour)
	o := ih.outcome(c)
	mustStatus(t, "an approval nobody decided", o, "expired")
	if len(o.calls) != 0 {
		t.Fatal("an expired call ran")
	}
	if code := ih.decideOne("console:alice", a, "approve"); code != core.DecisionExpired {
		t.Fatalf("a decision after expiry: %q", code)
	}
}

func quorumPersons(t *testing.T, ih *invHarness) {
	c := ih.call("act", map[string]any{"target": "q-1", "env": "prod"})
	a := ih.approval(c)
	if a.Quorum != 2 {
		t.Fatalf("quorum %d", a.Quorum)
	}
	if code := ih.decide("console:alice", a, "approve"); code != "" {
		t.Fatalf("first approval: %q", code)
	}
	if code := ih.decide("slack:UALICE", a, "approve"); code != core.DecisionAlreadyVoted {
		t.Fatalf("the same person through another identity: %q", code)
	}
	if got, _ := ih.store.ApprovalGet(context.Background(), a.ID); got.Status != approvals.StatusPending || got.CountedApprovals() != 1 {
		t.Fatalf("one person met a quorum of two: %s with %d", got.Status, got.CountedApprovals())
	}
	if code := ih.decide("console:bob", a, "approve"); code != "" {
		t.Fatalf("second person: %q", code)
	}
	o := ih.outcome(c)
	mustStatus(t, "two persons approved", o, "ran")
	if len(o.calls) != 1 {
		t.Fatalf("dispatched %d times", len(o.calls))
	}
}

func selfApproval(t *testing.T, ih *invHarness) {
	c := ih.call("act", map[string]any{"target": "s-1"})
	a := ih.approval(c)
	for _, self := range []string{"console:req", "slack:UREQ"} {
		if code := ih.decide(self, a, "approve"); code != core.DecisionSelfApproval {
			t.Fatalf("the requester as %s approved their own call: %q", self, code)
		}
	}
	if code := ih.decide("console:alice", a, "approve"); code != "" {
		t.Fatalf("another person: %q", code)
	}
	mustStatus(t, "approved by another person", ih.outcome(c), "ran")
}

func agentIsTheRequester(t *testing.T, ih *invHarness) {
	c := ih.call("act", map[string]any{"target": "s-1"})
	a := ih.approval(c)
	if a.Requester != invAgent.ID {
		t.Fatalf("the call's requester is %s, want the agent", a.Requester)
	}
	if code := ih.decide("console:req", a, "approve"); code != "" {
		t.Fatalf("the person who started the run decides the agent's call: %q", code)
	}
	mustStatus(t, "approved", ih.outcome(c), "ran")
}

func agentsNeverDecide(t *testing.T, ih *invHarness) {
	c := ih.call("act", map[string]any{"target": "n-1"})
	a := ih.approval(c)
	for _, action := range []string{"approve", "reject"} {
		if code := ih.decide("agent:claude", a, action); code != core.DecisionHumanRequired {
			t.Fatalf("an agent's %s: %q", action, code)
		}
	}
	if got, _ := ih.store.ApprovalGet(context.Background(), a.ID); got.Status != approvals.StatusPending || len(got.Decisions) != 0 {
		t.Fatalf("an agent's decision counted: %+v", got)
	}
	if code := ih.decide("console:alice", a, "approve"); code != "" {
		t.Fatalf("a person: %q", code)
	}
	mustStatus(t, "approved by a person", ih.outcome(c), "ran")
}

// eligibilityLive: an approver removed by a reload can no longer decide
// what waits; one removed between the decision and the dispatch no longer
// makes the quorum, and the call is refused.
func eligibilityLive(t *testing.T, ih *invHarness) {
	c := ih.call("act", map[string]any{"target": "l-1"})
	a := ih.approval(c)
	withoutBob := func(g map[string][]string) { g["ops"] = []string{"person:alice", "person:carol", "person:req"} }
	ih.reload(withoutBob)
	if code := ih.decide("console:bob", a, "approve"); code != core.DecisionNotApprover {
		t.Fatalf("a removed approver: %q", code)
	}
	if !ih.caller.task {
		ih.quiesce() // nothing dispatches between the decision and the reload
	}
	if code := ih.decide("console:alice", a, "approve"); code != "" {
		t.Fatalf("approve: %q", code)
	}
	ih.reload(func(g map[string][]string) { g["ops"] = []string{"person:carol", "person:req"} })
	if !ih.caller.task {
		ih.resume()
	}
	o := ih.outcome(c)
	mustStatus(t, "approved by someone removed before the dispatch", o, "refused:"+"approval_stale")
	if len(o.calls) != 0 {
		t.Fatal("a stale approval ran")
	}
}

// digestMismatch: the arguments are rewritten in the database between the
// decision and the dispatch; the dispatch refuses them, audited.
func digestMismatch(t *testing.T, ih *invHarness) {
	c := ih.call("act", map[string]any{"target": "d-1"})
	a := ih.approval(c)
	if !strings.HasPrefix(a.Digest, "sha256:") {
		t.Fatalf("approval digest %q", a.Digest)
	}
	if !ih.caller.task {
		ih.quiesce()
	}
	if code := ih.decide("console:alice", a, "approve"); code != "" {
		t.Fatalf("approve: %q", code)
	}
	got, _ := ih.store.ApprovalGet(context.Background(), a.ID)
	if len(got.Decisions) != 1 || got.Decisions[0].Digest != a.Digest {
		t.Fatalf("the decision does not record the digest it was made on: %+v", got.Decisions)
	}
	db := ih.store.(interface{ DB() *sql.DB }).DB()
	q := `UPDATE approvals SET approved_args = ? WHERE id = ?`
	if ih.b.name == "postgres" {
		q = `UPDATE approvals SET approved_args = $1 WHERE id = $2`
	}
	if _, err := db.Exec(q, `{"target":"evil-1","env":"staging"}`, a.ID); err != nil {
		t.Fatal(err)
	}
	if !ih.caller.task {
		ih.resume()
	}
	o := ih.outcome(c)
	mustStatus(t, "tampered arguments", o, "refused:digest_mismatch")
	if len(o.calls) != 0 {
		t.Fatalf("the tampered call ran: %+v", o.calls)
	}
}

// grantBound reproduces issue 26, item 2: alice (sre) grants "restart
// api" for ever; a reload removes her from sre and points the rule at
// group:leads; api:ci's next "restart api" asks again.
func grantBound(t *testing.T, ih *invHarness) {
	args := map[string]any{"service": "api"}
	first := ih.call("restart", args)
	a := ih.approval(first)
	if code := ih.decideOne("console:alice", a, "approve", func(d *core.Decision) { d.Scope = approvals.ScopeForever }); code != "" {
		t.Fatalf("approve for ever: %s", code)
	}
	mustStatus(t, "the granting call", ih.outcome(first), "ran")
	ci := ih.caller.start(ih, "api:ci", "restart", args, "ci restarts api")
	mustStatus(t, "api:ci under alice's grant", ih.outcome(ci), "ran")
	ih.noApproval(ci)
	ih.reload(func(g map[string][]string) { g["sre"] = []string{"person:carol"} },
		ih.rule("restart", nil, approvals.EffectAsk, "group:leads"))
	again := ih.caller.start(ih, "api:ci", "restart", args, "ci restarts api")
	na := ih.approval(again)
	if !slices.Equal(na.Approvers, []string{"group:leads"}) || len(ih.dispatches(again)) != 0 {
		t.Fatalf("approvers %v, dispatched %d", na.Approvers, len(ih.dispatches(again)))
	}
	if code := ih.decideOne("console:alice", na, "approve"); code != core.DecisionNotApprover {
		t.Fatalf("alice, no longer an approver: %q", code)
	}
	if code := ih.decideOne("console:bob", na, "approve"); code != "" {
		t.Fatalf("a lead: %q", code)
	}
	mustStatus(t, "approved by a lead", ih.outcome(again), "ran")
}

// reasonRequired: the model's gated call without a reason goes back to it
// as an error asking for one; no card. Made again with one, it asks.
func reasonRequired(t *testing.T, ih *invHarness) {
	args := ih.argsFor(map[string]any{"target": "r-1"})
	ih.script.Push(fakellm.Turn{Calls: []fakellm.Call{{ID: "no-reason", Name: ih.wire("act"), Args: argsJSON(args, "")}}},
		fakellm.Turn{Calls: []fakellm.Call{{ID: "with-reason", Name: ih.wire("act"), Args: argsJSON(args, "now with a reason")}}},
		fakellm.Say("done"))
	rc := ih.send("console:req", freshThread(), "please act")
	first := &invCall{tool: "act", runID: rc.RunID, idx: 0, key: rc.RunID + "/0"}
	again := &invCall{tool: "act", runID: rc.RunID, idx: 1, key: rc.RunID + "/1"}
	a := ih.approval(again)
	ih.noApproval(first)
	if a.Reason != "now with a reason" {
		t.Fatalf("card reason %q", a.Reason)
	}
	run, _ := ih.store.RunGet(context.Background(), rc.RunID)
	if st := run.Steps[0]; st.Status != core.StepFailed || !strings.Contains(st.Error, "one-line reason") {
		t.Fatalf("the reasonless call: %+v", st)
	}
	if !strings.Contains(requestText(t, ih.script, 1), "one-line reason") {
		t.Fatal("the model was not asked for a reason")
	}
}

// reasonRequiredInBatch: a later call of the turn without a reason does
// not join the card; reached in its turn, it goes back to the model.
func reasonRequiredInBatch(t *testing.T, ih *invHarness) {
	ih.script.Push(fakellm.Turn{Calls: []fakellm.Call{
		{ID: "lead", Name: "act", Args: argsJSON(map[string]any{"target": "r-2"}, "the lead")},
		{ID: "later", Name: "redo", Args: argsJSON(map[string]any{"target": "r-3"}, "")},
	}}, fakellm.Turn{Calls: []fakellm.Call{{ID: "later-again", Name: "redo", Args: argsJSON(map[string]any{"target": "r-3"}, "now with a reason")}}},
		fakellm.Say("done"))
	rc := ih.send("console:req", freshThread(), "please act")
	lead := &invCall{tool: "act", runID: rc.RunID, idx: 0, key: rc.RunID + "/0"}
	a := ih.approval(lead)
	ih.noApproval(&invCall{tool: "redo", runID: rc.RunID, idx: 1})
	if code := ih.decide("console:alice", a, "approve"); code != "" {
		t.Fatalf("approve all: %q", code)
	}
	ih.approval(&invCall{tool: "redo", runID: rc.RunID, idx: 2})
	run, _ := ih.store.RunGet(context.Background(), rc.RunID)
	if st := run.Steps[1]; st.Status != core.StepFailed || !strings.Contains(st.Error, "one-line reason") {
		t.Fatalf("the reasonless later call: %+v", st)
	}
}

// delegationUnasked: a delegation no rule names starts its child unasked
// under the default, the child once.
func delegationUnasked(t *testing.T, ih *invHarness) {
	c := ih.call("wipe", map[string]any{"target": "w-1"})
	o := ih.outcome(c)
	mustStatus(t, "a delegation no rule names", o, "ran")
	ih.noApproval(c)
	if len(o.calls) != 1 {
		t.Fatalf("%d children started", len(o.calls))
	}
}

func reasonIsTheRequest(t *testing.T, ih *invHarness) {
	c := ih.call("act", map[string]any{"target": "r-4"})
	if a := ih.approval(c); a.Reason != commandText("act", c.args) {
		t.Fatalf("card reason %q, want the request", a.Reason)
	}
}

func reasonIsTheTask(t *testing.T, ih *invHarness) {
	c := ih.call("act", map[string]any{"target": "r-5"})
	if a := ih.approval(c); !strings.Contains(a.Reason, fmt.Sprintf("asked by agent %s for the task work", invAgent.ID)) {
		t.Fatalf("card reason %q", a.Reason)
	}
}
