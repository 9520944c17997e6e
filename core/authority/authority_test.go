package authority

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// memStore holds runs, approvals and sessions for the rules' tests; the
// cross-surface table (cmd/opsgate) runs the same rules on both real
// stores behind every surface.
type memStore struct {
	runs      map[string]*core.Run
	approvals map[string]*approvals.Approval
	sessions  map[string]*core.AgentSession
	tasks     map[string]*core.MCPTask
}

func (m *memStore) MCPTaskGet(_ context.Context, id string) (*core.MCPTask, error) {
	if t, ok := m.tasks[id]; ok {
		return t, nil
	}
	return nil, core.ErrNotFound
}

func (m *memStore) RunGet(_ context.Context, id string) (*core.Run, error) {
	if r, ok := m.runs[id]; ok {
		return r, nil
	}
	return nil, core.ErrNotFound
}

func (m *memStore) ApprovalGet(_ context.Context, id string) (*approvals.Approval, error) {
	if a, ok := m.approvals[id]; ok {
		return a, nil
	}
	return nil, core.ErrNotFound
}

func (m *memStore) ApprovalList(_ context.Context, p approvals.ApprovalListParams) ([]*approvals.Approval, string, error) {
	var out []*approvals.Approval
	for _, a := range m.approvals {
		if p.RunID == "" || a.RunID == p.RunID {
			out = append(out, a)
		}
	}
	return out, "", nil
}

func (m *memStore) AgentSessionGet(_ context.Context, id string) (*core.AgentSession, error) {
	if s, ok := m.sessions[id]; ok {
		return s, nil
	}
	return nil, core.ErrNotFound
}

// world is the configuration and objects of these tests: alice (two
// identities) asked for run r1, whose approval a1 group sre (bob) decides;
// app "claude" owns session s1, whose run is t1.
type world struct {
	a    *Authority
	mu   sync.Mutex
	live Live
}

func newWorld(t *testing.T, answerers string) *world {
	t.Helper()
	st := &memStore{
		runs: map[string]*core.Run{
			"r1": {ID: "r1", Requester: "console:alice", Thread: core.Thread{Channel: "console", Key: "ops"}},
			"t1": {ID: "t1", Requester: "agent:claude", Thread: core.Thread{Channel: core.AgentSessionChannel, Key: "s1"}},
		},
		approvals: map[string]*approvals.Approval{
			"a1": {ID: "a1", RunID: "r1", Requester: "console:alice", Thread: "console:ops", Approvers: []string{"group:sre"},
				Eligible: []string{"console:bob", "slack:UBOB"}, Status: approvals.StatusPending},
		},
		sessions: map[string]*core.AgentSession{"s1": {ID: "s1", Token: "claude", Actor: "agent:claude"}},
		tasks:    map[string]*core.MCPTask{"tsk_1": {ID: "tsk_1", Actor: "console:alice", Tool: "flow", RunID: "r1"}},
	}
	w := &world{}
	w.reload(map[string][]string{"alice": {"console:alice", "slack:UALICE"}, "bob": {"console:bob", "slack:UBOB"}},
		map[string][]string{"sre": {"person:bob"}})
	a, err := New(Options{Store: st, Sessions: st, QuestionAnswerers: answerers, Live: func() Live {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.live
	}})
	if err != nil {
		t.Fatal(err)
	}
	w.a = a
	return w
}

func (w *world) reload(people, groups map[string][]string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.live = Live{People: approvals.NewDirectory(people, groups), Groups: groups,
		Requesters: map[string]Requesters{"slack": {Entries: []string{"group:sre"}}}}
}

var (
	full    = []core.Scope{core.ScopeRead, core.ScopeRequest, core.ScopeDecide}
	aliceT  = TokenActor("alice", "console:alice", full, false)
	aliceS  = ChatActor("slack:UALICE") // alice through another identity
	bobT    = TokenActor("bob", "console:bob", full, false)
	bobRO   = TokenActor("ci", "console:bob", []core.Scope{core.ScopeRead, core.ScopeRequest}, false)
	carolT  = TokenActor("carol", "console:carol", full, false)
	agentT  = TokenActor("claude", "agent:claude", nil, false)
	agentRd = TokenActor("reader", "agent:reader", []core.Scope{core.ScopeRead, core.ScopeRequest}, false)
	ciReq   = TokenActor("ci", "api:ci", []core.Scope{core.ScopeRequest}, false)
	adminT  = TokenActor("admin", "console:admin", nil, false)
	studio  = TokenActor("studio", "console:studio", []core.Scope{core.ScopeRead}, true)
)

