// Package agentrun is the LLM agent's loop (docs/agents.md): an agent
// run's turns — the model called with the session's history, its answer
// committed, each tool call it asks for taken through the gate (core/gate),
// ask_user's questions to people, delegation to sub-agents, streamed text —
// driven from the run's checkpoint. The engine (core/engine) owns the run's
// execution and drives the loop through Execution; what else the loop
// needs of the engine is Host. Both are declared here (seams.go).
package agentrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	llm "github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/gate"
	"github.com/opsgate/opsgate/core/tools"
)

// Agent runs (issue 12): free text that matches no flow goes to the default
// agent. Each message is one run of kind "agent" — a turn of the session,
// which is the run's thread — so turns queue per thread exactly like flow
// runs, and a turn resumes after a restart or on another replica through
// the same leases and claims. The conversation is stored as agent.message
// run events appended in the checkpoint of the change they belong to:
//
//   - the model's answer (text and tool calls) is committed before any call
//     is gated, so a stored response is never requested again;
//   - each call then passes the gate (core/gate: policy, grants, suspend,
//     resume, dispatch at most once; gate.go), and its result for
//     the model is committed with the step's outcome;
//   - once every call has a result the model is called again, until it
//     answers without calls (the reply) or max_steps is spent.

// Agent is an LLM agent runs are given to (config agents[] with its model).
type Agent struct {
	Name string
	// Description is the operator's words for what the agent is for: the
	// description of its sub-agent tool ("agent:<name>") to other agents.
	Description string
	// ModelName is models[].name, for metrics and thread messages.
	ModelName string
	// Model streams one model turn; wrap providers in llm.Retrying (the
	// providers.New result already is).
	Model llm.Model
	// Instructions follow opsgate's preamble in the system prompt.
	Instructions string
	// Tools are globs (path.Match) over the names of Options.Tools.
	Tools []string
	// MaxSteps bounds the tool calls of one run (default 20).
	MaxSteps int
	// MaxTokens bounds one model turn's output (0: provider default).
	MaxTokens int
	// Window bounds the history sent with each turn.
	Window llm.Window
	// Default makes free text that matches no flow go to this agent.
	Default bool
	// Files bound the attachments the agent reads (zero: the defaults).
	Files FileLimits
}

// runtime is an Agent ready to run: its toolbox and system prompt.
type runtime struct {
	Agent
	tb     *llm.Toolbox
	system string
}

// Options configures a Loop. Store and Host are required.
type Options struct {
	Store Store
	Host  Host
	// Agents are the configured agents; Tools the static tools their
	// globs match, Lookup the tools resolved when a turn runs (upstream
	// MCP servers: listed when it is a tools.ToolLister, judged when it
	// can say which required servers are down).
	Agents []Agent
	Tools  tools.Static
	Lookup tools.ToolLookup
	// Attendance says whether someone holds an Agent API session's event
	// stream (nil: always attended): an approval of a turn nobody attends
	// is denied at once.
	Attendance interface{ Attended(core.Thread) bool }
	// ApprovalTTL is how long a question waits for its answer.
	ApprovalTTL time.Duration
	// Owner is the replica's lease owner (the streamed text's checkpoints).
	Owner    string
	Now      func() time.Time
	NewID    func() string
	Observer Observer
}

// Loop runs the configured agents' turns (Drive) and fans their streamed
// text out (Deltas). It is safe for concurrent use.
type Loop struct {
	opts   Options
	agents map[string]*runtime
	def    string
	deltas deltaHub
}

