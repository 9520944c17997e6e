package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/opsgate/opsgate/config"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/authority"
	"github.com/opsgate/opsgate/core/engine"
	"github.com/opsgate/opsgate/core/mcp"
	"github.com/opsgate/opsgate/internal/fakellm"
)

// The cross-surface authority table (issue 26): every kind of actor asks
// every action on every surface, and the answer is the same everywhere —
// on both stores. The server is built exactly as serve builds it
// (buildListener), so every route it mounts is here: a route that no
// probe covers, a probe whose action is not its route's, a mount that is
// neither a surface, a platform endpoint nor an operational one, or a
// surface of authority.Surfaces without probes fails the test.

// outcome is what a surface answered, as the authority's refusal codes
// name it.
type outcome string

const (
	oAllow  outcome = "allow" // the authority let it through (the handler may still refuse the input)
	oHidden outcome = outcome(authority.CodeNotFound)
	oDenied outcome = outcome(authority.CodeForbidden)
	oScope  outcome = outcome(authority.CodeMissingScope)
	oHuman  outcome = outcome(authority.CodeHumanRequired)
	oNotApp outcome = outcome(authority.CodeNotApprover)
	oUnauth outcome = outcome(authority.CodeUnauthenticated)
	o403    outcome = "403" // the console tells refusals apart by page, not code
)

// codeOutcome maps an error code a surface returned: the authority's
// codes are outcomes, anything else came after it let the request through.
func codeOutcome(code string) outcome {
	switch o := outcome(code); o {
	case oHidden, oDenied, oScope, oHuman, oNotApp, oUnauth:
		return o
	}
	return oAllow
}

// tableRow is one kind of actor: its API token, and the identity a chat
// platform vouches for when the actor is a person.
type tableRow struct {
	name, token, chat string
}

// The rows, in the order of every want array below.
var tableRows = []tableRow{
	{"owner", "t-alice", "slack:UALICE"}, // alice asked for the objects (as console:alice; chat as her other identity)
	{"other requester", "t-carol", "slack:UCAROL"},
	{"approver", "t-bob", "slack:UBOB"},
	{"non-approver", "t-dave", "slack:UDAVE"},
	{"approver identity without decide", "t-ci", ""}, // console:bob with scopes [read, request]
	{"agent token", "t-agent", ""},                   // agent:claude, no scopes key; owns the Agent API session
	{"internal token", "t-internal", ""},
	{"admin", "t-admin", ""},
}

const (
	A = oAllow
	N = oHidden
	F = oDenied
	S = oScope
	H = oHuman
	P = oNotApp
	U = oUnauth
)

// tableColumns are the authority's answers, per row, for each action on
// each kind of object: alice's runs (r1, its approval a1, question q1,
// agent task t1, thread) and the agent token's Agent API session s1.
var tableColumns = map[string]struct {
	act  authority.Action
	want [8]outcome
}{
	"see run":            {authority.SeeRun, [8]outcome{A, A, A, A, A, N, A, A}},
	"see session run":    {authority.SeeRun, [8]outcome{N, N, N, N, N, A, N, A}},
	"list runs":          {authority.ListRuns, [8]outcome{A, A, A, A, A, N, A, A}},
	"see approval":       {authority.SeeApproval, [8]outcome{A, A, A, A, A, N, A, A}},
	"list approvals":     {authority.ListApprovals, [8]outcome{A, A, A, A, A, N, A, A}},
	"decide":             {authority.Decide, [8]outcome{P, P, A, P, H, H, H, P}},
	"cancel":             {authority.Cancel, [8]outcome{A, F, A, F, F, N, F, A}},
	"cancel session run": {authority.Cancel, [8]outcome{N, N, N, N, N, A, N, A}},
	"answer":             {authority.Answer, [8]outcome{A, P, A, P, P, N, P, P}},
	"claim":              {authority.Claim, [8]outcome{A, A, A, A, A, N, A, A}},
	"request":            {authority.Request, [8]outcome{A, A, A, A, A, A, A, A}},
	"see thread":         {authority.SeeThread, [8]outcome{A, A, A, A, A, F, A, A}},
	"read audit":         {authority.ReadAudit, [8]outcome{A, A, A, A, A, F, A, A}},
	"read grants":        {authority.ReadGrants, [8]outcome{A, A, A, A, A, F, A, A}},
	"revoke grant":       {authority.RevokeGrant, [8]outcome{A, A, A, A, S, S, S, A}},
	"list schedules":     {authority.ListSchedules, [8]outcome{A, A, A, A, A, F, A, A}},
	"use session":        {authority.UseSession, [8]outcome{S, S, S, S, S, A, S, S}},
	"see session":        {authority.SeeSession, [8]outcome{S, S, S, S, S, A, S, S}},
	"catalog":            {authority.Catalog, [8]outcome{A, A, A, A, A, A, A, A}},
	"self":               {authority.Self, [8]outcome{A, A, A, A, A, A, A, A}},
	"administer":         {authority.Administer, [8]outcome{S, S, S, S, S, S, S, A}},
	"public":             {authority.Public, [8]outcome{A, A, A, A, A, A, A, A}},
	// alice's MCP task handle (flow with the Tasks extension): only the
	// identity that created it, not even admin.
	"use task": {authority.UseTask, [8]outcome{A, N, N, N, N, N, N, N}},
}