// code is a refusal's code, "" for none; a non-refusal error fails.
func code(t *testing.T, err error) Code {
	t.Helper()
	if err == nil {
		return ""
	}
	r, ok := RefusalOf(err)
	if !ok {
		t.Fatalf("not a refusal: %v", err)
	}
	return r.Code
}

func TestRunRules(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		actor Actor
		act   Action
		run   string
		want  Code
	}{
		{"OwnerSees", aliceT, SeeRun, "r1", ""},
		{"OwnerThroughOtherIdentity", aliceS, Cancel, "r1", ""},
		{"PersonReadsAll", carolT, SeeRun, "r1", ""},
		{"AgentConfined", agentT, SeeRun, "r1", CodeNotFound},
		{"AgentWithReadScopeReadsAll", agentRd, SeeRun, "r1", ""},
		{"RequestOnlyConfined", ciReq, SeeRun, "r1", CodeNotFound},
		{"UnknownRun", adminT, SeeRun, "nope", CodeNotFound},
		{"SessionRunOwnerApp", agentT, SeeRun, "t1", ""},
		{"SessionRunHiddenFromReadAll", carolT, SeeRun, "t1", CodeNotFound},
		{"SessionRunAdmin", adminT, SeeRun, "t1", ""},
		{"CancelRequester", aliceT, Cancel, "r1", ""},
		{"CancelEligibleApprover", bobT, Cancel, "r1", ""},
		{"CancelApproverIdentityWithoutDecide", bobRO, Cancel, "r1", CodeForbidden},
		{"CancelStranger", carolT, Cancel, "r1", CodeForbidden},
		{"CancelInvisible", agentT, Cancel, "r1", CodeNotFound},
		{"CancelAdmin", adminT, Cancel, "r1", ""},
		{"CancelOwnSessionRun", agentT, Cancel, "t1", ""},
		{"CancelOtherAppsSessionRun", carolT, Cancel, "t1", CodeNotFound},
		{"AnswerRequester", aliceS, Answer, "r1", ""},
		{"AnswerApprover", bobT, Answer, "r1", ""},
		{"AnswerApproverWithoutDecide", bobRO, Answer, "r1", CodeNotApprover},
		{"AnswerStranger", carolT, Answer, "r1", CodeNotApprover},
		{"AnswerAdminIsNoApprover", adminT, Answer, "r1", CodeNotApprover},
		{"ClaimSeen", carolT, Claim, "r1", ""},
		{"ClaimUnseen", agentT, Claim, "r1", CodeNotFound},
		{"ReadOnlyMayNotCancel", studio, Cancel, "r1", CodeMissingScope},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := w.a.Run(ctx, c.actor, c.act, c.run)
			if got := code(t, err); got != c.want {
				t.Fatalf("%s %s on %s: %q (%v), want %q", c.actor.ID, c.act, c.run, got, err, c.want)
			}
			if c.want == CodeNotFound && !errors.Is(err, core.ErrNotFound) || c.want != "" && c.want != CodeNotFound && !errors.Is(err, core.ErrForbidden) {
				t.Fatalf("%v does not match its sentinel", err)
			}
		})
	}
}

// The approver's standing is judged under the live configuration, exactly
// as a decision is: a reload that removes bob ends it everywhere.
func TestApproverStandingIsLive(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	ctx := context.Background()
	if _, err := w.a.Approval(ctx, bobT, Decide, "a1"); err != nil {
		t.Fatalf("bob decides: %v", err)
	}
	w.reload(map[string][]string{"bob": {"console:bob", "slack:UBOB"}}, map[string][]string{"sre": {"console:dora"}})
	if _, err := w.a.Approval(ctx, bobT, Decide, "a1"); code(t, err) != CodeNotApprover {
		t.Fatalf("bob after the reload decides: %v", err)
	}
	if _, err := w.a.Run(ctx, bobT, Cancel, "r1"); code(t, err) != CodeForbidden {
		t.Fatalf("bob after the reload cancels: %v", err)
	}
	if _, err := w.a.Run(ctx, bobT, Answer, "r1"); code(t, err) != CodeNotApprover {
		t.Fatalf("bob after the reload answers: %v", err)
	}
	for _, c := range []struct {
		actor Actor
		want  Code
	}{{agentT, CodeHumanRequired}, {bobRO, CodeHumanRequired}, {carolT, CodeNotApprover}} {
		if _, err := w.a.Approval(ctx, c.actor, Decide, "a1"); code(t, err) != c.want {
			t.Errorf("%s decides: %v, want %s", c.actor.ID, err, c.want)
		}
	}
}

