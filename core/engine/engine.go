// Package engine is the adapter-agnostic core of opsgate: it turns
// ChannelEvents into durable runs, drives each run step by step behind the
// allow/ask/deny gate, suspends asks as approvals, resumes runs when a
// decision lands and dispatches every tool call at most once.
//
// All state lives in the core.Store: a run is checkpointed at every step
// boundary, so any replica holding the run's lease can continue it after a
// restart, a deploy or the loss of the replica that started it.
package engine

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"text/template"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/agentrun"
	"github.com/opsgate/opsgate/core/agenttask"
	"github.com/opsgate/opsgate/core/authority"
	"github.com/opsgate/opsgate/core/gate"
	"github.com/opsgate/opsgate/core/router"
	"github.com/opsgate/opsgate/core/tools"
)

// Defaults applied by New for zero Options fields.
const (
	DefaultConcurrency  = 16
	DefaultLease        = 30 * time.Second
	DefaultPollInterval = time.Second
	DefaultApprovalTTL  = time.Hour
)

// Bounds that keep one misbehaving tool or a huge backlog from stalling the
// engine; they are not configuration because no operator should need them.
const (
	previewTimeout  = 30 * time.Second
	previewMaxChars = 4000
	foldChars       = 3000
	sweepBatch      = 100
	storeRetryBase  = 50 * time.Millisecond
	// storeRetryMax caps the backoff between attempts at a store that does
	// not answer, so a run continues within about a second of its return.
	storeRetryMax = time.Second
	// storeRefusals bounds how often one checkpoint is tried again when
	// the store answers (the run reads back ours and unchanged) but the
	// write keeps failing: that is a refusal, not an outage.
	storeRefusals    = 8
	maxShutdownDrain = 30 * time.Second
)

// Options configures an Engine. Store, Flows and Tools are required; every
// other field has a sensible default.
type Options struct {
	Store  core.Store
	Flows  []Flow
	Tools  []*tools.Tool
	Policy *approvals.Policy
	// Groups expands "group:<name>" approver entries into identities.
	Groups map[string][]string
	// People maps a person to their identities; quorum, self-approval and
	// eligibility count persons.
	People map[string][]string
	// Requesters says who may start runs per channel (see Trust).
	Requesters map[string]Requesters
	// SessionTTL is how long a session grant lasts; default 1h.
	SessionTTL time.Duration
	// Lookup, when set, resolves the tools Tools does not hold, when a
	// step runs: upstream MCP servers (core/upstream), whose tools are only
	// known at run time and may change. Flows may then name tools New
	// cannot see; a step whose tool cannot be had fails clearly.
	Lookup tools.ToolLookup
	// Agents are the LLM agents free text and Agent API turns go to
	// (core/agentrun); the Store keeps their conversations.
	Agents []Agent
	// AgentAttendance says whether someone holds an Agent API session's
	// event stream (cmd passes the API's attendance). An approval in such a
	// session waits only while someone does; otherwise the call is denied
	// at once and the model told nobody could approve it. Nil: always
	// attended.
	AgentAttendance interface{ Attended(core.Thread) bool }
	// QuestionAnswerers says who may answer an agent's ask_user question:
	// AnswerRequesterOrApprovers (default) or AnswerRequester.
	QuestionAnswerers string

	// ApprovalTTL is how long an approval waits before it expires.
	ApprovalTTL time.Duration
	// AllowSelfApproval lets requesters approve their own calls under every
	// rule (the global approvals.allow_self_approval); a rule may allow it
	// for itself (approvals.Rule.AllowSelfApproval).
	AllowSelfApproval bool

	// Concurrency bounds the runs this replica executes at once.
	Concurrency int
	// AgentTaskReceipts bounds the tool calls one agent task may make;
	// 0 means agenttask.MaxAgentReceipts.
	AgentTaskReceipts int
	// Lease is how long a claimed run stays ours without a heartbeat; a
	// replica that dies loses its runs to the others after Lease.
	Lease time.Duration
	// PollInterval is the fallback wake-up when no notification arrives,
	// and the period of the expiry sweeper.
	PollInterval time.Duration
	// waitingPage is how many runs waiting for input one sweep reads
	// (sweepWaiting); 0 means sweepBatch. Tests make it small.
	waitingPage int
	// Progress paces the progress of long steps (progress.go).
	Progress ProgressOptions

	// Direct, when set, finds the direct conversation with an identity on
	// its platform (cmd builds it from the adapters that are
	// core.DirectMessenger): escalation reminds approvers there and hands
	// escalated approvers the card there.
	Direct func(identity string) (core.Thread, bool)

	// PublicURL prefixes console links on cards and folded replies:
	// PublicURL + "/approvals/" + id and PublicURL + "/runs/" + id.
	PublicURL string
	// Owner identifies this replica in leases; default hostname-pid-random.
	Owner string
	// Receipts, when set, signs a receipt for every approval people
	// decide, in the deciding transaction (approvals/receipt); the gate
	// hands it to the tool that runs under it.
	Receipts ReceiptSigner

	Now    func() time.Time
	NewID  func() string
	Logger *slog.Logger
	// Registerer, when set, receives the engine's metrics.
	Registerer prometheus.Registerer

	// startRecordDue, when set (tests), replaces the delay of a deferred
	// start record (core/gate).
	startRecordDue func() <-chan time.Time
}