// tableAccepts is which rows each surface takes at all (authority.Accepts):
// internal tokens only on the internal MCP endpoints, the Agent API only
// with session.run, chat only a platform's identities.
var tableAccepts = map[authority.Surface][8]outcome{
	authority.SurfaceREST:        {A, A, A, A, A, A, U, A},
	authority.SurfaceAgentAPI:    {S, S, S, S, S, A, U, S},
	authority.SurfaceMCP:         {A, A, A, A, A, A, U, A},
	authority.SurfaceMCPInternal: {U, U, U, U, U, U, A, U},
	authority.SurfaceConsole:     {A, A, A, A, A, A, U, A},
	authority.SurfaceLocal:       {A, A, A, A, A, A, U, A},
	authority.SurfaceChat:        {A, A, A, A, "", "", "", ""}, // "": no chat identity
}

// tableProbe asks one entry of one surface as row r.
type tableProbe struct {
	surface authority.Surface
	entry   string // the route's pattern, the MCP tool, or the chat event
	column  string
	// authenticates: a public entry that signs in, so it answers as the
	// surface takes the row.
	authenticates bool
	do            func(t *testing.T, w *tableWorld, r tableRow, i int) outcome
}

func TestAuthorityTable(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, pgDSN string) {
		w := newTableWorld(t, pgDSN)
		probes := tableProbes()
		w.checkCoverage(t, probes)
		cells := 0
		for _, p := range probes {
			for i, r := range tableRows {
				want, ok := w.want(p, i)
				if !ok {
					continue
				}
				got := p.do(t, w, r, i)
				if p.surface == authority.SurfaceConsole && (want == oDenied || want == oScope || want == oHuman || want == oNotApp) {
					want = o403
				}
				if got != want {
					t.Errorf("%s %s (%s) as %s: %s, want %s", p.surface, p.entry, p.column, r.name, got, want)
				}
				cells++
			}
		}
		t.Logf("authority table: %d rows × %d columns × %d surfaces; %d probes, %d cells asserted",
			len(tableRows), len(tableColumns), len(authority.Surfaces), len(probes), cells)
	})
}

// want is the answer row i gets from p: the surface's refusal of the row
// if it does not take it, else the column's. ok is false where the row has
// no way onto the surface (a token row on chat).
func (w *tableWorld) want(p tableProbe, i int) (outcome, bool) {
	acc := tableAccepts[p.surface][i]
	if acc == "" {
		return "", false
	}
	col := tableColumns[p.column]
	if col.act == authority.Public && !p.authenticates {
		return oAllow, true
	}
	if acc != oAllow {
		return acc, true
	}
	return col.want[i], true
}

