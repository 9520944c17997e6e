package tui

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core/api"
	"github.com/opsgate/opsgate/internal/client"
)

var t0 = time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)

// fakeAPI answers like the server and records what the TUI asked.
type fakeAPI struct {
	mu        sync.Mutex
	approvals map[string]*client.Approval
	runs      map[string]*client.RunDetail
	decisions []string
	answers   []any
	decideErr error
	answerErr error
	audit     []approvals.AuditEntry // newest first
}

func (f *fakeAPI) Audit(_ context.Context, q client.AuditQuery) ([]approvals.AuditEntry, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !q.Newest {
		return nil, "", fmt.Errorf("the TUI reads the newest entries")
	}
	return append([]approvals.AuditEntry(nil), f.audit...), "", nil
}

func (f *fakeAPI) Approval(_ context.Context, id string) (*client.Approval, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.approvals[id]
	if !ok {
		return nil, &client.Error{Status: 404, Code: "not_found", Message: "approval not found"}
	}
	c := *a
	return &c, nil
}

func (f *fakeAPI) Run(_ context.Context, id string) (*client.RunDetail, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.runs[id]
	if !ok {
		return nil, &client.Error{Status: 404, Code: "not_found"}
	}
	return r, nil
}

func (f *fakeAPI) Decide(_ context.Context, id string, d client.Decision) (*client.Approval, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.decisions = append(f.decisions, fmt.Sprintf("%s %s reason=%q args=%v", id, d.Action, d.Reason, d.Args))
	if f.decideErr != nil {
		return nil, f.decideErr
	}
	a := *f.approvals[id]
	a.Status = map[string]approvals.Status{"approve": "approved", "reject": "rejected", "edit": "edited"}[d.Action]
	return &a, nil
}

func (f *fakeAPI) Answer(_ context.Context, runID, actionID string, answer any) (*client.RunDetail, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers = append(f.answers, answer)
	if f.answerErr != nil {
		return nil, f.answerErr
	}
	return f.runs[runID], nil
}

var deploySchema = map[string]any{
	"type": "object", "required": []any{"service", "version"}, "additionalProperties": false,
	"properties": map[string]any{
		"service":  map[string]any{"type": "string", "pattern": "^[a-z0-9][a-z0-9-]*$"},
		"version":  map[string]any{"type": "string"},
		"env":      map[string]any{"type": "string", "enum": []any{"staging", "prod"}, "default": "staging"},
		"replicas": map[string]any{"type": "integer"},
	},
}

func approval(id string, mod func(*client.Approval)) *client.Approval {
	a := &client.Approval{ID: id, RunID: "run-" + id, Thread: "console:ops-1", Requester: "console:alice", Tool: "deploy",
		Risk: "high_impact", ProposedArgs: map[string]any{"service": "api", "version": "1.2.3", "env": "staging"},
		Preview: "would deploy api 1.2.3 to staging", Reason: "deploy api 1.2.3", Status: "pending",
		Approvers: []string{"group:sre"}, Eligible: []string{"console:admin"}, Quorum: 1,
		CreatedAt: t0.Add(-time.Minute).Format(time.RFC3339Nano), ExpiresAt: t0.Add(59*time.Minute + 12*time.Second).Format(time.RFC3339Nano)}
	if mod != nil {
		mod(a)
	}
	return a
}

type harness struct {
	t   *testing.T
	api *fakeAPI
	m   Model
}

func newHarness(t *testing.T, as ...*client.Approval) *harness {
	t.Helper()
	api := &fakeAPI{approvals: map[string]*client.Approval{}, runs: map[string]*client.RunDetail{}}
	h := &harness{t: t, api: api}
	h.m = New(t.Context(), Options{API: api, Me: &client.Me{Actor: "console:admin", Scopes: []string{"read", "request", "decide"}},
		Server: "http://127.0.0.1:8080", Now: func() time.Time { return t0 }})
	h.send(tea.WindowSizeMsg{Width: 80, Height: 24})
	h.send(streamUpMsg{})
	for _, a := range as {
		api.approvals[a.ID] = a
		h.send(approvalMsg{a: a})
	}
	h.send(readyMsg{})
	return h
}