// New builds the agents' runtimes: a name and a model each, one default
// at most, globs that make a valid toolbox.
func New(o Options) (*Loop, error) {
	if o.Store == nil || o.Host == nil {
		return nil, errors.New("agentrun: no store or no host")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	l := &Loop{opts: o, agents: map[string]*runtime{}}
	for _, a := range o.Agents {
		if a.Name == "" || a.Model == nil {
			return nil, fmt.Errorf("engine: agent %q has no name or no model", a.Name)
		}
		if _, dup := l.agents[a.Name]; dup {
			return nil, fmt.Errorf("engine: duplicate agent %q", a.Name)
		}
		tb, err := l.toolbox(a, nil)
		if err != nil {
			return nil, fmt.Errorf("engine: agent %q: %w", a.Name, err)
		}
		rt := &runtime{Agent: a, tb: tb, system: llm.SystemPrompt(a.Instructions)}
		l.agents[a.Name] = rt
		if a.Default {
			if l.def != "" {
				return nil, fmt.Errorf("engine: agents %q and %q are both the default", l.def, a.Name)
			}
			l.def = a.Name
		}
	}
	return l, nil
}

func (l *Loop) now() time.Time { return l.opts.Now().UTC() }

// Any reports whether any agent is configured.
func (l *Loop) Any() bool { return len(l.agents) > 0 }

// Has reports whether name is a configured agent.
func (l *Loop) Has(name string) bool { return l.agents[name] != nil }

// Default is the agent free text that matches no flow goes to, or "".
func (l *Loop) Default() string { return l.def }

// ModelName is the model name of the configured agent name, or "".
func (l *Loop) ModelName(name string) string {
	if a := l.agents[name]; a != nil {
		return a.ModelName
	}
	return ""
}

// AgentInfo describes a configured agent (the Agent API's GET
// /api/v1/agent/agents and /models).
type AgentInfo struct {
	Name, ModelName string
	Default         bool
	// Tools are the real names of the tools the model sees, ask_user last.
	Tools    []string
	MaxSteps int
}

// Agents lists the configured agents by name.
func (l *Loop) Agents() []AgentInfo {
	out := make([]AgentInfo, 0, len(l.agents))
	for _, a := range l.agents {
		out = append(out, AgentInfo{Name: a.Name, ModelName: a.ModelName, Default: a.Default, Tools: a.tb.Names(), MaxSteps: agentSteps(a).Limit()})
	}
	slices.SortFunc(out, func(x, y AgentInfo) int { return strings.Compare(x.Name, y.Name) })
	return out
}

// toolbox is the toolbox of agent a over the static tools and extra (the
// lister's tools now), each matched against a's globs.
func (l *Loop) toolbox(a Agent, extra []*tools.Tool) (*llm.Toolbox, error) {
	byName := map[string]*tools.Tool{}
	for name, t := range l.opts.Tools {
		byName[name] = t
	}
	for _, t := range extra {
		if t != nil && byName[t.Name] == nil && t.Name != llm.AskUserTool {
			byName[t.Name] = t
		}
	}
	var names []string
	for name := range byName {
		for _, g := range a.Tools {
			if ok, _ := path.Match(g, name); ok {
				names = append(names, name)
				break
			}
		}
	}
	slices.Sort(names)
	var ts []llm.Tool
	for _, n := range names {
		t := byName[n]
		ts = append(ts, llm.Tool{Name: t.Name, Description: t.Description, Schema: t.Schema.Document()})
	}
	return llm.NewToolbox(append(ts, l.subagentTools(a)...))
}

// turnToolbox is the toolbox for one model turn: the prebuilt one, or, when
// Options.Lookup lists tools, one over the tools it offers now.
func (ax *exec) turnToolbox(ctx context.Context) *llm.Toolbox {
	tl, ok := ax.l.opts.Lookup.(tools.ToolLister)
	if !ok {
		return ax.ag.tb
	}
	tb, err := ax.l.toolbox(ax.ag.Agent, tl.Tools(ctx))
	if err != nil {
		ax.log.Warn("agent toolbox over the upstream tools; using the configured ones", "err", err)
		return ax.ag.tb
	}
	return tb
}

// exec is the conversation state of one agent run's execution.
type exec struct {
	Execution
	l    *Loop
	host Host
	run  *core.Run
	log  *slog.Logger
	ag   *runtime
	// hist is the session's history; mine is where this run's part of it
	// starts (a session's runs never interleave: one active per thread).
	hist []llm.Message
	mine int
	// stream, when the thread streams, queues the text as it comes.
	stream *streamer
	// files caches this execution's fetched attachments (resolveFiles).
	files map[string]*llm.FileContent
}

// Drive runs the turn of agent name from x's checkpoint: it returns once
// the run is suspended, waiting or ended, or with the error that stopped
// the execution.
func (l *Loop) Drive(ctx context.Context, x Execution, name string) error {
	ag := l.agents[name]
	if ag == nil {
		msg := fmt.Sprintf("agent %q is not configured", name)
		return x.End(ctx, nil, core.RunFailed, "unknown_agent", msg, "❌ "+msg+".")
	}
	run := x.Run()
	ax := &exec{Execution: x, l: l, host: l.opts.Host, run: run, log: x.Log(), ag: limited(ag, run)}
	if err := ax.load(ctx); err != nil {
		return err
	}
	// Every pass commits one message (or suspends or ends the run); a run
	// holds at most max_steps calls, each answered once, and a model turn
	// per call at most, plus the final turns.
	limit := 4*agentSteps(ag).Limit() + 8
	for range limit {
		done, err := ax.next(ctx)
		if err != nil || done {
			return err
		}
	}
	return x.End(ctx, nil, core.RunFailed, "agent_loop", "the agent run did not settle", "❌ The agent run did not settle; it was stopped.")
}

func agentSteps(ag *runtime) llm.Steps { return llm.Steps{Max: ag.MaxSteps} }

// stepAt is the run's step idx, or nil.
func (ax *exec) stepAt(idx int) *core.Step {
	for i := range ax.run.Steps {
		if ax.run.Steps[i].Index == idx {
			return &ax.run.Steps[i]
		}
	}
	return nil
}

// load reads the session's history: the messages of the thread's earlier
// runs (all final: one run of a thread is active at a time), then this
// run's. Later runs' messages — a queued turn's message is stored when it
// arrives — are left out: a run is known by its first message, and the
// runs of a thread are started in order.
func (ax *exec) load(ctx context.Context) error {
	recs, err := ax.l.opts.Store.AgentHistory(ctx, ax.run.Thread, 0)
	if err != nil {
		return fmt.Errorf("load agent history: %w", err)
	}
	first := map[string]int64{}
	for _, r := range recs {
		if _, ok := first[r.RunID]; !ok {
			first[r.RunID] = r.Seq
		}
	}
	mineFrom, ok := first[ax.run.ID]
	if !ok {
		mineFrom = math.MaxInt64
	}
	var earlier, mine []llm.Message
	for _, r := range recs {
		if r.RunID != ax.run.ID && first[r.RunID] > mineFrom {
			continue // a later turn
		}
		var m llm.Message
		if err := json.Unmarshal(r.Message, &m); err != nil {
			ax.log.Warn("skipping an unreadable agent message", "seq", r.Seq, "err", err)
			continue
		}
		if r.RunID == ax.run.ID {
			mine = append(mine, m)
		} else {
			earlier = append(earlier, m)
		}
	}
	ax.hist = append(earlier, mine...)
	ax.mine = len(earlier)
	return nil
}

// message is the agent.message event of m.
func (ax *exec) message(m llm.Message) core.RunEvent {
	return ax.host.Event(ax.run.ID, core.EventAgentMessage, m)
}

// commit checkpoints c with the messages appended to the history, and
// mirrors them locally once committed.
func (ax *exec) commit(ctx context.Context, c core.Checkpoint, ms ...llm.Message) error {
	for _, m := range ms {
		c.Events = append(c.Events, ax.message(m))
	}
	if err := ax.Checkpoint(ctx, c); err != nil {
		return err
	}
	ax.hist = append(ax.hist, ms...)
	return nil
}

// next advances the run by one committed message; done reports that the
// execution ends (suspended, finished, or stopped).
func (ax *exec) next(ctx context.Context) (done bool, err error) {
	mine := ax.hist[ax.mine:]
	if len(mine) == 0 {
		um := llm.UserMessage(ax.run.CreatedAt, RequestParts(ax.run.Thread.Channel, ax.run.Requester, ax.run.Reason, ax.run.Attachments)...)
		return false, ax.commit(ctx, core.Checkpoint{}, um)
	}
	last, used, turns := -1, 0, 0
	for i, m := range mine {
		if m.Role == llm.RoleAssistant {
			last = i
			used += len(m.Calls)
			turns++
		}
	}
	if last < 0 {
		return ax.modelTurn(ctx, used, turns)
	}
	asst := mine[last]
	if len(asst.Calls) == 0 {
		// The reply was committed with the run's end; only a run found
		// running after that (never, the end is atomic) gets here.
		return true, ax.finish(ctx, asst, nil)
	}
	answered := map[string]bool{}
	for _, m := range mine[last+1:] {
		if m.Role == llm.RoleTool {
			answered[m.CallID] = true
		}
	}
	base := used - len(asst.Calls)
	admitted := max(0, agentSteps(ax.ag).Limit()-base)
	var open []turnCall
	for k, c := range asst.Calls {
		if !answered[c.ID] {
			open = append(open, turnCall{call: c, idx: base + k, admitted: k < admitted})
		}
	}
	if len(open) > 0 {
		return ax.handleCall(ctx, open[0], open[1:])
	}
	return ax.modelTurn(ctx, used, turns)
}

// turnCall is one call of the stored model turn with its step index and
// whether max_steps admits it.
type turnCall struct {
	call     llm.Call
	idx      int
	admitted bool
}

// modelTurn calls the model and commits its answer: the final reply ends
// the run; tool calls are stored before any of them is gated.
func (ax *exec) modelTurn(ctx context.Context, used, turns int) (bool, error) {
	l, ag, host := ax.l, ax.ag, ax.host
	if msg := ax.requiredDown(ctx); msg != "" {
		l.turnEnded(ag.Name, "required_server_down")
		return true, ax.End(ctx, nil, core.RunFailed, "required_server_down", msg, "❌ "+msg)
	}
	steps := llm.Steps{Max: ag.MaxSteps, Used: used}
	tb := ax.turnToolbox(ctx)
	ax.resolveFiles(ctx)
	req, built := llm.BuildRequest(ax.system(), ax.hist, tb, ag.Window)
	req.MaxTokens = ag.MaxTokens
	if steps.Spent() || turns > steps.Limit() {
		req.ToolChoice = llm.ToolsNone
	}
	if built.Dropped > 0 || built.Truncated > 0 {
		ax.log.Debug("agent history bounded", "dropped", built.Dropped, "truncated", built.Truncated, "bytes", built.Bytes)
	}
	start := time.Now()
	sink := l.deltas.sink(ax.run.ID)
	var stopStream func()
	if host.Streams(ax.run.Thread.Channel) {
		if ax.stream == nil {
			ax.stream = &streamer{l: l, run: ax.run}
		}
		st, hub := ax.stream, sink
		sink = func(d llm.Delta) { hub(d); st.add(d) }
		stop, done := make(chan struct{}), make(chan struct{})
		go func() { defer close(done); st.loop(ctx, stop) }()
		stopStream = func() { close(stop); <-done }
	}
	resp, err := ag.Model.Stream(ctx, req, sink)
	if stopStream != nil {
		stopStream()
	}
	took := time.Since(start)
	if err != nil {
		l.modelCalled(ag.Name, took, nil)
		if ctx.Err() != nil {
			// Cut off inside a model call: nothing was stored, so the
			// next holder calls the model again (calls change nothing).
			return true, gate.ErrShutdown
		}
		l.turnEnded(ag.Name, "model_error")
		text := "❌ " + modelProblem(ag, err)
		return true, ax.End(ctx, nil, core.RunFailed, "model_error", modelProblem(ag, err), text)
	}
	l.modelCalled(ag.Name, took, &resp.Usage)
	usage := resp.Usage
	m := llm.Message{Role: llm.RoleAssistant, Text: resp.Text, Usage: &usage, Stop: resp.Stop, Model: resp.Model, At: l.now()}
	for _, tc := range resp.ToolCalls {
		m.Calls = append(m.Calls, tb.Resolve(tc))
	}
	if len(m.Calls) == 0 || req.ToolChoice == llm.ToolsNone {
		// With tools off the answer is final, even if the model still
		// asked for calls.
		m.Calls = nil
		l.turnEnded(ag.Name, "finished")
		return true, ax.finish(ctx, m, &m)
	}
	var evs []core.RunEvent
	var out []core.OutboxMessage
	if text := strings.TrimSpace(m.Text); text != "" {
		// What the model says before its calls is part of the
		// conversation: the thread gets it, in order, before any card.
		msg := host.Reply(ax.run, text)
		if seg := ax.streamSegment(); seg != "" {
			// It streamed: its message takes this text as said, and the
			// next turn streams into a message of its own.
			msg.Kind, msg.Replaces = core.KindStreamEnd, seg
			ax.stream.next()
		}
		out = host.ToThread(ax.run.Thread, msg)
		evs = append(evs, host.Event(ax.run.ID, core.EventMessageCommitted, map[string]any{"message_id": msg.ID, "text": m.Text, "final": false}))
	} else if ax.stream != nil {
		ax.stream.next()
	}
	return false, ax.commit(ctx, core.Checkpoint{Events: evs, Outbox: out}, m)
}

// streamSegment is the outbox id of the message the current model turn
// streamed into, or "" when none was queued.
func (ax *exec) streamSegment() string {
	if ax.stream == nil {
		return ""
	}
	return ax.stream.segment()
}

func (ax *exec) system() string { return ax.ag.system }

// requiredSources is the optional capability of Options.Lookup whose
// sources an agent turn cannot do without (upstream MCP servers marked
// required): RequiredDown names each one that is down now, with why.
type requiredSources interface {
	RequiredDown(ctx context.Context) map[string]error
}

// requiredDown says why the turn may not go on — a required source that
// is down and whose tools the agent's globs reach — or "".
func (ax *exec) requiredDown(ctx context.Context) string {
	rs, ok := ax.l.opts.Lookup.(requiredSources)
	if !ok {
		return ""
	}
	down := rs.RequiredDown(ctx)
	names := make([]string, 0, len(down))
	for name := range down {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		for _, g := range ax.ag.Tools {
			server, _, dotted := strings.Cut(g, ".")
			if !dotted && !strings.ContainsAny(g, "*?[") {
				continue // a plain tool name, not a server's
			}
			if ok, _ := path.Match(server, name); ok {
				return fmt.Sprintf("The MCP server %s is required and unavailable (%v); the turn ended without it. Send it again once the server is back.",
					name, down[name])
			}
		}
	}
	return ""
}

// modelProblem is the sentence the thread gets for a failed model call.
func modelProblem(ag *runtime, err error) string {
	if ae := llm.AsError(err); ae != nil {
		return ae.ThreadMessage()
	}
	return fmt.Sprintf("The model %q failed: %v. The turn ended; send the message again.", ag.ModelName, err)
}

// finish ends the run with the model's answer as the reply; store, when
// set, is committed with it.
func (ax *exec) finish(ctx context.Context, answer llm.Message, store *llm.Message) error {
	text := strings.TrimSpace(answer.Text)
	if text == "" {
		text = "(The agent gave no answer.)"
	}
	if store != nil {
		ax.Queue(ax.message(*store))
	}
	if seg := ax.streamSegment(); seg != "" {
		ax.EndReplacing(seg) // the answer replaces the streamed text
	}
	return ax.End(ctx, nil, core.RunSucceeded, "", "", text)
}

// result commits the tool result of call, with the step's outcome.
func (ax *exec) result(ctx context.Context, call llm.Call, o llm.Outcome, st *core.Step, audit ...approvals.AuditEntry) (bool, error) {
	if o.Kind == llm.OutcomeInvalid && o.Problem == "" {
		o.Problem = call.Problem
	}
	msg := o.Result(call, ax.l.now())
	return false, ax.commit(ctx, core.Checkpoint{Step: st, Audit: audit}, msg)
}

// toolSource labels a tool's output for the model: upstream MCP tools
// ("<server>.<tool>") are "mcp:…".
func toolSource(name string) string {
	if strings.Contains(name, ".") {
		return "mcp:" + name
	}
	return "tool:" + name
}

func (l *Loop) turnEnded(agent, outcome string) {
	if l.opts.Observer != nil {
		l.opts.Observer.TurnEnded(agent, outcome)
	}
}

func (l *Loop) modelCalled(agent string, took time.Duration, usage *llm.Usage) {
	if l.opts.Observer != nil {
		l.opts.Observer.ModelCalled(agent, took, usage)
	}
}