// checkCoverage: every route the listener serves is probed with its own
// action, every probe names a served route, and every surface has probes.
func (w *tableWorld) checkCoverage(t *testing.T, probes []tableProbe) {
	t.Helper()
	type key struct {
		s     authority.Surface
		entry string
	}
	guarded := map[key]authority.Action{}
	for _, m := range w.l.mounts {
		switch m.kind {
		case mountSurface:
			if m.guards == nil {
				t.Errorf("surface mount %s names no guards", m.pattern)
				continue
			}
			for _, g := range m.guards.Guards() {
				guarded[key{g.Surface, g.Entry}] = g.Action
			}
		case mountPlatform:
			if m.pattern != "/hooks/" {
				t.Errorf("platform mount %s: only the webhook channel is enabled here", m.pattern)
			}
		case mountOps:
			if !slices.Contains([]string{"GET /healthz", "GET /readyz", "GET /metrics"}, m.pattern) {
				t.Errorf("operational mount %s is none of health and metrics", m.pattern)
			}
		default:
			t.Errorf("mount %s of unknown kind %q", m.pattern, m.kind)
		}
	}
	probed := map[key]bool{}
	bySurface := map[authority.Surface]int{}
	for _, p := range probes {
		col, ok := tableColumns[p.column]
		if !ok {
			t.Errorf("probe %s %s: no column %q", p.surface, p.entry, p.column)
			continue
		}
		bySurface[p.surface]++
		if p.surface == authority.SurfaceChat {
			continue // chat has no routes: its events reach the engine
		}
		k := key{p.surface, p.entry}
		act, ok := guarded[k]
		switch {
		case !ok:
			t.Errorf("probe %s %s names no served route", p.surface, p.entry)
		case act != col.act:
			t.Errorf("probe %s %s asks %s, but the route performs %s", p.surface, p.entry, col.act, act)
		}
		probed[k] = true
	}
	for k, act := range guarded {
		if !probed[k] {
			t.Errorf("route %s %s (%s) is not in the authority table", k.s, k.entry, act)
		}
	}
	for _, s := range authority.Surfaces {
		if bySurface[s] == 0 {
			t.Errorf("surface %s has no probes in the authority table", s)
		}
		if _, ok := tableAccepts[s]; !ok {
			t.Errorf("surface %s: the table does not say which rows it takes", s)
		}
	}
}

// tableWorld is one server and the objects the table asks about.
type tableWorld struct {
	srv *httptest.Server
	l   *listener
	eng *engine.Engine
	sc  *fakellm.Script

	r1, a1, r2, q1, question, t1, call, g1, s1, turn string
	// task is alice's MCP task handle (a deploy waiting for approval).
	task string

	mu       sync.Mutex
	pool     string // a run of alice's waiting for approval, for cancels
	taskPool string // a task of alice's, for tasks/cancel
	consoles map[string]*consoleClient
	seq      int
}