func TestApprovalVisibility(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	ctx := context.Background()
	// A confined token sees the approvals it may decide, and its own runs'.
	confinedBob := TokenActor("bob-c", "console:bob", []core.Scope{core.ScopeRequest, core.ScopeDecide}, false)
	for _, c := range []struct {
		actor Actor
		want  Code
	}{{aliceT, ""}, {confinedBob, ""}, {agentT, CodeNotFound}, {ciReq, CodeNotFound}, {carolT, ""}} {
		if _, err := w.a.Approval(ctx, c.actor, SeeApproval, "a1"); code(t, err) != c.want {
			t.Errorf("%s sees a1: %v, want %q", c.actor.ID, err, c.want)
		}
	}
	if _, err := w.a.Approval(ctx, adminT, SeeApproval, "nope"); code(t, err) != CodeNotFound {
		t.Fatalf("unknown approval: %v", err)
	}
}

func TestRequesterOnlyAnswers(t *testing.T) {
	t.Parallel()
	w := newWorld(t, AnswerRequester)
	ctx := context.Background()
	if _, err := w.a.Run(ctx, aliceS, Answer, "r1"); err != nil {
		t.Fatalf("requester: %v", err)
	}
	if _, err := w.a.Run(ctx, bobT, Answer, "r1"); code(t, err) != CodeNotApprover {
		t.Fatalf("approver answered a requester-only question: %v", err)
	}
	run, _ := w.a.o.Store.RunGet(ctx, "r1")
	if w.a.AnswerStanding(run, "console:bob") == nil || w.a.AnswerStanding(run, "slack:UALICE") != nil {
		t.Fatal("the engine's standing disagrees")
	}
	if _, err := New(Options{Store: w.a.o.Store, QuestionAnswerers: "everyone"}); err == nil {
		t.Fatal("an unknown answerers setting was taken")
	}
}

func TestAnswerStandingOfIdentities(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	run, _ := w.a.o.Store.RunGet(context.Background(), "r1")
	for id, ok := range map[string]bool{"console:alice": true, "slack:UALICE": true, "slack:UBOB": true,
		"console:carol": false, "agent:claude": false} {
		if got := w.a.AnswerStanding(run, id) == nil; got != ok {
			t.Errorf("%s answers: %v, want %v", id, got, ok)
		}
	}
}

// TestMachinesNeverDecideOrAnswer: a schedule's identity, like an agent's
// (approvals.NeverDecides), never decides and never answers a question put
// to people, even listed in an approver group or among an approval's
// eligible; it may still be named, literally, among a channel's
// requesters.
func TestMachinesNeverDecideOrAnswer(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	ctx := context.Background()
	w.reload(map[string][]string{"alice": {"console:alice", "slack:UALICE"}},
		map[string][]string{"sre": {"schedule:nightly", "agent:claude", "console:bob"}})
	w.a.o.Store.(*memStore).approvals["a1"].Eligible = []string{"console:bob", "schedule:nightly", "agent:claude"}
	run, _ := w.a.o.Store.RunGet(ctx, "r1")
	for _, id := range []string{"schedule:nightly", "agent:claude"} {
		if _, err := w.a.Approval(ctx, ChatActor(id), Decide, "a1"); code(t, err) != CodeHumanRequired {
			t.Errorf("%s decides a1: %v", id, err)
		}
		err := w.a.AnswerStanding(run, id)
		if r, ok := RefusalOf(err); !ok || r.Code != CodeNotApprover || !strings.Contains(r.Message, "a schedule may not answer") {
			t.Errorf("%s answers r1: %v", id, err)
		}
		if _, err := w.a.Run(ctx, ChatActor(id), Cancel, "r1"); code(t, err) != CodeNotFound {
			t.Errorf("%s cancels r1 as an approver: %v", id, err)
		}
	}
	if _, err := w.a.Approval(ctx, ChatActor("console:bob"), Decide, "a1"); err != nil {
		t.Fatalf("bob, a person in the same group, decides a1: %v", err)
	}
	l := Live{People: approvals.NewDirectory(nil, nil),
		Requesters: map[string]Requesters{"slack": {Entries: []string{"group:sre", "schedule:nightly"}}}}
	if why := l.MayRequest("slack", "schedule:nightly"); why != "" {
		t.Errorf("a schedule named among the requesters is refused: %s", why)
	}
	if why := l.MayRequest("slack", "schedule:other"); why == "" {
		t.Error("a schedule not named among the requesters may start runs")
	}
}

