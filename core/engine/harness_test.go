package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/tools"
	"github.com/opsgate/opsgate/internal/testkit"
	"github.com/opsgate/opsgate/store/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// backend opens stores of one kind; newDSN makes a fresh empty database.
type backend struct {
	name   string
	newDSN func(t testing.TB) string
	open   func(ctx context.Context, dsn string) (core.Store, error)
}

var backends = []backend{
	{
		name:   "sqlite",
		newDSN: func(t testing.TB) string { return filepath.Join(t.TempDir(), "opsgate.db") },
		open: func(ctx context.Context, dsn string) (core.Store, error) {
			s, err := testkit.OpenSQLite(ctx, dsn)
			if err != nil {
				return nil, err
			}
			return s, nil
		},
	},
	{
		name:   "postgres",
		newDSN: func(t testing.TB) string { return testkit.PostgresDSN(t) },
		open: func(ctx context.Context, dsn string) (core.Store, error) {
			s, err := testkit.OpenPostgres(ctx, dsn)
			if err != nil {
				return nil, err
			}
			return s, nil
		},
	},
}

// eachBackend runs f as a parallel subtest per backend.
func eachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f(t, b)
		})
	}
}

// clock is real time plus an offset tests can advance — or, once stopped,
// an instant that moves only when the test advances it.
type clock struct {
	off atomic.Int64
	// still, when set, is the stopped clock's instant (Unix nanoseconds).
	still atomic.Int64
}

func (c *clock) Now() time.Time {
	if s := c.still.Load(); s != 0 {
		return time.Unix(0, s).Add(time.Duration(c.off.Load()))
	}
	return time.Now().Add(time.Duration(c.off.Load()))
}

func (c *clock) Advance(d time.Duration) { c.off.Add(int64(d)) }

// stop makes the clock stand still at its current reading: from then on
// no lease lapses and nothing falls due but by Advance, however slowly a
// loaded machine runs the test. Call it before the engines start.
func (c *clock) stop() { c.still.Store(time.Now().UnixNano()) }

// recorder is a Runner that records every dispatch, so tests can count
// them and check their idempotency keys and arguments.
type recorder struct {
	name string
	mu   sync.Mutex
	// calls holds every Run call in order.
	calls    []tools.Call
	previews int
	inflight int
	peak     int
	// fail makes Run return an error with this output.
	fail string
	// previewErr makes Preview fail.
	previewErr error
	// gate, when set, holds every Run until it is closed (or ctx ends).
	gate chan struct{}
	// started receives the run id of each call as it begins, if set.
	started chan string
	// delay, when set, is how long each Run takes.
	delay time.Duration
}

func (r *recorder) Run(ctx context.Context, c tools.Call) (tools.Result, error) {
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.inflight++
	r.peak = max(r.peak, r.inflight)
	gate, started, delay := r.gate, r.started, r.delay
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.inflight--
		r.mu.Unlock()
	}()
	if started != nil {
		started <- c.RunID
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return tools.Result{}, ctx.Err()
		}
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return tools.Result{}, ctx.Err()
		}
	}
	if r.fail != "" {
		return tools.Result{Output: r.fail, ExitCode: 2}, &tools.ExitError{Code: 2}
	}
	return tools.Result{Output: fmt.Sprintf("%s ran with %s", r.name, core.ArgsFromMap(c.Args))}, nil
}

func (r *recorder) Preview(ctx context.Context, c tools.Call) (string, error) {
	r.mu.Lock()
	r.previews++
	perr := r.previewErr
	r.mu.Unlock()
	if perr != nil {
		return "", perr
	}
	return "would " + r.name + " " + fmt.Sprint(core.ArgsFromMap(c.Args)), nil
}

// hold makes every call wait until the returned gate is closed (or its
// context ends), announcing its run id on r.started (buffered n) as it
// begins.
func (r *recorder) hold(n int) chan struct{} {
	gate := make(chan struct{})
	r.mu.Lock()
	r.gate, r.started = gate, make(chan string, n)
	r.mu.Unlock()
	return gate
}

// callsFor returns the dispatches of one run.
func (r *recorder) callsFor(runID string) []tools.Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []tools.Call
	for _, c := range r.calls {
		if c.RunID == runID {
			out = append(out, c)
		}
	}
	return out
}

func (r *recorder) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