// tableConfig: alice asks; bob (group sre) approves deploys and restarts;
// the default agent "ops" talks to the fake model; triage is an agent task;
// the schedule tbl-nightly is listed (the scheduler never runs here, so it
// never ticks).
const tableConfig = `
engine: {poll_interval: 20ms}
channels:
  console: {enabled: true}
  local: {enabled: true}
  webhooks: [{name: ci, secret: hook-secret}]
people:
  alice: ["console:alice", "slack:UALICE"]
  bob: ["console:bob", "slack:UBOB"]
  carol: ["console:carol", "slack:UCAROL"]
  dave: ["console:dave", "slack:UDAVE"]
approvers:
  groups:
    sre: ["person:bob"]
api:
  tokens:
    - {name: alice, token: t-alice, actor: "console:alice", scopes: [read, request, decide]}
    - {name: carol, token: t-carol, actor: "console:carol", scopes: [read, request, decide]}
    - {name: bob, token: t-bob, actor: "console:bob", scopes: [read, request, decide]}
    - {name: dave, token: t-dave, actor: "console:dave", scopes: [read, request, decide]}
    - {name: ci, token: t-ci, actor: "console:bob", scopes: [read, request]}
    - {name: claude, token: t-agent, actor: "agent:claude"}
    - {name: studio, token: t-internal, actor: "console:studio", scopes: [read, request], internal: true}
    - {name: admin, token: t-admin, actor: "console:admin"}
models:
  - {name: default, provider: openai, base_url: %q, model: m, timeout: 20s}
agents:
  - {name: ops, model: default, tools: [status], max_steps: 5, default: true}
tools:
  - name: deploy
    risk: high_impact
    destructive: true
    input_schema:
      type: object
      required: [service, version]
      properties:
        service: {type: string, pattern: "^[a-z0-9-]+$"}
        version: {type: string}
    exec: {command: [echo, deployed, "{{.service}}", "{{.version}}"]}
  - name: restart
    risk: reversible
    input_schema: {type: object, required: [service], properties: {service: {type: string}}}
    exec: {command: [echo, restarted, "{{.service}}"]}
  - name: status
    risk: read
    input_schema: {type: object, required: [service], properties: {service: {type: string}}}
    exec: {command: [echo, "{{.service}} is green"]}
flows:
  - {name: deploy, command: "deploy {service} {version}", steps: [{tool: deploy, args: {service: "{{.service}}", version: "{{.version}}"}}]}
  - {name: restart, command: "restart {service}", steps: [{tool: restart, args: {service: "{{.service}}"}}]}
  - {name: status, command: "status {service}", steps: [{tool: status, args: {service: "{{.service}}"}}]}
  - name: triage
    command: "triage {service}"
    steps:
      - name: investigate
        agent_task:
          instructions: "Find out why {{.service}} is slow."
          tools: [status]
          assets: [{id: context, text: "service={{.service}}"}]
          output_schema: {type: object, required: [summary], properties: {summary: {type: string}}}
policy:
  rules:
    - {match: {tool: status}, action: allow}
    - {match: {tool: deploy}, action: ask, approvers: ["group:sre"]}
    - {match: {tool: restart}, action: ask, approvers: ["group:sre"]}
schedules:
  - {name: tbl-nightly, cron: "0 3 * * *", thread: "console:tbl-nightly", text: "status api"}
`

func newTableWorld(t *testing.T, pgDSN string) *tableWorld {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	dir := t.TempDir()
	sc := llmServer().Script(t)
	storeYAML := fmt.Sprintf("store: {driver: sqlite, dsn: %q}\n", filepath.Join(dir, "opsgate.db"))
	if pgDSN != "" {
		storeYAML = fmt.Sprintf("store: {driver: postgres, dsn: %q}\n", pgDSN)
	}
	src := fmt.Sprintf("server: {data_dir: %q}\naudit: {key_file: %q}\n", dir, filepath.Join(dir, "audit.key")) +
		storeYAML + fmt.Sprintf(tableConfig, sc.OpenAIURL())
	cfg, err := config.Loader{LookupEnv: func(string) (string, bool) { return "", false }}.Parse("table.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	st, err := openStoreWith(ctx, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	key, err := loadAuditKey(cfg.Audit.KeyFile, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.AuditAdoptKey(ctx, key, time.Now()); err != nil {
		t.Fatal(err)
	}
	signer, err := loadReceiptSigner(cfg.Approvals.ReceiptKeyFile, true, cfg.Approvals.ReceiptTTL.D())
	if err != nil {
		t.Fatal(err)
	}
	l, err := buildListener(cfg, st, apiTokens(cfg), serverKeys{audit: key, receipts: signer}, nil, prometheus.NewRegistry(), log)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- l.eng.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && ctx.Err() == nil {
			t.Errorf("engine: %v", err)
		}
	})
	srv := httptest.NewServer(l.mux())
	t.Cleanup(srv.Close)
	w := &tableWorld{srv: srv, l: l, eng: l.eng, sc: sc, consoles: map[string]*consoleClient{}}
	w.setup(t)
	return w
}