func TestGatesOfActions(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	for _, c := range []struct {
		actor Actor
		act   Action
		want  Code
	}{
		{carolT, ReadAudit, ""},
		{agentT, ReadAudit, CodeForbidden},
		{agentRd, ReadAudit, ""},
		{ciReq, ReadAudit, CodeMissingScope},
		{agentT, ReadGrants, CodeForbidden},
		{bobT, RevokeGrant, ""},
		{bobRO, RevokeGrant, CodeMissingScope},
		{TokenActor("a2", "agent:x", []core.Scope{core.ScopeDecide, core.ScopeRead}, false), RevokeGrant, CodeMissingScope},
		{adminT, Administer, ""},
		{carolT, Administer, CodeMissingScope},
		// Schedules: listed like the audit log, changed by admin only.
		{carolT, ListSchedules, ""},
		{bobRO, ListSchedules, ""},
		{agentT, ListSchedules, CodeForbidden},
		{agentRd, ListSchedules, ""},
		{ciReq, ListSchedules, CodeMissingScope},
		{TokenActor("ops", "console:ops", []core.Scope{core.ScopeAdmin}, false), ListSchedules, ""},
		{studio, Request, CodeMissingScope},
		{agentT, UseSession, ""},
		{carolT, UseSession, CodeMissingScope},
		{Actor{}, Self, ""},
		{Actor{}, SeeRun, CodeMissingScope},
	} {
		if got := code(t, w.a.Check(c.actor, c.act)); got != c.want {
			t.Errorf("%s %s: %q, want %q", c.actor.ID, c.act, got, c.want)
		}
	}
}

func TestThreadsAndSessions(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	ctx := context.Background()
	console := core.Thread{Channel: "console", Key: "ops"}
	session := core.Thread{Channel: core.AgentSessionChannel, Key: "s1"}
	for _, c := range []struct {
		actor Actor
		th    core.Thread
		want  Code
	}{{carolT, console, ""}, {agentT, console, CodeForbidden}, {agentT, session, ""}, {carolT, session, CodeNotFound},
		{adminT, session, ""}, {ciReq, console, CodeMissingScope}} {
		if got := code(t, w.a.Thread(ctx, c.actor, c.th)); got != c.want {
			t.Errorf("%s reads %s: %q, want %q", c.actor.ID, c.th, got, c.want)
		}
	}
	claudeApp := TokenActor("claude", "agent:claude", nil, false)
	otherApp := TokenActor("other", "api:other", []core.Scope{core.ScopeSessionRun}, false)
	adminApp := TokenActor("admin-app", "console:admin", []core.Scope{core.ScopeSessionRun, core.ScopeAdmin}, false)
	for _, c := range []struct {
		actor Actor
		act   Action
		id    string
		want  Code
	}{{claudeApp, UseSession, "s1", ""}, {otherApp, UseSession, "s1", CodeNotFound}, {otherApp, SeeSession, "s1", CodeNotFound},
		{adminApp, SeeSession, "s1", ""}, {adminApp, UseSession, "s1", CodeNotFound}, {claudeApp, UseSession, "nope", CodeNotFound}} {
		if _, err := w.a.Session(ctx, c.actor, c.act, c.id); code(t, err) != c.want {
			t.Errorf("%s %s %s: %v, want %q", c.actor.Token, c.act, c.id, err, c.want)
		}
	}
}

func TestAcceptsAndRequesters(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	for _, c := range []struct {
		s     Surface
		actor Actor
		want  Code
	}{{SurfaceREST, carolT, ""}, {SurfaceREST, studio, CodeUnauthenticated}, {SurfaceMCPInternal, studio, ""},
		{SurfaceMCPInternal, carolT, CodeUnauthenticated}, {SurfaceAgentAPI, carolT, CodeMissingScope}, {SurfaceAgentAPI, agentT, ""},
		{SurfaceChat, aliceS, ""}, {SurfaceChat, aliceT, CodeUnauthenticated}, {SurfaceConsole, aliceS, CodeUnauthenticated}} {
		if got := code(t, w.a.Accepts(c.s, c.actor)); got != c.want {
			t.Errorf("%s takes %s: %q, want %q", c.s, c.actor.ID, got, c.want)
		}
	}
	if why := w.a.MayRequest("slack", "slack:UBOB"); why != "" {
		t.Errorf("bob on slack: %s", why)
	}
	if why := w.a.MayRequest("slack", "slack:UALICE"); why == "" {
		t.Error("alice is not among slack's requesters")
	}
	if why := w.a.MayRequest("console", "console:nobody"); why != "" {
		t.Errorf("an ungated channel refused: %s", why)
	}
	// A list is narrowed in the store only when that is exact.
	if w.a.RunFilter(agentT) != "agent:claude" || w.a.RunFilter(aliceT) != "" ||
		w.a.RunFilter(TokenActor("a", "slack:UALICE", []core.Scope{core.ScopeRequest}, false)) != "" {
		t.Error("RunFilter")
	}
}