// send applies msg and, for the TUI's own API commands, runs the command
// and applies what it returns (never the clock or the cursor's blink).
func (h *harness) send(msg tea.Msg) {
	h.t.Helper()
	nm, cmd := h.m.Update(msg)
	h.m = nm.(Model)
	h.run(cmd)
}

func (h *harness) run(cmd tea.Cmd) {
	h.t.Helper()
	if cmd == nil {
		return
	}
	done := make(chan tea.Msg, 1)
	go func() { done <- cmd() }()
	select {
	case msg := <-done:
		switch msg := msg.(type) {
		case tea.BatchMsg:
			for _, c := range msg {
				h.run(c)
			}
		case detailMsg, decidedMsg, answeredMsg, questionsMsg, runDetailMsg, historyMsg:
			h.send(msg)
		}
	case <-time.After(50 * time.Millisecond):
		// A timer (the clock, a blink) or a wait on a feed: not ours to run.
	}
}

func (h *harness) key(keys ...string) {
	h.t.Helper()
	for _, k := range keys {
		switch k {
		case "enter":
			h.send(tea.KeyMsg{Type: tea.KeyEnter})
		case "esc":
			h.send(tea.KeyMsg{Type: tea.KeyEsc})
		case "tab":
			h.send(tea.KeyMsg{Type: tea.KeyTab})
		case "down":
			h.send(tea.KeyMsg{Type: tea.KeyDown})
		case "ctrl+u":
			h.send(tea.KeyMsg{Type: tea.KeyCtrlU})
		default:
			h.send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)})
		}
	}
}

// screen is the view as plain text, checked to fit 80×24.
func (h *harness) screen() string {
	h.t.Helper()
	v := h.m.View()
	lines := strings.Split(v, "\n")
	if len(lines) != 24 {
		h.t.Fatalf("view has %d lines, want 24:\n%s", len(lines), v)
	}
	for i, l := range lines {
		if w := ansi.StringWidth(l); w > 80 {
			h.t.Fatalf("line %d is %d columns wide:\n%s", i, w, ansi.Strip(l))
		}
	}
	return ansi.Strip(v)
}

func (h *harness) want(subs ...string) {
	h.t.Helper()
	s := h.screen()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			h.t.Fatalf("screen lacks %q:\n%s", sub, s)
		}
	}
}

func TestQueueShowsApprovalsWithCountdowns(t *testing.T) {
	t.Parallel()
	h := newHarness(t, approval("a1", nil), approval("a2", func(a *client.Approval) {
		a.Tool, a.Risk, a.ExpiresAt = "restart", "reversible", t0.Add(2*time.Hour+5*time.Minute).Format(time.RFC3339Nano)
		a.ProposedArgs = map[string]any{"service": "db"}
	}))
	h.want("WAITING FOR A HUMAN (2)", "deploy env=staging service=api version=1.2.3", "high_impact", "59m12s", "restart service=db", "2h05m",
		"● live", "console:admin", "asked by console:alice in console:ops-1 · decided by group:sre")
	// The one that expires first is on top, selected.
	s := h.screen()
	if strings.Index(s, "deploy") > strings.Index(s, "restart") {
		t.Fatalf("order:\n%s", s)
	}
	// The clock moves the countdown.
	h.m.now = func() time.Time { return t0.Add(time.Hour) }
	h.send(tickMsg(t0.Add(time.Hour)))
	h.want("expired", "1h05m")
}

// TestOneKeyNeverDecides: "a" shows what would be approved and asks for
// Enter; only Enter approves, Esc takes it back (docs/terminal.md).
func TestOneKeyNeverDecides(t *testing.T) {
	t.Parallel()
	h := newHarness(t, approval("a1", func(a *client.Approval) { a.Destructive = true }))
	h.key("a")
	if len(h.api.decisions) != 0 {
		t.Fatalf("one key decided: %v", h.api.decisions)
	}
	h.want("APPROVAL a1", "approve deploy env=staging service=api version=1.2.3 (high_impact, destructive)?", "enter approves · esc cancels")
	// Pressing a again, or Esc, decides nothing either.
	h.key("a", "esc")
	h.key("enter")
	if len(h.api.decisions) != 0 {
		t.Fatalf("decided after esc: %v", h.api.decisions)
	}
	h.want("APPROVAL a1", "a approve · r reject")
	h.key("a", "enter")
	if len(h.api.decisions) != 1 || !strings.HasPrefix(h.api.decisions[0], "a1 approve") {
		t.Fatalf("decisions %v", h.api.decisions)
	}
	h.want("approved a1 ✓", "WAITING FOR A HUMAN (0)")
}