// setup makes the objects: r1 (a deploy waiting for approval a1), r2 (a
// finished status run, with an artifact), q1 (an agent run asking a
// question), t1 (a run waiting for an agent task), g1 (a revoked grant),
// s1 (the agent token's Agent API session, with one finished turn).
func (w *tableWorld) setup(t *testing.T) {
	w.sc.Push(fakellm.CallTool("ask_user", `{"questions":[{"id":"env","kind":"choice","text":"Which environment?","choices":["staging","prod"]}]}`))
	w.q1 = w.start(t, "t-alice", "tbl-q1", "what should I deploy?")
	w.waitRun(t, w.q1, core.RunWaitingInput)
	_, run := w.rest(t, "GET", "/api/v1/runs/"+w.q1, "t-admin", nil)
	if acts, _ := run["pending_actions"].([]any); len(acts) == 1 {
		w.question, _ = acts[0].(map[string]any)["id"].(string)
	}
	if w.question == "" {
		t.Fatalf("q1 asks nothing: %v", run)
	}
	w.r1 = w.start(t, "t-alice", "tbl-r1", "deploy api 1.0")
	w.a1 = w.waitApproval(t, w.r1)
	w.r2 = w.start(t, "t-alice", "tbl-r2", "status api")
	w.waitRun(t, w.r2, core.RunSucceeded)
	w.t1 = w.start(t, "t-alice", "tbl-t1", "triage api")
	for deadline := time.Now().Add(waitBound); w.call == ""; time.Sleep(20 * time.Millisecond) {
		calls, err := w.eng.AgentCalls(context.Background(), w.t1)
		if err != nil {
			t.Fatal(err)
		}
		if len(calls) > 0 {
			w.call = calls[0].ID
		}
		if time.Now().After(deadline) {
			t.Fatal("t1 never waited for its agent task")
		}
	}
	gr := w.start(t, "t-alice", "tbl-g", "restart api")
	a0 := w.waitApproval(t, gr)
	if st, body := w.rest(t, "POST", "/api/v1/approvals/"+a0+"/decision", "t-bob", map[string]any{"action": "approve", "scope": "session"}); st != 200 {
		t.Fatalf("grant: %d %v", st, body)
	}
	_, grants := w.rest(t, "GET", "/api/v1/grants?status=all", "t-admin", nil)
	if items, _ := grants["items"].([]any); len(items) == 1 {
		w.g1, _ = items[0].(map[string]any)["id"].(string)
	}
	if st, body := w.rest(t, "DELETE", "/api/v1/grants/"+w.g1, "t-admin", nil); st != 200 {
		t.Fatalf("revoke %q: %d %v", w.g1, st, body)
	}
	w.task = w.newTask(t)
	w.sc.Push(fakellm.Say("hello from the session"))
	st, res := w.rest(t, "POST", "/api/v1/agent/runs", "t-agent", map[string]any{"text": "hello"})
	w.s1, _ = res["sessionId"].(string)
	w.turn, _ = res["turnId"].(string)
	if st != 200 || w.s1 == "" || w.turn == "" {
		t.Fatalf("session turn: %d %v", st, res)
	}
}

// uniq is a fresh name for a thread or an event.
func (w *tableWorld) uniq(prefix string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seq++
	return fmt.Sprintf("%s-%d", prefix, w.seq)
}

func (w *tableWorld) start(t *testing.T, token, thread, text string) string {
	t.Helper()
	st, body := w.rest(t, "POST", "/api/v1/messages", token, map[string]any{"thread": thread, "text": text})
	run, _ := body["run"].(map[string]any)
	if st != 201 || run == nil {
		t.Fatalf("%s in %s: %d %v", text, thread, st, body)
	}
	return run["id"].(string)
}

func (w *tableWorld) waitRun(t *testing.T, id string, want core.RunStatus) {
	t.Helper()
	for deadline := time.Now().Add(waitBound); ; time.Sleep(20 * time.Millisecond) {
		_, run := w.rest(t, "GET", "/api/v1/runs/"+id, "t-admin", nil)
		if run["status"] == string(want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %v, want %s", id, run["status"], want)
		}
	}
}

func (w *tableWorld) waitApproval(t *testing.T, runID string) string {
	t.Helper()
	for deadline := time.Now().Add(waitBound); ; time.Sleep(20 * time.Millisecond) {
		_, list := w.rest(t, "GET", "/api/v1/approvals?status=pending&run_id="+runID, "t-admin", nil)
		if items, _ := list["items"].([]any); len(items) == 1 {
			return items[0].(map[string]any)["id"].(string)
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s never asked for approval", runID)
		}
	}
}

// cancellable is a run of alice's waiting for approval: the same one
// until a probe cancels it.
func (w *tableWorld) cancellable(t *testing.T) string {
	t.Helper()
	w.mu.Lock()
	id := w.pool
	w.mu.Unlock()
	if id != "" {
		return id
	}
	id = w.start(t, "t-alice", w.uniq("tbl-cancel"), "deploy api 2.0")
	w.waitApproval(t, id)
	w.mu.Lock()
	w.pool = id
	w.mu.Unlock()
	return id
}