// Flow is a named sequence of tool calls started by a chat command.
type Flow struct {
	Name, Description string
	// Command is the router pattern, e.g. "deploy {service} {version} {env=staging}".
	Command string
	Steps   []FlowStep
}

// FlowStep is one tool call of a flow. String values in Args (also nested
// in maps and lists) are text/templates over the arguments the command
// matched, e.g. "{{.service}}".
type FlowStep struct {
	Tool string
	Args map[string]any
	// Name is the step's stage name; default Tool, or "agent_task".
	Name string
	// AgentTask, instead of Tool, makes the step work an external agent
	// performs (agenttask.go).
	AgentTask *AgentTask
}

// Engine runs flows durably. It is safe for concurrent use: HandleEvent,
// Decide and Cancel may be called from any goroutine while Run executes.
type Engine struct {
	store  core.Store
	opts   Options
	router *router.Router
	flows  map[string]*compiledFlow
	tools  tools.Static
	// gate is the one path of every tool call (core/gate).
	gate *gate.Gate
	log  *slog.Logger
	m    *metrics
	// trustNow is the live policy, people and requesters (Reload).
	trustNow atomic.Pointer[trustState]
	// auth judges who may do what under trustNow (trust.go).
	auth *authority.Authority

	// running tracks the runs this replica executes, to bound concurrency
	// and to wait for them on shutdown.
	mu      sync.Mutex
	running int
	// active holds the ids of runs executing here. A run whose lease
	// lapsed (a slow store, a paused process) can be claimed again by this
	// same owner; the owner guard cannot tell the two executions apart,
	// so the second is never started.
	active map[string]bool
	// reclaimed marks active runs claimed again meanwhile: when their
	// execution ends, the run is re-checked so a claim is never dropped.
	reclaimed map[string]bool
	// released marks active runs whose execution already handed the run
	// back (suspended, finished, requeued) and is only returning: a claim
	// of one of them is a requeue (a quick decision), not a lapsed lease.
	released map[string]bool
	// abandoning marks active runs this replica gave up executing after a
	// store failure and is handing back: the heartbeat leaves their
	// leases alone, so no run is kept that nothing executes.
	abandoning map[string]bool
	wg         sync.WaitGroup

	// tasks serves the agent calls of agent_task steps (core/agenttask).
	tasks *agenttask.Tasks

	// loop runs the LLM agents' turns (core/agentrun): Options.Agents by
	// name, the default agent free text that matches no flow goes to.
	loop *agentrun.Loop
	// streamTo are the channels agent turns stream into (StreamInto).
	streamTo atomic.Pointer[map[string]bool]
	// fetchers fetch the files of each channel's messages (FetchFilesFrom).
	fetchers atomic.Pointer[map[string]core.AttachmentFetcher]
}

type compiledFlow struct {
	Flow
	steps []compiledStep
}

type compiledStep struct {
	name string
	// stage is the step's stage name; agent, when set, makes it an
	// agent_task step (and tool is nil).
	stage string
	agent *compiledAgentTask
	// tool is nil for a tool Options.Lookup resolves when the step runs.
	tool *tools.Tool
	args map[string]any // string values replaced by *template.Template
}