func TestDetailShowsEverythingToDecide(t *testing.T) {
	t.Parallel()
	h := newHarness(t, approval("a1", nil))
	h.key("enter")
	h.want("APPROVAL a1", "tool        deploy  risk high_impact", "arguments   env = staging", "service = api",
		"reason      deploy api 1.2.3", "asked by    console:alice in console:ops-1", "who decides group:sre (quorum 1, 0 so far)",
		"eligible    console:admin", "you (console:admin) may decide", "expires in 59m12s", "dry run", "would deploy api 1.2.3 to staging")
	h.key("esc")
	h.want("WAITING FOR A HUMAN (1)")
}

// TestDetailShowsTheChangeWhyAndHandOver: an edited approval shows the
// per-field diff, why the policy asked, and a hand-over among decisions.
func TestDetailShowsTheChangeWhyAndHandOver(t *testing.T) {
	t.Parallel()
	h := newHarness(t, approval("a1", func(a *client.Approval) {
		a.Why = "policy rule 3: deploy to prod* by a non-lead: ask"
		a.Changes = []approvals.Change{{Name: "version", Kind: approvals.ChangeChanged, From: "1.2.3", To: "1.2.4"},
			{Name: "force", Kind: approvals.ChangeAdded, To: "true"}}
		a.Decisions = []api.DecisionView{{Actor: "slack:UBOB", Channel: "slack", Action: approvals.ActionDelegate, To: "person:carol"}}
	}))
	h.key("enter")
	h.want("edited      version: 1.2.3 → 1.2.4", "force: added true", "policy      policy rule 3: deploy to prod* by a non-lead: ask",
		"decision    handed to person:carol by slack:UBOB via slack")
}

func TestRejectWithAReason(t *testing.T) {
	t.Parallel()
	h := newHarness(t, approval("a1", nil))
	h.key("enter", "r")
	h.want("REJECT deploy", "reason:")
	h.key("not during the freeze", "enter")
	if len(h.api.decisions) != 1 || h.api.decisions[0] != `a1 reject reason="not during the freeze" args=map[]` {
		t.Fatalf("decisions %v", h.api.decisions)
	}
	h.want("rejected a1 ✓")
}

func TestEditValidatesAgainstTheSchema(t *testing.T) {
	t.Parallel()
	h := newHarness(t, approval("a1", nil))
	h.api.approvals["a1"].InputSchema = deploySchema // the detail read carries it
	h.key("enter", "e")
	h.want("EDIT deploy", "service*", "version*", "env", "one of staging, prod", "replicas", "integer")
	// Fields: service, version (required, by name), env, replicas.
	h.key("ctrl+u", "API!")
	h.key("enter")
	h.want("✗ does not match pattern ^[a-z0-9][a-z0-9-]*$")
	if len(h.api.decisions) != 0 {
		t.Fatalf("an invalid form was sent: %v", h.api.decisions)
	}
	h.key("ctrl+u", "api", "tab", "tab", "ctrl+u", "canary", "enter")
	h.want("✗ want one of staging, prod")
	h.key("ctrl+u", "prod", "tab", "three", "enter")
	h.want("✗ want a whole number")
	h.key("ctrl+u", "3")
	// The server has the last word: its 422 shows next to its field.
	h.api.decideErr = &client.Error{Status: 422, Code: "invalid_args", Field: "version", Message: "version 1.2.3 is not released"}
	h.key("enter")
	h.want("version*", "✗ version 1.2.3 is not released")
	if len(h.api.decisions) != 1 || !strings.Contains(h.api.decisions[0], "map[env:prod replicas:3 service:api version:1.2.3]") {
		t.Fatalf("decisions %v", h.api.decisions)
	}
	h.api.decideErr = nil
	// The 422 moved the focus to version.
	h.key("ctrl+u", "1.2.4", "enter")
	h.want("edited a1 ✓")
}