// cancelled forgets the pool run when a probe was allowed to cancel it.
func (w *tableWorld) cancelled(o outcome) outcome {
	if o == oAllow {
		w.mu.Lock()
		w.pool = ""
		w.mu.Unlock()
	}
	return o
}

// rest calls the API with a JSON body and decodes the JSON answer.
func (w *tableWorld) rest(t *testing.T, method, path, token string, body any) (int, map[string]any) {
	t.Helper()
	return w.restWith(t, method, path, token, nil, body)
}

// restWith is rest with headers added.
func (w *tableWorld) restWith(t *testing.T, method, path, token string, hdr http.Header, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, w.srv.URL+path, rd)
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return res.StatusCode, out
}

// restOutcome is what an API answer means for the table: 2xx and the
// handler's own refusals (400, 409, 410, 422) are allowed through.
func restOutcome(status int, body map[string]any) outcome {
	switch status {
	case http.StatusUnauthorized:
		return oUnauth
	case http.StatusNotFound, http.StatusForbidden:
		e, _ := body["error"].(map[string]any)
		code, _ := e["code"].(string)
		return codeOutcome(code)
	}
	return oAllow
}

// restCall is a probe that calls the API and reads the status.
func restCall(method string, path func(w *tableWorld, t *testing.T) string, body func(w *tableWorld) any) func(*testing.T, *tableWorld, tableRow, int) outcome {
	return func(t *testing.T, w *tableWorld, r tableRow, _ int) outcome {
		var b any
		if body != nil {
			b = body(w)
		}
		return restOutcome(w.rest(t, method, path(w, t), r.token, b))
	}
}

// restListed is a probe that lists and reports whether id(w) is listed.
func restListed(path string, id func(w *tableWorld) string) func(*testing.T, *tableWorld, tableRow, int) outcome {
	return func(t *testing.T, w *tableWorld, r tableRow, _ int) outcome {
		st, body := w.rest(t, "GET", path, r.token, nil)
		if o := restOutcome(st, body); o != oAllow {
			return o
		}
		items, _ := body["items"].([]any)
		for _, it := range items {
			if it.(map[string]any)["id"] == id(w) {
				return oAllow
			}
		}
		return oHidden
	}
}

// stream opens an event stream and reports its answer; an allowed one is
// closed at once, or read until data holds want (when set).
func (w *tableWorld) stream(t *testing.T, path, token, want string) outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", w.srv.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		raw, _ := io.ReadAll(res.Body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		return restOutcome(res.StatusCode, body)
	}
	if want == "" {
		return oAllow
	}
	// The change feed: the snapshot, then "ready".
	var seen bytes.Buffer
	buf := make([]byte, 4096)
	for !strings.Contains(seen.String(), "event: ready") {
		n, err := res.Body.Read(buf)
		seen.Write(buf[:n])
		if err != nil {
			t.Fatalf("%s: %v after %q", path, err, seen.String())
		}
	}
	if strings.Contains(seen.String(), want) {
		return oAllow
	}
	return oHidden
}