// fixture is the configuration every engine test shares.
type fixture struct {
	status, deploy, drop, restart, scale, wipe *recorder
}

func newFixture() *fixture {
	return &fixture{
		status: &recorder{name: "status"}, deploy: &recorder{name: "deploy"},
		drop: &recorder{name: "delete_db"}, restart: &recorder{name: "restart"},
		scale: &recorder{name: "scale"}, wipe: &recorder{name: "wipe"},
	}
}

var sre = []string{"console:alice", "console:bob", "console:carol", "console:req"}

func (f *fixture) options(t testing.TB, store core.Store, clk *clock) Options {
	t.Helper()
	schema, err := approvals.CompileSchema("deploy", map[string]any{
		"type":     "object",
		"required": []any{"service", "version"},
		"properties": map[string]any{
			"service": map[string]any{"type": "string", "pattern": "^[a-z0-9-]+$"},
			"version": map[string]any{"type": "string"},
			"env":     map[string]any{"type": "string", "default": "staging"},
		},
		"additionalProperties": false,
	})
	if err != nil {
		t.Fatal(err)
	}
	groups := map[string][]string{"sre": sre}
	var many []string
	for i := range 50 {
		many = append(many, fmt.Sprintf("console:op%d", i))
	}
	groups["many"] = many
	return Options{
		Store: store,
		Tools: []*tools.Tool{
			{Name: "status", Risk: approvals.RiskRead, Runner: f.status},
			{Name: "deploy", Risk: approvals.RiskHighImpact, Destructive: true, Schema: schema, Runner: f.deploy},
			{Name: "delete_db", Risk: approvals.RiskHighImpact, Destructive: true, Runner: f.drop},
			{Name: "restart", Risk: approvals.RiskReversible, Idempotent: true, Runner: f.restart},
			{Name: "scale", Risk: approvals.RiskExternal, Runner: f.scale},
			{Name: "wipe", Risk: approvals.RiskReversible, Destructive: true, Runner: f.wipe},
		},
		Flows: []Flow{
			{Name: "status", Command: "status {service}", Steps: []FlowStep{{Tool: "status", Args: map[string]any{"service": "{{.service}}"}}}},
			{Name: "deploy", Command: "deploy {service} {version} {env=staging}", Description: "Deploy a version",
				Steps: []FlowStep{{Tool: "deploy", Args: map[string]any{"service": "{{.service}}", "version": "{{.version}}", "env": "{{.env}}"}}}},
			{Name: "drop", Command: "drop {name}", Steps: []FlowStep{{Tool: "delete_db", Args: map[string]any{"name": "{{.name}}"}}}},
			{Name: "restart", Command: "restart {service}", Steps: []FlowStep{{Tool: "restart", Args: map[string]any{"service": "{{.service}}"}}}},
			{Name: "check", Command: "check {service}", Steps: []FlowStep{
				{Tool: "status", Args: map[string]any{"service": "{{.service}}"}},
				{Tool: "restart", Args: map[string]any{"service": "{{.service}}"}},
			}},
			{Name: "scale", Command: "scale {service} {replicas} {env=staging}", Steps: []FlowStep{{Tool: "scale",
				Args: map[string]any{"service": "{{.service}}", "replicas": "{{.replicas}}", "env": "{{.env}}"}}}},
			{Name: "wipe", Command: "wipe {name}", Steps: []FlowStep{{Tool: "wipe", Args: map[string]any{"name": "{{.name}}"}}}},
			{Name: "bigdeploy", Command: "bigdeploy {service}", Steps: []FlowStep{{Tool: "deploy", Args: map[string]any{"service": "{{.service}}", "version": "1", "env": "big"}}}},
		},
		Policy: &approvals.Policy{Rules: []approvals.Rule{
			{Tool: "status", Effect: approvals.EffectAllow},
			{Tool: "deploy", Effect: approvals.EffectAsk, Approvers: []string{"group:sre"}},
			{Tool: "deploy", Args: map[string]string{"env": "prod*"}, Effect: approvals.EffectAsk, Approvers: []string{"group:sre"}, Quorum: 2},
			{Tool: "deploy", Args: map[string]string{"env": "big"}, Effect: approvals.EffectAsk, Approvers: []string{"group:many"}},
			{Tool: "deploy", Args: map[string]string{"env": "dr*"}, Effect: approvals.EffectDeny},
			{Tool: "delete_*", Effect: approvals.EffectDeny},
			{Tool: "scale", Effect: approvals.EffectAsk, Approvers: []string{"group:sre"}},
			{Tool: "scale", Args: map[string]string{"env": "prod*"}, Effect: approvals.EffectAsk, Approvers: []string{"group:sre"}, Quorum: 2},
			{Tool: "scale", Args: map[string]string{"env": "qa*"}, Effect: approvals.EffectAsk, Approvers: []string{"group:sre"}},
			{Tool: "scale", Args: map[string]string{"env": "dr*"}, Effect: approvals.EffectDeny},
		}},
		Groups:       groups,
		ApprovalTTL:  time.Hour,
		Concurrency:  8,
		Lease:        time.Second,
		PollInterval: 20 * time.Millisecond,
		PublicURL:    "https://ops.example.com",
		Now:          clk.Now,
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// harness is one engine running on a fresh store.
type harness struct {
	t     testing.TB
	b     backend
	dsn   string
	clk   *clock
	fx    *fixture
	store core.Store
	eng   *Engine
	stop  func()
	// tweak adjusts options before each engine is built.
	tweak func(*Options)
	// claims counts the engines' RunClaim calls: each is a look at the
	// queue, the observable event "the engine considered this run".
	claims atomic.Int64
}

// claimCounter counts RunClaim calls on the store it wraps.
type claimCounter struct {
	core.Store
	n *atomic.Int64
}

func (c claimCounter) RunClaim(ctx context.Context, p core.RunClaimParams) ([]*core.Run, error) {
	runs, err := c.Store.RunClaim(ctx, p)
	c.n.Add(1)
	return runs, err
}

// waitClaims waits until the engine has looked at the queue n more times
// than it had when called: after that, a run it left queued was seen and
// passed over, not merely not reached yet.
func (h *harness) waitClaims(n int64) {
	h.t.Helper()
	from := h.claims.Load()
	waitFor(h.t, fmt.Sprintf("%d more claim passes", n), func() bool { return h.claims.Load() >= from+n })
}

// quiesce stops the engine, which waits for every step in flight: nothing
// can be dispatched or recorded by it afterwards, so what a test counts
// then is final. A test that goes on restarts it with resume.
func (h *harness) quiesce() {
	h.t.Helper()
	h.stop()
}

// resume runs a new engine on the same store after quiesce, as a restart.
func (h *harness) resume() {
	h.t.Helper()
	h.eng = h.newEngine(h.store)
	h.stop = h.runEngine(h.eng)
}

func setup(t testing.TB, b backend, tweak ...func(*Options)) *harness {
	t.Helper()
	h := &harness{t: t, b: b, dsn: b.newDSN(t), clk: &clock{}, fx: newFixture()}
	if len(tweak) > 0 {
		h.tweak = tweak[0]
	}
	h.start()
	t.Cleanup(h.shutdown)
	return h
}

// start opens the store and runs a new engine on it.
func (h *harness) start() {
	h.t.Helper()
	ctx := context.Background()
	s, err := h.b.open(ctx, h.dsn)
	if err != nil {
		h.t.Fatalf("open %s store: %v", h.b.name, err)
	}
	h.store = s
	h.eng = h.newEngine(s)
	h.stop = h.runEngine(h.eng)
}

func (h *harness) newEngine(s core.Store) *Engine {
	h.t.Helper()
	o := h.fx.options(h.t, s, h.clk)
	o.Store = claimCounter{Store: o.Store, n: &h.claims}
	if h.tweak != nil {
		h.tweak(&o)
	}
	e, err := New(o)
	if err != nil {
		h.t.Fatal(err)
	}
	return e
}

// replica starts a second engine on a store of its own over the same
// database ("another process"), stopped and closed when the test ends;
// stop stops it earlier (calling it again does nothing).
func (h *harness) replica() (e *Engine, stop func()) {
	h.t.Helper()
	s, err := h.b.open(context.Background(), h.dsn)
	if err != nil {
		h.t.Fatalf("open a second %s store: %v", h.b.name, err)
	}
	h.t.Cleanup(func() { s.Close() })
	e = h.newEngine(s)
	stop = h.runEngine(e)
	h.t.Cleanup(stop)
	return e, stop
}

// runEngine runs e until the returned stop is called; stop waits for Run.
func (h *harness) runEngine(e *Engine) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				h.t.Errorf("engine run: %v", err)
			}
		})
	}
}