func TestRefusalsAreShown(t *testing.T) {
	t.Parallel()
	h := newHarness(t, approval("a1", nil))
	h.api.decideErr = &client.Error{Status: 409, Code: "already_decided", Message: "approval a1 is already approved", By: "console:bob"}
	h.key("a", "enter")
	h.want("approve refused: approval a1 is already approved (by console:bob) (409 already_")
}

func TestDecidedElsewhereLeavesTheQueue(t *testing.T) {
	t.Parallel()
	h := newHarness(t, approval("a1", nil), approval("a2", nil))
	h.key("enter")
	decided := approval("a1", func(a *client.Approval) { a.Status = "approved" })
	h.send(approvalMsg{a: decided})
	h.want("approval a1 was approved elsewhere", "WAITING FOR A HUMAN (1)")
}

func TestReconnectReplacesTheQueue(t *testing.T) {
	t.Parallel()
	h := newHarness(t, approval("a1", nil), approval("a2", nil))
	h.send(streamDownMsg{err: fmt.Errorf("connection reset")})
	h.want("○ offline (retrying)")
	// A new connection sends what is pending now: a1 was decided while
	// the stream was down.
	h.send(streamUpMsg{})
	h.send(approvalMsg{a: approval("a2", nil)})
	h.send(readyMsg{})
	h.want("● live", "WAITING FOR A HUMAN (1)")
	if _, ok := h.m.approvals["a1"]; ok {
		t.Fatal("a1 kept after a resync that did not send it")
	}
}

func TestQuestionsAreAnswered(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.api.runs["r1"] = &client.RunDetail{Run: client.Run{ID: "r1", Thread: "console:ops-2", Requester: "console:alice", Status: "waiting_input"},
		PendingActions: []client.PendingAction{{ID: "q1", Kind: "question", ExpiresAt: t0.Add(10 * time.Minute).Format(time.RFC3339Nano),
			Questions: []client.QuestionItem{
				{ID: "env", Kind: "choice", Text: "Which environment?", Choices: []string{"staging", "prod"}},
				{ID: "why", Kind: "text", Text: "Why now?"},
			}}}}
	h.send(runMsg{r: &h.api.runs["r1"].Run})
	h.want("question", "Which environment? (+1 more)", "10m00s", "asked in console:ops-2 for console:alice")
	h.key("enter")
	h.want("QUESTION", "Which environment?", "(•) 1 staging", "( ) 2 prod", "Why now?")
	h.key("2", "tab", "enter")
	h.want("✗ an answer is required")
	h.key("hotfix for the outage", "enter")
	if len(h.api.answers) != 1 {
		t.Fatalf("answers %v", h.api.answers)
	}
	got := fmt.Sprint(h.api.answers[0])
	if got != "[{env false prod} {why false hotfix for the outage}]" {
		t.Fatalf("answer %s", got)
	}
	h.want("answered ✓", "WAITING FOR A HUMAN (0)")
	// The run moving on clears any question of it.
	h.send(runMsg{r: &client.Run{ID: "r1", Status: "running"}})
	h.want("WAITING FOR A HUMAN (0)")
}

func TestConfirmQuestionAnswersWithAConfirmation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.api.runs["r2"] = &client.RunDetail{Run: client.Run{ID: "r2", Status: "waiting_input"},
		PendingActions: []client.PendingAction{{ID: "q2", Kind: "question", Questions: []client.QuestionItem{{ID: "ok", Kind: "confirm", Text: "Restart the database?"}}}}}
	h.send(runMsg{r: &h.api.runs["r2"].Run})
	h.key("enter", "n", "too risky", "enter")
	if got := fmt.Sprintf("%+v", h.api.answers); got != "[{IsConfirmed:false Feedback:too risky}]" {
		t.Fatalf("answer %s", got)
	}
}