// mcp calls tool on path statelessly and returns the outcome and the
// result's structured content.
func (w *tableWorld) mcp(t *testing.T, path, token, tool string, args map[string]any) (outcome, map[string]any) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{
		"name": tool, "arguments": args, "_meta": map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
			"io.modelcontextprotocol/clientCapabilities": map[string]any{}}}})
	req, _ := http.NewRequest("POST", w.srv.URL+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode == http.StatusUnauthorized {
		return oUnauth, nil
	}
	var m struct {
		Result struct {
			IsError           bool           `json:"isError"`
			StructuredContent map[string]any `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal(raw, &m); err != nil || res.StatusCode != 200 {
		t.Fatalf("%s %s: %d %s", path, tool, res.StatusCode, raw)
	}
	if m.Result.IsError {
		e, _ := m.Result.StructuredContent["error"].(map[string]any)
		code, _ := e["code"].(string)
		return codeOutcome(code), m.Result.StructuredContent
	}
	return oAllow, m.Result.StructuredContent
}

// mcpCall is a probe calling tool with args(w, row).
func mcpCall(path, tool string, args func(w *tableWorld, t *testing.T, r tableRow) map[string]any) func(*testing.T, *tableWorld, tableRow, int) outcome {
	return func(t *testing.T, w *tableWorld, r tableRow, _ int) outcome {
		o, _ := w.mcp(t, path, r.token, tool, args(w, t, r))
		return o
	}
}

// mcpFound is a probe whose allowed answer must hold id(w) somewhere in
// its result (a list, an artifact); without it the object was hidden.
func mcpFound(path, tool string, args map[string]any, id func(w *tableWorld) string) func(*testing.T, *tableWorld, tableRow, int) outcome {
	return func(t *testing.T, w *tableWorld, r tableRow, _ int) outcome {
		o, out := w.mcp(t, path, r.token, tool, args)
		if o != oAllow {
			return o
		}
		b, _ := json.Marshal(out)
		if strings.Contains(string(b), id(w)) {
			return oAllow
		}
		return oHidden
	}
}

// consoleClient is one row's browser: signed in (or refused) once.
type consoleClient struct {
	c    *http.Client
	csrf string
}

// newBrowser keeps cookies and shows redirects instead of following them.
func newBrowser() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

var csrfField = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// console returns row r's browser, signing in the first time.
func (w *tableWorld) console(t *testing.T, r tableRow) *consoleClient {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if c := w.consoles[r.name]; c != nil {
		return c
	}
	c := &consoleClient{c: newBrowser()}
	if st, _, _ := w.signIn(t, c, r.token); st == http.StatusSeeOther {
		_, _, page := w.page(t, c, "GET", "/runs", nil)
		if m := csrfField.FindStringSubmatch(page); m != nil {
			c.csrf = m[1]
		}
	}
	w.consoles[r.name] = c
	return c
}

// signIn posts the sign-in form with a fresh nonce.
func (w *tableWorld) signIn(t *testing.T, c *consoleClient, token string) (int, string, string) {
	t.Helper()
	_, _, page := w.page(t, c, "GET", "/signin", nil)
	m := regexp.MustCompile(`name="nonce" value="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("sign-in page: %s", page)
	}
	return w.page(t, c, "POST", "/signin", url.Values{"nonce": {m[1]}, "token": {token}, "next": {"/runs"}})
}

// page requests a console page: status, Location and body.
func (w *tableWorld) page(t *testing.T, c *consoleClient, method, path string, form url.Values) (int, string, string) {
	t.Helper()
	var rd io.Reader
	if form != nil {
		rd = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, w.srv.URL+path, rd)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	res, err := c.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Location"), string(raw)
}

// consoleOutcome is what a page answer means: a redirect to sign in is no
// session, 404 hidden, 403 a refusal; everything else went through.
func consoleOutcome(status int, location string) outcome {
	switch {
	case status == http.StatusSeeOther && strings.HasPrefix(location, "/signin?next="):
		return oUnauth
	case status == http.StatusUnauthorized:
		return oUnauth
	case status == http.StatusNotFound:
		return oHidden
	case status == http.StatusForbidden:
		return o403
	}
	return oAllow
}

// consolePage is a probe requesting a page; for a POST, form(w) gets the
// session's CSRF token added. contains, when set, must be on the page
// (a list showing the object) or it was hidden.
func consolePage(method string, path func(w *tableWorld, t *testing.T) string, form func(w *tableWorld) url.Values, contains func(w *tableWorld) string) func(*testing.T, *tableWorld, tableRow, int) outcome {
	return func(t *testing.T, w *tableWorld, r tableRow, _ int) outcome {
		c := w.console(t, r)
		var f url.Values
		if method == "POST" {
			f = url.Values{}
			if form != nil {
				f = form(w)
			}
			f.Set("_csrf", c.csrf)
		}
		st, loc, body := w.page(t, c, method, path(w, t), f)
		o := consoleOutcome(st, loc)
		if o == oAllow && contains != nil && !strings.Contains(body, contains(w)) {
			return oHidden
		}
		return o
	}
}

// chatOutcome is what the engine answered a chat event: its refusal's
// code, or allowed through.
func chatOutcome(err error) outcome {
	if err == nil {
		return oAllow
	}
	if de, ok := core.Refusal(err); ok {
		return codeOutcome(string(de.Code))
	}
	if ref, ok := authority.RefusalOf(err); ok {
		return outcome(ref.Code)
	}
	return outcome("error: " + err.Error())
}

// badEdit is an edit whose arguments the deploy schema refuses: an
// approver gets 422 (let through, nothing changes), anyone else the
// authority's refusal.
func badEdit() map[string]any {
	return map[string]any{"action": "edit", "args": map[string]any{"service": "Bad Name", "version": "1"}}
}

// badAnswer does not answer q1 (no such choice): let through, it changes
// nothing.
const badAnswer = `[{"questionId":"env","isSkipped":false,"answer":"moon"}]`

func pathOf(s string) func(*tableWorld, *testing.T) string {
	return func(*tableWorld, *testing.T) string { return s }
}

// mcpRPC sends one 2026-07-28 request declaring the Tasks extension to
// path and returns the status and the decoded reply.
func (w *tableWorld) mcpRPC(t *testing.T, path, token, method string, params map[string]any) (int, map[string]any) {
	t.Helper()
	params["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}}
	hdr := http.Header{}
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Accept", "application/json, text/event-stream")
	hdr.Set("MCP-Protocol-Version", "2026-07-28")
	hdr.Set("Mcp-Method", method)
	if name, ok := params["name"].(string); ok {
		hdr.Set("Mcp-Name", name)
	} else if id, ok := params["taskId"].(string); ok {
		hdr.Set("Mcp-Name", id)
	}
	return w.restWith(t, "POST", path, token, hdr, map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
}

// newTask starts a deploy as alice through MCP with the Tasks extension:
// it waits for approval, so flow answers with a task handle.
func (w *tableWorld) newTask(t *testing.T) string {
	t.Helper()
	_, out := w.mcpRPC(t, mcp.PathExternal, "t-alice", "tools/call", map[string]any{"name": "flow",
		"arguments": map[string]any{"flowName": "deploy", "intent": "api " + w.uniq("3.0")}})
	res, _ := out["result"].(map[string]any)
	id, _ := res["taskId"].(string)
	if res["resultType"] != "task" || id == "" {
		t.Fatalf("flow with the Tasks extension answered no task: %v", out)
	}
	return id
}

// cancellableTask is a task of alice's whose run waits: the same one until
// a probe cancels it.
func (w *tableWorld) cancellableTask(t *testing.T) string {
	t.Helper()
	w.mu.Lock()
	id := w.taskPool
	w.mu.Unlock()
	if id == "" {
		id = w.newTask(t)
		w.mu.Lock()
		w.taskPool = id
		w.mu.Unlock()
	}
	return id
}

// mcpTaskMethod is a probe calling a Tasks extension method on the task
// id(w) names, with extra params: the authority's refusal rides in the
// JSON-RPC error's data.code. An allowed tasks/cancel uses up the pool's
// task.
func mcpTaskMethod(path, method string, id func(*tableWorld, *testing.T) string, extra map[string]any) func(*testing.T, *tableWorld, tableRow, int) outcome {
	return func(t *testing.T, w *tableWorld, r tableRow, _ int) outcome {
		params := map[string]any{"taskId": id(w, t)}
		for k, v := range extra {
			params[k] = v
		}
		st, out := w.mcpRPC(t, path, r.token, method, params)
		if st == http.StatusUnauthorized {
			return oUnauth
		}
		if e, ok := out["error"].(map[string]any); ok {
			data, _ := e["data"].(map[string]any)
			code, _ := data["code"].(string)
			if o := codeOutcome(code); o != oAllow {
				return o
			}
			t.Fatalf("%s %s as %s: %v", path, method, r.name, out)
		}
		if st != http.StatusOK || out["result"] == nil {
			t.Fatalf("%s %s as %s: %d %v", path, method, r.name, st, out)
		}
		if method == "tasks/cancel" {
			w.mu.Lock()
			w.taskPool = ""
			w.mu.Unlock()
		}
		return oAllow
	}
}
