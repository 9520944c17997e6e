// Package adaptertest is the kit every adapter's tests use: a Harness that
// runs the real engine and the real delivery pipeline on a fresh store with
// the adapter under test plugged in, and RunConformance, the rules every
// adapter must pass (sane limits, inert rendering of hostile text, long
// replies chunked in order, the card round trip, bad input changes nothing;
// conversations, questions and "Approve all" through the adapter's own
// receive path; the thread reading as the conversation).
//
// A typical adapter test starts a fake platform server on 127.0.0.1, builds
// its adapter against that server inside HarnessOptions.Platform (where the
// harness's Engine is available as Sink and CardSource), then drives the
// adapter's inbound handler and checks what the fake server received.
package adaptertest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/delivery"
	"github.com/opsgate/opsgate/core/engine"
	"github.com/opsgate/opsgate/core/tools"
	"github.com/opsgate/opsgate/internal/testkit"
	"github.com/opsgate/opsgate/store/pgtest"
)

// DefaultApprovers decide the default deploy flow's approvals when
// HarnessOptions.Approvers is empty.
var DefaultApprovers = []string{"console:admin"}

// HarnessOptions configures a Harness. Everything is optional except
// Platform for tests that deliver.
type HarnessOptions struct {
	// Platform builds the adapter under test once the harness exists, so
	// it can be handed h.Engine as its core.Sink and core.CardSource. Nil
	// runs no delivery worker (inbound-only tests).
	Platform func(h *Harness) delivery.Platform
	// Flows and Tools replace the default deploy flow and tool; Policy
	// replaces the default "ask Approvers for deploy" policy.
	Flows  []engine.Flow
	Tools  []*tools.Tool
	Policy *approvals.Policy
	Groups map[string][]string
	// People and Requesters are the trust configuration (engine.Trust):
	// who is whom, and who may start runs per channel (unset: anyone).
	People     map[string][]string
	Requesters map[string]engine.Requesters
	// Approvers decide the default policy's asks (DefaultApprovers if empty).
	Approvers         []string
	AllowSelfApproval bool
	// OpenStore, when set, opens the store instead of a fresh SQLite file
	// (e.g. store/postgres on pgtest.DSN(t); that test package then needs
	// `func TestMain(m *testing.M) { pgtest.Main(m) }`). It must return a
	// migrated, empty store; the harness closes it at cleanup.
	OpenStore func(ctx context.Context, t *testing.T) (core.Store, error)
	// Postgres runs on a fresh Postgres database from pgtest.DSN (the
	// test package needs `func TestMain(m *testing.M) { pgtest.Main(m) }`).
	Postgres bool
	// ApprovalTTL defaults to an hour.
	ApprovalTTL time.Duration
	// PublicURL prefixes console links on cards (default https://ops.example.test).
	PublicURL string
	// Worker adjusts the delivery worker's options before it is built.
	Worker func(*delivery.Options)
	// Logger receives engine and delivery logs (default: discarded).
	Logger *slog.Logger
	// Agents are the engine's LLM agents (free text goes to the default).
	Agents []engine.Agent
	// MoreTools are added to the tools (the default deploy tool, or
	// Tools), and MoreRules to the policy's rules (the default policy, or
	// Policy's): what a case needs beside what the adapter configured.
	MoreTools []*tools.Tool
	MoreRules []approvals.Rule
	// Progress paces the progress of long steps (engine defaults if zero).
	Progress engine.ProgressOptions
}

// Harness is one engine and one delivery worker on a fresh store, both
// stopped (and the store closed) at t.Cleanup.
type Harness struct {
	T        *testing.T
	Store    core.Store
	Engine   *engine.Engine
	Platform delivery.Platform
	Worker   *delivery.Worker
	// Deploy records the default deploy tool's dispatches (also when
	// custom Tools are given, it is simply unused).
	Deploy *Recorder

	events atomic.Int64
}

// Call is one dispatch of a tool as the Recorder saw it.
type Call struct {
	Tool           string
	RunID          string
	IdempotencyKey string
	Args           map[string]any
}

// Recorder is a tools.Runner that records every call and answers
// "deployed <service> <version> to <env>", so tests can assert that a tool
// ran exactly once, with which arguments and idempotency key.
type Recorder struct {
	Name string
	mu   sync.Mutex
	// calls in dispatch order.
	calls []Call
}

// Run implements tools.Runner.
func (r *Recorder) Run(ctx context.Context, c tools.Call) (tools.Result, error) {
	r.mu.Lock()
	r.calls = append(r.calls, Call{Tool: r.Name, RunID: c.RunID, IdempotencyKey: c.IdempotencyKey, Args: c.Args})
	r.mu.Unlock()
	return tools.Result{Output: fmt.Sprintf("deployed %v %v to %v", c.Args["service"], c.Args["version"], c.Args["env"])}, nil
}

// Preview implements tools.Runner: the dry run shown on cards.
func (r *Recorder) Preview(ctx context.Context, c tools.Call) (string, error) {
	return fmt.Sprintf("would deploy %v %v to %v", c.Args["service"], c.Args["version"], c.Args["env"]), nil
}