func TestRunsAndTimeline(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.api.runs["r1"] = &client.RunDetail{Run: client.Run{ID: "r1", Flow: "deploy", Status: "succeeded", Thread: "console:ops-1",
		Args: map[string]any{"service": "api"}, Steps: []client.Step{{Index: 0, Tool: "deploy", Status: "succeeded", Output: "deployed api 1.2.3"}}}}
	h.send(runMsg{r: &client.Run{ID: "r1", Flow: "deploy", Status: "succeeded", Thread: "console:ops-1", CreatedAt: t0.Format(time.RFC3339Nano),
		UpdatedAt: t0.Add(-30 * time.Second).Format(time.RFC3339Nano)}})
	h.key("tab")
	h.want("[2 Runs]", "RUNS (1", "r1", "succeeded", "deploy", "console:ops-1", "30s ago")
	h.key("enter")
	h.want("RUN r1", "step 0  deploy  succeeded", "│ deployed api 1.2.3", "timeline")
	at := func(d time.Duration) string { return t0.Add(d).Format(time.RFC3339Nano) }
	for _, ev := range []client.RunEvent{
		{Type: "turn.started", At: at(0), Data: []byte(`{"step_index":0}`)},
		{Type: "permission.requested", At: at(time.Second), Data: []byte(`{"tool":"deploy","args":{"service":"api"},"approvers":["group:sre"]}`)},
		{Type: "permission.decided", At: at(2*time.Minute + time.Second), Data: []byte(`{"status":"approved","by":["console:admin"]}`)},
		{Type: "turn.started", At: at(2*time.Minute + 2*time.Second), Data: []byte(`{"step_index":0}`)},
		{Type: "tool.started", At: at(2*time.Minute + 2*time.Second), Data: []byte(`{"tool":"deploy","args":{"service":"api"}}`)},
	} {
		h.send(runEventMsg{runID: "r1", ev: ev})
	}
	// Words, the time between events, and where the time went; no
	// engine jargon, no key=value dump.
	h.want("started", "+1s  asked for approval to run deploy service=api; group:sre to", "decide", "+2m00s  approved by console:admin",
		"+1s  resumed", "running deploy service=api", "time: 2m02s in all: 2m00s waiting for approval (98%)", "working (0%)")
	if s := h.screen(); strings.Contains(s, "step_index") || strings.Contains(s, "turn.started") || strings.Contains(s, "tool=deploy") {
		t.Fatalf("the timeline dumps engine fields:\n%s", s)
	}
	h.key("esc")
	h.want("RUNS (1")
}

func TestOutsideTextCannotDrawOnTheScreen(t *testing.T) {
	t.Parallel()
	h := newHarness(t, approval("a1", func(a *client.Approval) {
		a.ProposedArgs = map[string]any{"version": "1.2.3\nApproved by alice", "service": "\x1b[2J\x1b[Hapi"}
		a.Preview = "ok\x1b]0;pwned\x07\ndone"
		a.Reason = "\u202eevil"
	}))
	for _, keys := range [][]string{nil, {"enter"}} {
		h.key(keys...)
		raw := h.m.View()
		for _, bad := range []string{"\x1b[2J", "\x1b[H", "\x1b]0;", "\x07", "\u202e", "1.2.3\nApproved"} {
			if strings.Contains(raw, bad) {
				t.Fatalf("view carries %q from outside text:\n%q", bad, raw)
			}
		}
		h.screen() // and still fits
	}
	h.want("1.2.3⏎Approved by alice", `\u001B[2J`)
}

func TestFitsSmallAndWideTerminals(t *testing.T) {
	t.Parallel()
	h := newHarness(t, approval("a1", func(a *client.Approval) {
		a.ProposedArgs = map[string]any{"message": strings.Repeat("long ", 60)}
	}))
	for _, size := range [][2]int{{80, 24}, {120, 40}, {40, 10}} {
		h.send(tea.WindowSizeMsg{Width: size[0], Height: size[1]})
		for _, keys := range [][]string{nil, {"enter"}, {"e"}, {"esc", "esc", "tab"}, {"tab"}} {
			h.key(keys...)
			lines := strings.Split(h.m.View(), "\n")
			if len(lines) != size[1] {
				t.Fatalf("%dx%d: %d lines", size[0], size[1], len(lines))
			}
			for _, l := range lines {
				if ansi.StringWidth(l) > size[0] {
					t.Fatalf("%dx%d: line %q too wide", size[0], size[1], ansi.Strip(l))
				}
			}
		}
	}
}