// New validates the options and builds an Engine. It fails on an unknown
// tool in a flow (unless Options.Lookup may know it when the step runs),
// a malformed command pattern or argument template.
func New(o Options) (*Engine, error) {
	if o.Store == nil {
		return nil, errors.New("engine: no store")
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.ApprovalTTL <= 0 {
		o.ApprovalTTL = DefaultApprovalTTL
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.NewID == nil {
		o.NewID = newUUID
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Owner == "" {
		o.Owner = defaultOwner()
	}
	e := &Engine{
		store:      o.Store,
		opts:       o,
		flows:      map[string]*compiledFlow{},
		tools:      tools.Static{},
		log:        o.Logger.With("component", "engine", "owner", o.Owner),
		active:     map[string]bool{},
		reclaimed:  map[string]bool{},
		released:   map[string]bool{},
		abandoning: map[string]bool{},
	}
	pol := approvals.Policy{}
	if o.Policy != nil {
		pol = *o.Policy
	}
	pol.AllowSelfApproval = pol.AllowSelfApproval || o.AllowSelfApproval
	e.trustNow.Store(newTrustState(Trust{Policy: &pol, People: o.People, Groups: o.Groups, Requesters: o.Requesters, SessionTTL: o.SessionTTL}))
	if err := e.newAuthority(); err != nil {
		return nil, err
	}
	for _, t := range o.Tools {
		if err := t.Check(); err != nil {
			return nil, fmt.Errorf("engine: %w", err)
		}
		if _, dup := e.tools[t.Name]; dup {
			return nil, fmt.Errorf("engine: duplicate tool %q", t.Name)
		}
		e.tools[t.Name] = t
	}
	var rflows []router.Flow
	for _, f := range o.Flows {
		cf := &compiledFlow{Flow: f}
		if len(f.Steps) == 0 {
			return nil, fmt.Errorf("engine: flow %q has no steps", f.Name)
		}
		for i, s := range f.Steps {
			if s.AgentTask != nil {
				cs, err := e.compileAgentStep(f.Name, i, s)
				if err != nil {
					return nil, err
				}
				cf.steps = append(cf.steps, cs)
				continue
			}
			t, ok := e.tools[s.Tool]
			if !ok && o.Lookup == nil {
				return nil, fmt.Errorf("engine: flow %q step %d: unknown tool %q", f.Name, i, s.Tool)
			}
			args, err := compileArgs(s.Args)
			if err != nil {
				return nil, fmt.Errorf("engine: flow %q step %d: %w", f.Name, i, err)
			}
			cf.steps = append(cf.steps, compiledStep{name: s.Tool, stage: cmp.Or(s.Name, s.Tool), tool: t, args: args})
		}
		e.flows[f.Name] = cf
		rflows = append(rflows, router.Flow{Name: f.Name, Description: f.Description, Command: f.Command})
	}
	r, err := router.New(rflows)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	e.router = r
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, fmt.Errorf("engine: metrics: %w", err)
	}
	e.m = m
	if err := registerBacklog(o.Registerer, newBacklog(o.Store, func() time.Time { return e.now() }, e.log)); err != nil {
		return nil, fmt.Errorf("engine: metrics: %w", err)
	}
	e.gate, err = gate.New(gate.Options{
		Store: o.Store, Tools: toolSet{e}, Trust: e.gateTrust, ApprovalTTL: o.ApprovalTTL,
		Now: o.Now, NewID: o.NewID, Logger: o.Logger, Observer: m, StartRecordDue: o.startRecordDue,
	})
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	e.tasks, err = agenttask.New(agenttask.Options{
		Store: o.Store, Gate: e.gate, Host: taskHost{e}, Owner: o.Owner, Lease: o.Lease,
		ApprovalTTL: o.ApprovalTTL, MaxReceipts: o.AgentTaskReceipts, Now: o.Now, Logger: e.log,
	})
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	e.loop, err = agentrun.New(agentrun.Options{
		Store: o.Store, Host: loopHost{e}, Agents: o.Agents, Tools: e.tools, Lookup: o.Lookup,
		Attendance: o.AgentAttendance, ApprovalTTL: o.ApprovalTTL, Owner: o.Owner,
		Now: o.Now, NewID: o.NewID, Observer: m,
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// Owner is the replica id this engine claims runs under.
func (e *Engine) Owner() string { return e.opts.Owner }

// FlowsHelp lists every flow with its usage, for "help" replies and the
// console.
func (e *Engine) FlowsHelp() string { return e.router.Help() }

func (e *Engine) now() time.Time { return e.opts.Now().UTC() }

// toolSet is the engine's tools as the gate looks them up: the static
// ones, then Options.Lookup's.
type toolSet struct{ e *Engine }

func (ts toolSet) LookupTool(ctx context.Context, name string) (*tools.Tool, error) {
	return ts.e.lookupTool(ctx, name)
}

// lookupTool finds a tool among the static ones, then through
// Options.Lookup; an agent's own sub-agent tools first
// (agentrun.Loop.DelegationTool).
func (e *Engine) lookupTool(ctx context.Context, name string) (*tools.Tool, error) {
	if t, err := e.loop.DelegationTool(ctx, name); t != nil || err != nil {
		return t, err
	}
	t, err := e.tools.LookupTool(ctx, name)
	if err == nil || e.opts.Lookup == nil {
		return t, err
	}
	t, err = e.opts.Lookup.LookupTool(ctx, name)
	if err == nil && t == nil {
		err = fmt.Errorf("%w %q", tools.ErrUnknownTool, name)
	}
	return t, err
}

func newUUID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}

func defaultOwner() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "opsgate"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// compileArgs parses every string in a step's argument tree as a template,
// so a malformed template fails at startup rather than mid-run.
func compileArgs(args map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(args))
	for k, v := range args {
		c, err := compileValue(k, v)
		if err != nil {
			return nil, err
		}
		out[k] = c
	}
	return out, nil
}

func compileValue(path string, v any) (any, error) {
	switch x := v.(type) {
	case string:
		t, err := template.New(path).Option("missingkey=error").Parse(x)
		if err != nil {
			return nil, fmt.Errorf("argument %s: %w", path, err)
		}
		return t, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, vv := range x {
			c, err := compileValue(path+"."+k, vv)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, vv := range x {
			c, err := compileValue(fmt.Sprintf("%s[%d]", path, i), vv)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	}
	return v, nil
}