func TestMuxGatesEveryRoute(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	var denied []Code
	m := NewMux(w.a, func(wr http.ResponseWriter, _ *http.Request, ref *Refusal) {
		denied = append(denied, ref.Code)
		wr.WriteHeader(ref.HTTPStatus())
	}, nil)
	ok := http.HandlerFunc(func(wr http.ResponseWriter, _ *http.Request) { wr.WriteHeader(http.StatusTeapot) })
	m.Handle(Route{Surface: SurfaceREST, Entry: "GET /audit", Action: ReadAudit}, ok)
	m.Handle(Route{Surface: SurfaceREST, Entry: "POST /decide", Action: Decide}, ok)
	m.Handle(Route{Surface: SurfaceREST, Entry: "GET /static", Action: Public}, ok)
	serve := func(method, path string, actor *Actor) int {
		r := httptest.NewRequest(method, path, nil)
		if actor != nil {
			r = r.WithContext(WithActor(r.Context(), *actor))
		}
		rec := httptest.NewRecorder()
		m.ServeHTTP(rec, r)
		return rec.Code
	}
	if got := serve("GET", "/audit", nil); got != http.StatusUnauthorized {
		t.Errorf("no actor: %d", got)
	}
	if got := serve("GET", "/audit", &agentT); got != http.StatusForbidden {
		t.Errorf("confined agent reads the audit log: %d", got)
	}
	if got := serve("GET", "/audit", &carolT); got != http.StatusTeapot {
		t.Errorf("carol: %d", got)
	}
	// Decide is judged with its approval (and audited) by the handler.
	if got := serve("POST", "/decide", &agentT); got != http.StatusTeapot {
		t.Errorf("decide gated early: %d", got)
	}
	if got := serve("GET", "/static", nil); got != http.StatusTeapot {
		t.Errorf("public: %d", got)
	}
	if len(m.Guards()) != 3 || m.Guards()[1].Action != Decide {
		t.Errorf("guards %v", m.Guards())
	}
	if len(denied) != 2 || denied[0] != CodeUnauthenticated || denied[1] != CodeForbidden {
		t.Errorf("denials %v", denied)
	}
}

func TestActorKinds(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		a    Actor
		want Kind
	}{{aliceT, KindPerson}, {agentT, KindAgent}, {studio, KindInternal}, {adminT, KindAdmin}, {aliceS, KindPerson}} {
		if c.a.Kind() != c.want {
			t.Errorf("%s is %s, want %s", c.a.ID, c.a.Kind(), c.want)
		}
	}
	// An agent never holds decide, whatever its token says.
	if TokenActor("x", "agent:x", []core.Scope{core.ScopeDecide}, false).decides() || ChatActor("agent:x").decides() {
		t.Fatal("an agent decides")
	}
}

// TestTasksAreTheirCreators: an MCP task handle is used by the identity
// that created it and nobody else — not another identity of the same
// person, not an approver of its run, not admin — and a token without
// scope request uses none; the store (it keeps tasks) is found without
// being named.
func TestTasksAreTheirCreators(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	for _, c := range []struct {
		who   string
		actor Actor
		id    string
		want  Code
	}{
		{"the creator", aliceT, "tsk_1", ""},
		{"the creator's other identity", aliceS, "tsk_1", CodeNotFound},
		{"an approver of its run", bobT, "tsk_1", CodeNotFound},
		{"admin", adminT, "tsk_1", CodeNotFound},
		{"an agent", agentT, "tsk_1", CodeNotFound},
		{"a token without request", studio, "tsk_1", CodeMissingScope},
		{"the creator, an unknown task", aliceT, "tsk_2", CodeNotFound},
		{"the creator, no id", aliceT, "", CodeNotFound},
	} {
		tk, err := w.a.Task(context.Background(), c.actor, UseTask, c.id)
		if got := code(t, err); got != c.want {
			t.Errorf("%s uses %q: %q, want %q", c.who, c.id, got, c.want)
		}
		if c.want == "" && (tk == nil || tk.ID != c.id) {
			t.Errorf("%s: task %+v", c.who, tk)
		}
	}
	if _, err := w.a.Task(context.Background(), aliceT, SeeRun, "tsk_1"); err == nil {
		t.Error("Task judged an action that is not UseTask")
	}
}