// shutdown stops the engine and closes the store ("the process dies").
func (h *harness) shutdown() {
	if h.stop != nil {
		h.stop()
		h.stop = nil
	}
	if h.store != nil {
		h.store.Close()
		h.store = nil
	}
}

var eventSeq atomic.Int64

// send delivers a chat message from actor in thread and returns its receipt.
func (h *harness) send(actor, thread, text string) core.Receipt {
	h.t.Helper()
	rc, err := h.eng.HandleEvent(context.Background(), h.event(actor, thread, text))
	if err != nil {
		h.t.Fatalf("handle %q: %v", text, err)
	}
	return rc
}

func (h *harness) event(actor, thread, text string) core.ChannelEvent {
	th, err := core.ParseThread(thread)
	if err != nil {
		h.t.Fatal(err)
	}
	return core.ChannelEvent{
		Channel: th.Channel, EventID: fmt.Sprintf("ev-%d", eventSeq.Add(1)), Actor: core.Actor{ID: actor},
		Thread: th, Text: text, ReceivedAt: time.Now(),
	}
}

// waitFor polls cond until it holds, or 2 minutes pass (a hang backstop).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitRun waits until the run has one of statuses and returns it. A run
// that ends otherwise fails at once, and a wait that runs out says where
// the run stood (status, owner, lease, steps), so a stuck run is told from
// a slow one.
func (h *harness) waitRun(id string, statuses ...core.RunStatus) *core.Run {
	h.t.Helper()
	var run *core.Run
	state := func() string {
		if run == nil {
			return "never read"
		}
		return fmt.Sprintf("%s (owner %q, lease until %s, error %s %q, step %d, steps %+v)", run.Status, run.Owner,
			run.LeaseUntil.Format(time.RFC3339Nano), run.ErrorCode, run.ErrorMessage, run.StepIndex, run.Steps)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		r, err := h.store.RunGet(context.Background(), id)
		if err != nil {
			h.t.Fatalf("run get: %v", err)
		}
		run = r
		if slices.Contains(statuses, r.Status) {
			return run
		}
		if r.Status.Final() {
			h.t.Fatalf("run %s ended %s, want %v", id, state(), statuses)
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for run %s to be %v: it is %s", id, statuses, state())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitApproval waits until the run is suspended and returns its approval.
func (h *harness) waitApproval(runID string) *approvals.Approval {
	h.t.Helper()
	h.waitRun(runID, core.RunWaitingApproval)
	items, _, err := h.store.ApprovalList(context.Background(), approvals.ApprovalListParams{RunID: runID, Limit: 10})
	if err != nil || len(items) == 0 {
		h.t.Fatalf("approvals of %s: %v %v", runID, items, err)
	}
	return items[0]
}

func (h *harness) decide(actor, id, action string, mod ...func(*core.Decision)) (*approvals.Approval, error) {
	d := core.Decision{ApprovalID: id, Action: approvals.Action(action)}
	for _, m := range mod {
		m(&d)
	}
	return h.eng.Decide(context.Background(), core.Actor{ID: actor}, "console", d)
}

// outboxTexts lists the reply texts queued for a run.
func (h *harness) outboxTexts(runID string) []string {
	h.t.Helper()
	items, _, err := h.store.OutboxList(context.Background(), core.OutboxListParams{Status: core.DeliveryPending, Limit: 1000})
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, m := range items {
		if m.RunID == runID && m.Kind == core.KindReply {
			out = append(out, m.Text)
		}
	}
	return out
}

func (h *harness) eventTypes(runID string) []string {
	h.t.Helper()
	evs, err := h.store.RunEventList(context.Background(), runID, 0, 1000)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

func (h *harness) auditKinds(p approvals.AuditListParams) []approvals.AuditEntry {
	h.t.Helper()
	p.Limit = 1000
	es, err := h.store.AuditList(context.Background(), p)
	if err != nil {
		h.t.Fatal(err)
	}
	return es
}

// decisionCode extracts the refusal code, failing the test for other errors.
func decisionCode(t *testing.T, err error) *core.DecisionError {
	t.Helper()
	var de *core.DecisionError
	if !errors.As(err, &de) {
		t.Fatalf("want *core.DecisionError, got %v", err)
	}
	return de
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