// Calls returns the calls so far, in order.
func (r *Recorder) Calls() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// DeployFlow is the default flow: `deploy {service} {version} {env=staging}`.
func DeployFlow() engine.Flow {
	return engine.Flow{
		Name: "deploy", Description: "Deploy a version", Command: "deploy {service} {version} {env=staging}",
		Steps: []engine.FlowStep{{Tool: "deploy", Args: map[string]any{
			"service": "{{.service}}", "version": "{{.version}}", "env": "{{.env}}",
		}}},
	}
}

// DeployTool is the default high-impact deploy tool with the README's
// input schema, dispatching to r.
func DeployTool(t testing.TB, r *Recorder) *tools.Tool {
	t.Helper()
	schema, err := approvals.CompileSchema("deploy", map[string]any{
		"type":     "object",
		"required": []any{"service", "version"},
		"properties": map[string]any{
			"service": map[string]any{"type": "string", "pattern": "^[a-z0-9-]+$"},
			"version": map[string]any{"type": "string"},
			"env":     map[string]any{"type": "string", "default": "staging"},
		},
	})
	if err != nil {
		t.Fatalf("adaptertest: deploy schema: %v", err)
	}
	return &tools.Tool{
		Name: "deploy", Description: "Deploy a service version to an environment",
		Risk: approvals.RiskHighImpact, Destructive: true, Schema: schema, Runner: r,
	}
}

// NewHarness starts the engine (and, with a Platform, the delivery worker)
// on a fresh store. Leases and polls are short so tests run in
// milliseconds, not seconds.
func NewHarness(t *testing.T, o HarnessOptions) *Harness {
	t.Helper()
	ctx := context.Background()
	h := &Harness{T: t, Deploy: &Recorder{Name: "deploy"}}
	var store core.Store
	var err error
	switch {
	case o.OpenStore != nil:
		store, err = o.OpenStore(ctx, t)
	case o.Postgres:
		store, err = openPostgres(ctx, pgtest.DSN(t))
	default:
		store, err = openSQLite(ctx, filepath.Join(t.TempDir(), "opsgate.db"))
	}
	if err != nil {
		t.Fatalf("adaptertest: open store: %v", err)
	}
	h.Store = store
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	approvers := o.Approvers
	if len(approvers) == 0 {
		approvers = DefaultApprovers
	}
	eo := engine.Options{
		Store: store, Flows: o.Flows, Tools: o.Tools, Policy: o.Policy, Groups: o.Groups,
		People: o.People, Requesters: o.Requesters,
		ApprovalTTL: o.ApprovalTTL, AllowSelfApproval: o.AllowSelfApproval,
		Concurrency: 8, Lease: 2 * time.Second, PollInterval: 100 * time.Millisecond,
		PublicURL: o.PublicURL, Owner: "adaptertest-engine", Logger: logger, Agents: o.Agents, Progress: o.Progress,
	}
	if eo.Flows == nil {
		eo.Flows = []engine.Flow{DeployFlow()}
	}
	if eo.Tools == nil {
		eo.Tools = []*tools.Tool{DeployTool(t, h.Deploy)}
	}
	if eo.Policy == nil {
		eo.Policy = &approvals.Policy{Rules: []approvals.Rule{
			// A ladder whose first step falls long after any test, so
			// every card says what happens next (CardRoundTrip).
			{Tool: "deploy", Effect: approvals.EffectAsk, Approvers: approvers,
				Escalation: []approvals.Step{{After: 45 * time.Minute, Remind: true}}},
		}}
	}
	eo.Tools = append(slices.Clone(eo.Tools), o.MoreTools...)
	if len(o.MoreRules) > 0 {
		p := *eo.Policy
		p.Rules = append(slices.Clone(p.Rules), o.MoreRules...)
		eo.Policy = &p
	}
	if eo.ApprovalTTL == 0 {
		eo.ApprovalTTL = time.Hour
	}
	if eo.PublicURL == "" {
		eo.PublicURL = "https://ops.example.test"
	}
	h.Engine, err = engine.New(eo)
	if err != nil {
		store.Close()
		t.Fatalf("adaptertest: engine: %v", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		store.Close()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := h.Engine.Run(runCtx); err != nil {
			t.Errorf("adaptertest: engine run: %v", err)
		}
	}()
	if o.Platform == nil {
		return h
	}
	h.Platform = o.Platform(h)
	wo := delivery.Options{
		Store: store, Cards: h.Engine, Questions: h.Engine, Platform: h.Platform, Owner: "adaptertest-delivery",
		LeaseTTL: 3 * time.Second, PollInterval: 100 * time.Millisecond, Logger: logger,
		Subscribe: store.Subscribe,
	}
	if o.Worker != nil {
		o.Worker(&wo)
	}
	h.Worker, err = delivery.New(wo)
	if err != nil {
		t.Fatalf("adaptertest: delivery worker: %v", err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := h.Worker.Run(runCtx); err != nil {
			t.Errorf("adaptertest: delivery run: %v", err)
		}
	}()
	return h
}

func openPostgres(ctx context.Context, dsn string) (core.Store, error) {
	s, err := testkit.OpenPostgres(ctx, dsn)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func openSQLite(ctx context.Context, path string) (core.Store, error) {
	s, err := testkit.OpenSQLite(ctx, path)
	if err != nil {
		return nil, err
	}
	return s, nil
}
