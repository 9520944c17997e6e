package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	llm "github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/agentrun"
	"github.com/opsgate/opsgate/core/tools"
	"github.com/opsgate/opsgate/core/upstream"
	"github.com/opsgate/opsgate/internal/fakellm"
)

// The fixture of TestInvariants (invariants_test.go): four tools every
// caller calls, one policy, people with several identities, and for each
// caller the configuration that makes it a caller — a flow per tool, an
// LLM agent, an agent_task step, an upstream MCP server, an LLM agent that
// delegates to sub-agents named for the tools (the policy then names
// "agent:act", …, and a call's dispatch is its child's run).
//
//	act      external, not idempotent, a schema (target, env=staging);
//	         asks group:ops, env prod* needs two, target forbidden* denied
//	redo     external, idempotent; asks group:ops
//	wipe     reversible, destructive, no rule (the default allows, so only
//	         the destructive default asks)
//	restart  reversible; asks group:sre (issue 26's grant PoC)

var invPeople = map[string][]string{
	"alice": {"console:alice", "slack:UALICE"},
	"bob":   {"console:bob"},
	"carol": {"console:carol"},
	"req":   {"console:req", "slack:UREQ"},
}

func invGroups() map[string][]string {
	return map[string][]string{
		"ops":   {"person:alice", "person:bob", "person:carol", "person:req", "agent:claude"},
		"sre":   {"person:alice"},
		"leads": {"person:bob"},
	}
}

// invPolicy is the policy over tool names with prefix ("up." for the
// upstream server's), plus extra rules (a reload's).
func invPolicy(prefix string, extra ...approvals.Rule) *approvals.Policy {
	ops := []string{"group:ops"}
	return &approvals.Policy{Default: approvals.DefaultAllow, DefaultApprovers: ops, Rules: append([]approvals.Rule{
		{Tool: prefix + "act", Effect: approvals.EffectAsk, Approvers: ops},
		{Tool: prefix + "act", Args: map[string]string{"env": "prod*"}, Effect: approvals.EffectAsk, Approvers: ops, Quorum: 2},
		{Tool: prefix + "act", Args: map[string]string{"target": "forbidden*"}, Effect: approvals.EffectDeny},
		{Tool: prefix + "redo", Effect: approvals.EffectAsk, Approvers: ops},
		{Tool: prefix + "restart", Effect: approvals.EffectAsk, Approvers: []string{"group:sre"}},
	}, extra...)}
}

var invActSchema = map[string]any{
	"type": "object", "required": []any{"target"},
	"properties": map[string]any{
		"target": map[string]any{"type": "string", "pattern": "^[a-z0-9-]+$"},
		"env":    map[string]any{"type": "string", "default": "staging"},
	},
	"additionalProperties": false,
}

// invTools are the recorders of the four tools.
type invTools struct{ act, redo, wipe, restart *recorder }

func newInvTools() *invTools {
	return &invTools{act: &recorder{name: "act"}, redo: &recorder{name: "redo"}, wipe: &recorder{name: "wipe"}, restart: &recorder{name: "restart"}}
}

func (ts *invTools) byName(name string) *recorder {
	switch strings.TrimPrefix(name, "up.") {
	case "act":
		return ts.act
	case "redo":
		return ts.redo
	case "wipe":
		return ts.wipe
	case "restart":
		return ts.restart
	}
	panic("no invariant tool " + name)
}

func (ts *invTools) static(t testing.TB) []*tools.Tool {
	schema, err := approvals.CompileSchema("act", invActSchema)
	if err != nil {
		t.Fatal(err)
	}
	return []*tools.Tool{
		{Name: "act", Risk: approvals.RiskExternal, Schema: schema, Runner: ts.act},
		{Name: "redo", Risk: approvals.RiskExternal, Idempotent: true, Runner: ts.redo},
		{Name: "wipe", Risk: approvals.RiskReversible, Destructive: true, Runner: ts.wipe},
		{Name: "restart", Risk: approvals.RiskReversible, Runner: ts.restart},
	}
}

// invFlows are one flow per tool.
func invFlows(prefix string) []Flow {
	return []Flow{
		{Name: "act", Command: "act {target} {env=staging}", Steps: []FlowStep{{Tool: prefix + "act", Args: map[string]any{"target": "{{.target}}", "env": "{{.env}}"}}}},
		{Name: "redo", Command: "redo {target}", Steps: []FlowStep{{Tool: prefix + "redo", Args: map[string]any{"target": "{{.target}}"}}}},
		{Name: "wipe", Command: "wipe {target}", Steps: []FlowStep{{Tool: prefix + "wipe", Args: map[string]any{"target": "{{.target}}"}}}},
		{Name: "restart", Command: "restart {service}", Steps: []FlowStep{{Tool: prefix + "restart", Args: map[string]any{"service": "{{.service}}"}}}},
	}
}