// TestRunAndCardShortIDsDiffer: a run and its card share the timestamp
// digits of their UUIDv7s; each shows the shortest prefix of its random
// part instead, and the two never read the same.
func TestRunAndCardShortIDsDiffer(t *testing.T) {
	t.Parallel()
	runID, cardID := "01a2504f-1111-7000-8000-3f9a2c000001", "01a2504f-1112-7000-8000-3f9a2c110002"
	h := newHarness(t, approval(cardID, func(a *client.Approval) { a.RunID = runID }))
	h.send(runMsg{r: &client.Run{ID: runID, Flow: "deploy", Status: "waiting_approval", Thread: "console:ops-1",
		CreatedAt: t0.Format(time.RFC3339Nano), UpdatedAt: t0.Format(time.RFC3339Nano)}})
	h.key("tab")
	h.want("▸ 3f9a2c0  waiting_approval")
	h.key("tab", "a", "enter")
	h.want("approved 3f9a2c1 ✓")
	if strings.Contains(h.screen(), "01a2504f") {
		t.Fatalf("the shared timestamp shows as an id:\n%s", h.screen())
	}
}

// TestHistoryReadsAsSentences: screen 3 shows the newest audit entries in
// words (core/history), naming the call a decision was about, and reads
// again when the change feed reports something.
func TestHistoryReadsAsSentences(t *testing.T) {
	t.Parallel()
	h := newHarness(t, approval("a1", nil))
	h.api.audit = []approvals.AuditEntry{
		{Seq: 2, At: t0, Kind: approvals.AuditApprovalDecided, Actor: "slack:UALICE", ApprovalID: "a1", Tool: "deploy",
			Detail: []byte(`{"action":"reject","channel":"slack","person":"alice","reason":"not during the freeze"}`)},
		{Seq: 1, At: t0.Add(-time.Minute), Kind: "something.new", Actor: "system", Detail: []byte(`{"n":1}`)},
	}
	h.key("3")
	h.want("[3 History]", "HISTORY", "alice (slack) rejected deploy env=staging service=api", "version=1.2.3: not during the freeze",
		"system something.new: n=1")
	h.api.mu.Lock()
	h.api.audit = append([]approvals.AuditEntry{{Seq: 3, At: t0, Kind: approvals.AuditRunCancelled, Actor: "console:bob",
		Detail: []byte(`{"previous_status":"running"}`)}}, h.api.audit...)
	h.api.mu.Unlock()
	h.send(runMsg{r: &client.Run{ID: "r9", Status: "cancelled"}})
	h.want("console:bob cancelled the run (it was running)")
	h.key("tab")
	h.want("WAITING FOR A HUMAN (1)")
}

// TestTimelineShowsRunningStepProgress: a running step's tool.output shows
// in the timeline as the time it has run and its newest lines; a newer one
// replaces it rather than piling up, and control characters in the lines
// cannot draw on the screen.
func TestTimelineShowsRunningStepProgress(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.api.runs["r1"] = &client.RunDetail{Run: client.Run{ID: "r1", Flow: "deploy", Status: "running", Thread: "console:ops-1",
		Steps: []client.Step{{Index: 0, Tool: "deploy", Status: "dispatching"}}}}
	h.send(runMsg{r: &client.Run{ID: "r1", Flow: "deploy", Status: "running", Thread: "console:ops-1", CreatedAt: t0.Format(time.RFC3339Nano),
		UpdatedAt: t0.Format(time.RFC3339Nano)}})
	h.key("tab", "enter")
	h.want("RUN r1", "timeline")
	at := t0.Format(time.RFC3339Nano)
	h.send(runEventMsg{runID: "r1", ev: client.RunEvent{Type: "tool.output", At: at,
		Data: []byte(`{"step":0,"tool":"deploy","lines":["pulling image"],"elapsed_ms":4000}`)}})
	h.want("deploy running · 4s", "│ pulling image")
	h.send(runEventMsg{runID: "r1", ev: client.RunEvent{Type: "tool.output", At: at,
		Data: []byte(`{"step":0,"tool":"deploy","lines":["pulling image","pushed \u001b[2Jlayer 3/3"],"elapsed_ms":75000}`)}})
	h.want("deploy running · 1m15s", "│ pushed")
	raw := h.m.View()
	if strings.Contains(raw, "running · 4s") || strings.Count(raw, "pulling image") != 1 {
		t.Errorf("the older progress stayed in the timeline:\n%s", raw)
	}
	if strings.Contains(raw, "\x1b[2J") {
		t.Error("an output line drew on the screen")
	}
}
