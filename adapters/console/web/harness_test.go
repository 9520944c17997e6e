package web

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	llm "github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/engine"
	"github.com/opsgate/opsgate/core/schedule"
	"github.com/opsgate/opsgate/core/tools"
	"github.com/opsgate/opsgate/internal/testkit"
	"github.com/opsgate/opsgate/store/sqlite"
)

// Compile-time checks: the real engine and store satisfy the seams this
// package declares.
var (
	_ Engine = (*engine.Engine)(nil)
	_ Store  = (*sqlite.Store)(nil)
)

// xssOutput is tool output crafted to run script if it were ever rendered
// as HTML: the tests assert it shows as text and never executes.
const xssOutput = `<script>window.__xss=1</script><img src=x onerror="window.__xss=2"> done`

// deployTool echoes its arguments; Preview can be slowed so a test sees the
// card arrive after the page has loaded.
type deployTool struct {
	mu           sync.Mutex
	calls        []map[string]any
	previewDelay time.Duration
}

func (d *deployTool) Run(_ context.Context, call tools.Call) (tools.Result, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, call.Args)
	return tools.Result{Output: fmt.Sprintf("deployed %v %v to %v", call.Args["service"], call.Args["version"], call.Args["env"])}, nil
}

func (d *deployTool) Preview(ctx context.Context, _ tools.Call) (string, error) {
	select {
	case <-time.After(d.previewDelay):
	case <-ctx.Done():
	}
	return "would deploy (dry run)", nil
}

type xssTool struct{}

func (xssTool) Run(context.Context, tools.Call) (tools.Result, error) {
	return tools.Result{Output: xssOutput}, nil
}
func (xssTool) Preview(context.Context, tools.Call) (string, error) { return xssOutput, nil }

// Tokens of the harness: admin signs in; bob and slack:U1 decide through
// the engine, as another surface would.
const (
	adminToken = "admin-token-0123456789"
	bobToken   = "bob-token-0123456789"
)

type bundle struct {
	url    string
	h      http.Handler
	eng    *engine.Engine
	store  *sqlite.Store
	deploy *deployTool
	dbPath string
}

type setupOpts struct {
	previewDelay time.Duration
	publicURL    string
	selfApproval bool
	// tokens are added to admin's and bob's.
	tokens []Token
	// foreverHighImpact lets forever grants cover deploy (high_impact).
	foreverHighImpact bool
	// agent, when set, is the default agent's model (every tool).
	agent llm.Model
	// schedules, when set, are served by a real scheduler.
	schedules []schedule.Schedule
}