// crashAfterStart makes the process "die" right after a dispatch start
// record commits: the checkpoint that writes the step dispatching under
// the armed key commits, then hangs until the engine is stopped — the tool
// is never called by this process.
type crashAfterStart struct {
	mu  sync.Mutex
	key string
	hit chan struct{}
}

func (c *crashAfterStart) arm(key string) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.key, c.hit = key, make(chan struct{})
	return c.hit
}

func (c *crashAfterStart) disarm() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.key = ""
}

// crashStore is the store an engine of the fixture runs on.
type crashStore struct {
	core.Store
	crash *crashAfterStart
}

func (s crashStore) RunCheckpoint(ctx context.Context, c core.Checkpoint) error {
	err := s.Store.RunCheckpoint(ctx, c)
	s.crash.mu.Lock()
	key, hit := s.crash.key, s.crash.hit
	s.crash.mu.Unlock()
	if err == nil && key != "" && c.Step != nil && c.Step.Status == core.StepDispatching && c.Step.IdempotencyKey == key {
		s.crash.disarm()
		close(hit)
		<-ctx.Done()
		return fmt.Errorf("the process died after its start record: %w", ctx.Err())
	}
	return err
}

// AgentCallChange lets an agent task's dispatch start record "die" too:
// the receipt dispatching commits and the replica never gets further.
func (s crashStore) AgentCallChange(ctx context.Context, p core.AgentCallChangeParams) (*core.AgentCall, error) {
	var dispatching string
	inner := p.Change
	p.Change = func(c *core.AgentCall, rs []core.AgentReceipt) (core.AgentCallChange, error) {
		ch, err := inner(c, rs)
		if ch.Receipt != nil && ch.Receipt.Status == core.ReceiptDispatching {
			dispatching = ch.Receipt.IdempotencyKey
		}
		return ch, err
	}
	out, err := s.Store.AgentCallChange(ctx, p)
	s.crash.mu.Lock()
	key, hit := s.crash.key, s.crash.hit
	s.crash.mu.Unlock()
	if err == nil && key != "" && dispatching == key {
		s.crash.disarm()
		close(hit)
		return nil, errors.New("the replica died after its start record")
	}
	return out, err
}

// upstreamServer is an MCP server (the official SDK, over Streamable HTTP
// on loopback) offering the four tools; each call lands in its recorder
// with the idempotency key and run id the call carried in _meta.
func upstreamServer(t testing.TB, ts *invTools) *upstream.Registry {
	t.Helper()
	srv := sdk.NewServer(&sdk.Implementation{Name: "inv", Version: "1"}, nil)
	add := func(name string, schema map[string]any, ann *sdk.ToolAnnotations) {
		rec := ts.byName(name)
		srv.AddTool(&sdk.Tool{Name: name, InputSchema: schema, Annotations: ann}, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			var args map[string]any
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return nil, err
			}
			meta := req.Params.Meta
			key, _ := meta[upstream.MetaIdempotencyKey].(string)
			runID, _ := meta[upstream.MetaRunID].(string)
			res, err := rec.Run(ctx, tools.Call{RunID: runID, IdempotencyKey: key, Args: args})
			out := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: res.Output}}}
			if err != nil {
				out.IsError = true
			}
			return out, nil
		})
	}
	open, closed := true, false
	anyObject := map[string]any{"type": "object"}
	add("act", invActSchema, &sdk.ToolAnnotations{DestructiveHint: &closed, OpenWorldHint: &open})
	add("redo", anyObject, &sdk.ToolAnnotations{DestructiveHint: &closed, OpenWorldHint: &open, IdempotentHint: true})
	add("wipe", anyObject, &sdk.ToolAnnotations{DestructiveHint: &open, OpenWorldHint: &closed})
	add("restart", anyObject, &sdk.ToolAnnotations{DestructiveHint: &closed, OpenWorldHint: &closed})
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	r, err := upstream.New([]upstream.Server{{Name: "up", URL: hs.URL, ConnectTimeout: 10 * time.Second, CallTimeout: 10 * time.Second,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	r.Start(context.Background())
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// invHarness is one engine of the fixture with one caller's configuration.
type invHarness struct {
	*harness
	caller *invCaller
	ts     *invTools
	crash  *crashAfterStart
	prefix string
	// script is the fake model of the agent callers.
	script *fakellm.Script
	// live is the trust configuration reloaded last, so an engine started
	// later (a restart) starts with it.
	live *Trust
}

// setupInv starts an engine for caller on backend b.
func setupInv(t *testing.T, b backend, c *invCaller) *invHarness {
	ih := &invHarness{caller: c, ts: newInvTools(), crash: &crashAfterStart{}}
	var lookup tools.ToolLookup
	if c.upstream {
		ih.prefix = "up."
		lookup = upstreamServer(t, ih.ts)
	}
	flowPrefix := ih.prefix
	if c.delegation {
		ih.prefix, flowPrefix = llm.SubagentPrefix, ""
	}
	var model func(*Options)
	if c.agent {
		ih.script = llmServer().Script(t)
		m := agentModel(t, ih.script.OpenAIURL())
		model = func(o *Options) {
			o.Agents = []Agent{{Name: "ops", ModelName: "default", Model: m, Tools: []string{"*"}, MaxSteps: 8, Default: true}}
			if !c.delegation {
				return
			}
			// ops delegates to one sub-agent per tool, each of which
			// answers at once.
			o.Agents[0].Tools = nil
			child := &fakellm.Model{Respond: func(*llm.Request) (*llm.Response, error) { return &llm.Response{Text: "child done"}, nil }}
			for _, name := range []string{"act", "redo", "wipe", "restart"} {
				o.Agents[0].Tools = append(o.Agents[0].Tools, llm.SubagentPrefix+name)
				o.Agents = append(o.Agents, Agent{Name: name, ModelName: "default", Model: child, MaxSteps: 2})
			}
		}
	}
	ih.harness = setup(t, b, func(o *Options) {
		o.Store = crashStore{Store: o.Store, crash: ih.crash}
		o.People, o.Groups, o.Policy = invPeople, invGroups(), invPolicy(ih.prefix)
		if ih.live != nil {
			o.Groups, o.Policy = ih.live.Groups, ih.live.Policy
		}
		o.Tools, o.Flows, o.Lookup = ih.ts.static(t), invFlows(flowPrefix), lookup
		// 160 engines run in this test: an idle one polls less. Every wait
		// that matters is woken by the store (a decision, a requeue); the
		// poll only paces the sweeps (expiry, a lapsed lease).
		o.PollInterval = 100 * time.Millisecond
		if c.upstream {
			o.Tools = nil
		}
		o.Flows = append(o.Flows, Flow{Name: "task", Command: "task", Steps: []FlowStep{{Name: "work", AgentTask: &AgentTask{
			Instructions: "Do the work", Tools: []string{"act", "redo", "wipe", "restart"}}}}})
		if model != nil {
			model(o)
		}
	})
	return ih
}

// reload swaps the live trust configuration: the fixture's policy with
// extra rules, and its groups changed by mod.
func (ih *invHarness) reload(mod func(groups map[string][]string), extra ...approvals.Rule) {
	groups := invGroups()
	if mod != nil {
		mod(groups)
	}
	ih.live = &Trust{Policy: invPolicy(ih.prefix, extra...), People: invPeople, Groups: groups}
	ih.eng.Reload(*ih.live)
}

// rule is an extra rule over tool (prefixed for the upstream caller).
func (ih *invHarness) rule(tool string, args map[string]string, effect approvals.Effect, approvers ...string) approvals.Rule {
	return approvals.Rule{Tool: ih.prefix + tool, Args: args, Effect: effect, Approvers: approvers}
}

// wire is tool's name as the model calls it: a delegation's is the
// sub-agent tool's wire name ("agent_act").
func (ih *invHarness) wire(tool string) string {
	if ih.caller.delegation {
		return "agent_" + tool
	}
	return tool
}

// argsFor is args as the caller's call carries them: a delegation's with
// its task.
func (ih *invHarness) argsFor(args map[string]any) map[string]any {
	if !ih.caller.delegation {
		return args
	}
	out := maps.Clone(args)
	out[llm.SubagentTask] = "do the work"
	return out
}

// invCall is one call made through a caller.
type invCall struct {
	tool  string
	args  map[string]any
	runID string
	// idx is the call's step index; key its idempotency key.
	idx int
	key string
	// ref, claim and toolCallID name an agent task's call.
	ref        AgentRef
	toolCallID string
	input      json.RawMessage
}

// invOutcome is what became of a call, the same words for every caller.
type invOutcome struct {
	// status: ran, failed, denied, rejected, expired, interrupted,
	// refused:<code>, or error:<code> (a refusal of an agent's request).
	status string
	// calls are the tool's dispatches of this call (by its key).
	calls []tools.Call
}

func (o invOutcome) String() string {
	return fmt.Sprintf("%s after %d dispatch(es)", o.status, len(o.calls))
}

// dispatches are the recorded calls of c's key; a delegation's are the
// child runs its step started, each as the call that recorded it (the
// step's key and arguments).
func (ih *invHarness) dispatches(c *invCall) []tools.Call {
	if ih.caller.delegation {
		return ih.children(c)
	}
	rec := ih.ts.byName(c.tool)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var out []tools.Call
	for _, call := range rec.calls {
		if call.IdempotencyKey == c.key {
			out = append(out, call)
		}
	}
	return out
}

// children are the sub-agent runs the delegation c started.
func (ih *invHarness) children(c *invCall) []tools.Call {
	ctx := context.Background()
	runs, _, err := ih.store.RunList(ctx, core.RunListParams{Flow: core.AgentFlow(c.tool), Limit: 100})
	if err != nil {
		ih.t.Fatal(err)
	}
	parent, err := ih.store.RunGet(ctx, c.runID)
	if err != nil {
		ih.t.Fatal(err)
	}
	var out []tools.Call
	for _, r := range runs {
		full, err := ih.store.RunGet(ctx, r.ID)
		if err != nil {
			ih.t.Fatal(err)
		}
		if l, ok := agentrun.LinkOf(full); !ok || l.Parent != c.runID || l.Step != c.idx {
			continue
		}
		call := tools.Call{RunID: full.ID}
		for _, st := range parent.Steps {
			if st.Index == c.idx {
				call.IdempotencyKey, call.Args = st.IdempotencyKey, st.Args
			}
		}
		out = append(out, call)
	}
	return out
}

// approval waits for the pending approval of c and returns it.
func (ih *invHarness) approval(c *invCall) *approvals.Approval {
	ih.t.Helper()
	var found *approvals.Approval
	waitFor(ih.t, "the approval of "+c.tool, func() bool {
		items, _, err := ih.store.ApprovalList(context.Background(), approvals.ApprovalListParams{RunID: c.runID, Limit: 20})
		if err != nil {
			ih.t.Fatal(err)
		}
		for _, a := range items {
			if a.StepIndex == c.idx && a.Tool == ih.prefix+c.tool {
				found = a
				return true
			}
		}
		return false
	})
	return found
}

// noApproval asserts c settled without anyone being asked.
func (ih *invHarness) noApproval(c *invCall) {
	ih.t.Helper()
	items, _, err := ih.store.ApprovalList(context.Background(), approvals.ApprovalListParams{RunID: c.runID, Limit: 20})
	if err != nil {
		ih.t.Fatal(err)
	}
	for _, a := range items {
		if a.StepIndex == c.idx && a.Tool == ih.prefix+c.tool {
			ih.t.Fatalf("%s was asked about (approval %s)", c.tool, a.ID)
		}
	}
}

// decide decides a as actor; "approve" goes through "Approve all" for the
// batch caller. It returns the refusal code, "" when accepted.
func (ih *invHarness) decide(actor string, a *approvals.Approval, action string, mod ...func(*core.Decision)) core.DecisionCode {
	ih.t.Helper()
	d := core.Decision{ApprovalID: a.ID, Action: approvals.Action(action)}
	if action == "approve" && ih.caller.batch {
		d.Action = core.ActionApproveAll
	}
	for _, m := range mod {
		m(&d)
	}
	return ih.decision(actor, d)
}

// decideOne decides a alone, whatever the caller: a decision with a scope
// (an "Approve all" carries none).
func (ih *invHarness) decideOne(actor string, a *approvals.Approval, action string, mod ...func(*core.Decision)) core.DecisionCode {
	ih.t.Helper()
	d := core.Decision{ApprovalID: a.ID, Action: approvals.Action(action)}
	for _, m := range mod {
		m(&d)
	}
	return ih.decision(actor, d)
}

func (ih *invHarness) decision(actor string, d core.Decision) core.DecisionCode {
	_, err := ih.eng.Decide(context.Background(), core.Actor{ID: actor}, "console", d)
	if err == nil {
		return ""
	}
	de, ok := core.Refusal(err)
	if !ok {
		ih.t.Errorf("decide %s %s: %v", d.Action, d.ApprovalID, err)
		return "unexpected"
	}
	return de.Code
}

// outcome waits for c to settle and says what became of it.
func (ih *invHarness) outcome(c *invCall) invOutcome {
	ih.t.Helper()
	status := ih.caller.settle(ih, c)
	if ih.caller.agent {
		ih.finishTurn(c)
	}
	for _, e := range ih.auditKinds(approvals.AuditListParams{RunID: c.runID, Kind: string(approvals.AuditDispatchRefused)}) {
		var d struct{ Code string }
		_ = json.Unmarshal(e.Detail, &d)
		status = "refused:" + d.Code
	}
	return invOutcome{status: status, calls: ih.dispatches(c)}
}

// finishTurn lets an agent's run end once c settled, so the fake model's
// next turn goes to the next call: the batch caller's sibling, if it still
// waits, is rejected.
func (ih *invHarness) finishTurn(c *invCall) {
	ih.t.Helper()
	ctx := context.Background()
	waitFor(ih.t, "the turn of run "+c.runID+" to end", func() bool {
		run, err := ih.store.RunGet(ctx, c.runID)
		if err != nil {
			ih.t.Fatal(err)
		}
		if run.Status.Final() {
			return true
		}
		if ih.caller.batch && run.Status == core.RunWaitingApproval {
			items, _, err := ih.store.ApprovalList(ctx, approvals.ApprovalListParams{RunID: c.runID, Status: approvals.StatusPending, Limit: 20})
			if err != nil {
				ih.t.Fatal(err)
			}
			for _, a := range items {
				if a.StepIndex != c.idx {
					ih.decideOne("console:carol", a, "reject")
				}
			}
		}
		return false
	})
}

// settleStep waits for the run's step c.idx to end and names its end.
func settleStep(ih *invHarness, c *invCall) string {
	ih.t.Helper()
	var st core.Step
	var run *core.Run
	waitFor(ih.t, fmt.Sprintf("step %d of run %s to end", c.idx, c.runID), func() bool {
		r, err := ih.store.RunGet(context.Background(), c.runID)
		if err != nil {
			ih.t.Fatal(err)
		}
		run = r
		for _, s := range r.Steps {
			if s.Index == c.idx {
				st = s
				switch s.Status {
				case core.StepWaitingApproval, core.StepDispatching, core.StepWaitingAgent:
					return false
				}
				return true
			}
		}
		return false
	})
	switch st.Status {
	case core.StepSucceeded:
		return "ran"
	case core.StepDenied:
		return "denied"
	case core.StepRejected:
		return "rejected"
	case core.StepInterrupted:
		return "interrupted"
	case core.StepFailed:
		if run.ErrorCode == "approval_expired" || st.Error == "approval expired" {
			return "expired"
		}
	}
	return string(st.Status)
}

// settleReceipt polls the agent's tool call (the same toolCallId and
// input) until its receipt is final: each poll moves a decided call on.
func settleReceipt(ih *invHarness, c *invCall) string {
	ih.t.Helper()
	var status string
	waitFor(ih.t, "the receipt of "+c.toolCallID, func() bool {
		r, err := ih.eng.AgentCallTool(context.Background(), invAgent, c.ref, "claim-1", c.toolCallID, ih.prefix+c.tool, c.input)
		if err != nil {
			var ae *core.AgentError
			if errors.As(err, &ae) {
				status = "error:" + string(ae.Code)
				return true
			}
			ih.t.Fatal(err)
		}
		if r.Status.InFlight() {
			return false
		}
		status = map[core.AgentReceiptStatus]string{core.ReceiptSucceeded: "ran"}[r.Status]
		if status == "" {
			status = string(r.Status)
		}
		return true
	})
	return status
}

var invAgent = core.Actor{ID: "agent:worker"}

// commandText is the flow command of a call.
func commandText(tool string, args map[string]any) string {
	keys := map[string][]string{"act": {"target", "env"}, "redo": {"target"}, "wipe": {"target"}, "restart": {"service"}}[tool]
	parts := []string{tool}
	for _, k := range keys {
		if v, ok := args[k]; ok {
			parts = append(parts, fmt.Sprint(v))
		}
	}
	return strings.Join(parts, " ")
}

// argsJSON is the model's arguments of a call, with its reason unless
// reason is "".
func argsJSON(args map[string]any, reason string) string {
	m := maps.Clone(args)
	if m == nil {
		m = map[string]any{}
	}
	if reason != "" {
		m["reason"] = reason
	}
	b, _ := json.Marshal(m)
	return string(b)
}

var invThread = struct {
	sync.Mutex
	n int
}{}

// freshThread is a thread no other call of the test uses.
func freshThread() string {
	invThread.Lock()
	defer invThread.Unlock()
	invThread.n++
	return fmt.Sprintf("console:inv-%d", invThread.n)
}

// mustStatus fails unless got is one of want.
func mustStatus(t *testing.T, what string, got invOutcome, want ...string) {
	t.Helper()
	if !slices.Contains(want, got.status) {
		t.Fatalf("%s: %s, want %v", what, got, want)
	}
}