// setup builds the console on a real engine and a real SQLite store, with a
// deploy flow that asks group sre and an xss flow that is allowed.
func setup(t *testing.T, so setupOpts) *bundle {
	t.Helper()
	dbPath := filepath.Join(t.TempDir(), "opsgate.db")
	st, err := testkit.OpenSQLite(context.Background(), dbPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	schema, err := approvals.CompileSchema("deploy", map[string]any{
		"type": "object", "required": []any{"service", "version"}, "additionalProperties": false,
		"properties": map[string]any{
			"service": map[string]any{"type": "string", "pattern": "^[a-z0-9-]+$"},
			"version": map[string]any{"type": "string"},
			"env":     map[string]any{"type": "string", "default": "staging"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	deploy := &deployTool{previewDelay: so.previewDelay}
	eng, err := engine.New(engine.Options{
		Store: st,
		Tools: []*tools.Tool{
			{Name: "deploy", Risk: approvals.RiskHighImpact, Destructive: true, Schema: schema, Runner: deploy},
			{Name: "xss", Risk: approvals.RiskRead, Runner: xssTool{}},
			{Name: "scale", Risk: approvals.RiskExternal, Runner: &deployTool{}},
		},
		Flows: []engine.Flow{
			{Name: "deploy", Command: "deploy {service} {version} {env=staging}",
				Steps: []engine.FlowStep{{Tool: "deploy", Args: map[string]any{"service": "{{.service}}", "version": "{{.version}}", "env": "{{.env}}"}}}},
			{Name: "xss", Command: "xss", Steps: []engine.FlowStep{{Tool: "xss", Args: map[string]any{}}}},
			{Name: "scale", Command: "scale {service} {n}", Steps: []engine.FlowStep{{Tool: "scale", Args: map[string]any{"service": "{{.service}}", "n": "{{.n}}"}}}},
		},
		Policy: &approvals.Policy{Rules: []approvals.Rule{
			{Tool: "xss", Effect: approvals.EffectAllow},
			{Tool: "deploy", Effect: approvals.EffectAsk, Approvers: []string{"group:sre"}},
			{Tool: "scale", Effect: approvals.EffectAsk, Approvers: []string{"group:sre"}, Escalation: []approvals.Step{
				{After: 10 * time.Minute, Remind: true}, {After: 30 * time.Minute, AddApprovers: []string{"group:sre"}},
				{After: 2 * time.Hour, Outcome: approvals.TerminalDeny}}},
		}, ForeverHighImpact: so.foreverHighImpact},
		Groups:            map[string][]string{"sre": {"console:admin", "console:bob", "slack:U1"}},
		ApprovalTTL:       time.Hour,
		AllowSelfApproval: so.selfApproval,
		PollInterval:      20 * time.Millisecond,
		Lease:             2 * time.Second,
		PublicURL:         so.publicURL,
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
		Agents:            agents(so.agent),
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- eng.Run(runCtx) }()
	var sched Schedules
	if len(so.schedules) > 0 {
		if sched, err = schedule.New(schedule.Options{Store: st, Inbox: eng, Owner: "test"}, so.schedules); err != nil {
			t.Fatal(err)
		}
	}
	h, err := New(Options{Engine: eng, Store: st, PublicURL: so.publicURL, StreamTick: time.Second, Schedules: sched,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Tokens: append([]Token{{Name: "admin", Token: adminToken, Actor: "console:admin"}, {Name: "bob", Token: bobToken, Actor: "console:bob"}},
			so.tokens...)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	// Close the server (and its open event streams) before stopping the
	// engine, so no handler reads a closed store.
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("engine: %v", err)
		}
	})
	return &bundle{url: srv.URL, h: h, eng: eng, store: st, deploy: deploy, dbPath: dbPath}
}

func agents(m llm.Model) []engine.Agent {
	if m == nil {
		return nil
	}
	return []engine.Agent{{Name: "ops", ModelName: "fake", Model: m, Tools: []string{"*"}, Default: true}}
}

// waitRun polls the store until the run has status (or fails the test).
func (b *bundle) waitRun(t *testing.T, runID string, status core.RunStatus) *core.Run {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute) // a hang backstop
	for {
		run, err := b.store.RunGet(context.Background(), runID)
		if err != nil {
			t.Fatal(err)
		}
		if run.Status == status {
			return run
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %s, want %s", runID, run.Status, status)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitPending returns the pending approval of the newest run in thread.
func (b *bundle) waitPending(t *testing.T, thread string) (*core.Run, *approvals.Approval) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute) // a hang backstop
	for time.Now().Before(deadline) {
		runs, _, err := b.store.RunList(context.Background(), core.RunListParams{Thread: thread, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) == 1 {
			as, _, err := b.store.ApprovalList(context.Background(), approvals.ApprovalListParams{RunID: runs[0].ID, Status: approvals.StatusPending})
			if err != nil {
				t.Fatal(err)
			}
			if len(as) == 1 {
				return runs[0], as[0]
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no pending approval in %s", thread)
	return nil, nil
}

// send records a console message through the engine, as another console
// or API client would.
func (b *bundle) send(t *testing.T, thread, text string) string {
	t.Helper()
	rc, err := b.eng.HandleEvent(context.Background(), core.ChannelEvent{Channel: Channel, EventID: fmt.Sprint(time.Now().UnixNano()),
		Actor: core.Actor{ID: "console:bob"}, Thread: core.Thread{Channel: Channel, Key: thread}, Text: text})
	if err != nil {
		t.Fatal(err)
	}
	return rc.RunID
}
