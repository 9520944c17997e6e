package tui

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/shortid"
	"github.com/opsgate/opsgate/internal/client"
	"github.com/opsgate/opsgate/internal/keytext"
)

// API is what the TUI asks of the server; *client.Client is one.
type API interface {
	Approval(ctx context.Context, id string) (*client.Approval, error)
	Run(ctx context.Context, id string) (*client.RunDetail, error)
	Decide(ctx context.Context, id string, d client.Decision) (*client.Approval, error)
	Answer(ctx context.Context, runID, actionID string, answer any) (*client.RunDetail, error)
	Audit(ctx context.Context, q client.AuditQuery) ([]approvals.AuditEntry, string, error)
}

// RunEvents opens the event stream of one run; the TUI reads a run's
// timeline through it. *client.Client's Events, bound to the run path,
// is one.
type RunEvents func(ctx context.Context, runID string, fn func(client.Event) error) error

type screen int

const (
	screenQueue screen = iota
	screenDetail
	screenReject
	screenEdit
	screenAnswer
	screenRuns
	screenRun
	screenHistory
	screenHelp
)

// Messages from the change feed (fed by Run's stream goroutine, or by
// tests directly).
type (
	streamUpMsg   struct{}
	streamDownMsg struct{ err error }
	readyMsg      struct{}
	approvalMsg   struct{ a *client.Approval }
	runMsg        struct{ r *client.Run }
)

// Messages of the model's own commands.
type (
	questionsMsg struct {
		run *client.RunDetail
		err error
	}
	detailMsg struct {
		a   *client.Approval
		err error
		// then opens the edit form (e) or not (enter)
		then screen
	}
	decidedMsg struct {
		id, action string
		a          *client.Approval
		err        error
	}
	answeredMsg struct {
		runID, actionID string
		err             error
	}
	runDetailMsg struct {
		r   *client.RunDetail
		err error
	}
	runEventMsg struct {
		runID string
		ev    client.RunEvent
	}
	runEndMsg struct {
		runID, status string
		err           error
	}
	historyMsg struct {
		lines []historyLine
		err   error
	}
	tickMsg time.Time
)

// item is one line of the queue: an approval or a question.
type item struct {
	approval *client.Approval
	question *question
}

func (it item) id() string {
	if it.approval != nil {
		return it.approval.ID
	}
	return it.question.action.ID
}

func (it item) created() string {
	if it.approval != nil {
		return it.approval.CreatedAt
	}
	return it.question.action.CreatedAt
}

func (it item) expires() string {
	if it.approval != nil {
		return it.approval.ExpiresAt
	}
	return it.question.action.ExpiresAt
}

// Model is the TUI's state. It is a plain value driven by Update, so
// tests run it without a terminal.
type Model struct {
	ctx    context.Context
	api    API
	events RunEvents
	feed   <-chan tea.Msg
	me     *client.Me
	server string
	now    func() time.Time

	width, height int
	at            time.Time

	live    bool
	syncing bool
	fresh   map[string]bool
	liveErr string

	approvals map[string]*client.Approval
	questions map[string]*question // by action id
	runs      []*client.Run        // newest first

	scr      screen
	back     screen // where esc returns from help
	cursor   int
	runCur   int
	scroll   int
	selected string // the id the detail, reject, edit and answer screens are about
	detail   *client.Approval
	reject   textinput.Model
	edit     *editForm
	answer   *answerForm
	// confirm is the approval an "a" asked to approve: one key never
	// decides, Enter confirms it and Esc takes it back.
	confirm  string
	busy     string // an API call in flight ("approving…")
	flash    string
	flashErr bool

	// shortIDs are the short forms of the ids above (reshort).
	shortIDs map[string]string

	run       *client.RunDetail
	runEvents []client.RunEvent
	runEnded  string
	runFeed   chan tea.Msg
	runCancel context.CancelFunc

	// history is the newest audit entries in words (screen 3); loading is
	// true while a read is in flight, stale when a change arrived during it.
	history        []historyLine
	historyErr     string
	loading, stale bool
}

// Options configure New.
type Options struct {
	API    API
	Events RunEvents
	// Feed carries the change feed's messages (Stream makes them).
	Feed   <-chan tea.Msg
	Me     *client.Me
	Server string
	// Now is the clock of the countdowns; default time.Now.
	Now func() time.Time
}

// New returns the model for ctx (API calls are made under it).
func New(ctx context.Context, o Options) Model {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Me == nil {
		o.Me = &client.Me{}
	}
	rj := textinput.New()
	rj.Prompt = ""
	rj.Placeholder = "why (returned to the requester)"
	rj.CharLimit = 4096
	return Model{ctx: ctx, api: o.API, events: o.Events, feed: o.Feed, me: o.Me, server: o.Server, now: o.Now,
		width: 80, height: 24, at: o.Now(), approvals: map[string]*client.Approval{}, questions: map[string]*question{},
		fresh: map[string]bool{}, reject: rj}
}

// Init starts the clock and the feed.
func (m Model) Init() tea.Cmd {
	return tea.Batch(tick(), waitFeed(m.feed))
}

func tick() tea.Cmd {
	return tea.Tick(time.Second, func(t time.Time) tea.Msg { return tickMsg(t) })
}

func waitFeed(c <-chan tea.Msg) tea.Cmd {
	if c == nil {
		return nil
	}
	return func() tea.Msg {
		msg, ok := <-c
		if !ok {
			return nil
		}
		return msg
	}
}

// items is the queue: pending approvals and questions, oldest first (the
// one that expires first is on top).
func (m Model) items() []item {
	var out []item
	for _, a := range m.approvals {
		out = append(out, item{approval: a})
	}
	for _, q := range m.questions {
		out = append(out, item{question: q})
	}
	sort.Slice(out, func(i, j int) bool {
		if a, b := out[i].expires(), out[j].expires(); a != b {
			return a < b
		}
		if a, b := out[i].created(), out[j].created(); a != b {
			return a < b
		}
		return out[i].id() < out[j].id()
	})
	return out
}

func (m Model) current() (item, bool) {
	its := m.items()
	if len(its) == 0 {
		return item{}, false
	}
	return its[min(m.cursor, len(its)-1)], true
}

func (m *Model) setFlash(s string, isErr bool) { m.flash, m.flashErr = s, isErr }

// Update handles one message.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		return m, nil
	case tickMsg:
		m.at = m.now()
		return m, tick()
	case streamUpMsg:
		m.live, m.syncing, m.fresh, m.liveErr = true, true, map[string]bool{}, ""
		return m, waitFeed(m.feed)
	case streamDownMsg:
		m.live = false
		if msg.err != nil {
			m.liveErr = msg.err.Error()
		}
		return m, waitFeed(m.feed)
	case readyMsg:
		// A new connection re-sent everything that is pending: what it
		// did not send is gone.
		for id := range m.approvals {
			if !m.fresh[id] {
				delete(m.approvals, id)
			}
		}
		m.syncing = false
		m.clampCursor()
		return m, waitFeed(m.feed)
	case approvalMsg:
		m.onApproval(msg.a)
		return m, tea.Batch(m.reloadHistory(), waitFeed(m.feed))
	case runMsg:
		cmd := m.onRun(msg.r)
		return m, tea.Batch(cmd, m.reloadHistory(), waitFeed(m.feed))
	case historyMsg:
		m.loading = false
		if msg.err != nil {
			m.historyErr = msg.err.Error()
		} else {
			m.history, m.historyErr = msg.lines, ""
		}
		if m.stale {
			return m, m.reloadHistory()
		}
		return m, nil
	case questionsMsg:
		m.onQuestions(msg)
		return m, nil
	case detailMsg:
		m.busy = ""
		if msg.err != nil {
			m.setFlash("could not load the approval: "+msg.err.Error(), true)
			return m, nil
		}
		m.detail = msg.a
		if msg.then == screenEdit {
			m.edit = newEditForm(msg.a.ID, msg.a.Tool, schemaOf(msg.a), msg.a.ProposedArgs)
			m.scr = screenEdit
		}
		return m, nil
	case decidedMsg:
		return m.onDecided(msg)
	case answeredMsg:
		m.busy = ""
		if msg.err != nil {
			var e *client.Error
			if errors.As(msg.err, &e) && e.Status == 422 && m.answer != nil {
				m.answer.serverError(e.Field, e.Message)
				return m, nil
			}
			m.setFlash("answer refused: "+msg.err.Error(), true)
			return m, nil
		}
		delete(m.questions, msg.actionID)
		m.scr, m.answer = screenQueue, nil
		m.clampCursor()
		m.setFlash("answered ✓", false)
		return m, nil
	case runDetailMsg:
		if msg.err != nil {
			m.setFlash("could not load the run: "+msg.err.Error(), true)
			return m, nil
		}
		if m.run == nil || m.run.ID == msg.r.ID {
			m.run = msg.r
		}
		return m, nil
	case runEventMsg:
		if m.run != nil && msg.runID == m.run.ID {
			if msg.ev.Type == core.EventToolOutput {
				// A running step's progress: the newest replaces the
				// step's earlier one in the timeline; no step changed.
				m.runEvents = withProgress(m.runEvents, msg.ev)
				return m, waitFeed(m.runFeed)
			}
			m.runEvents = append(m.runEvents, msg.ev)
			// A step changed: read the run again for its output.
			return m, tea.Batch(m.loadRun(msg.runID), waitFeed(m.runFeed))
		}
		return m, nil
	case runEndMsg:
		if m.run != nil && msg.runID == m.run.ID {
			m.runEnded = msg.status
			if msg.err != nil {
				m.runEnded = "stream lost: " + msg.err.Error()
			}
			return m, m.loadRun(msg.runID)
		}
		return m, nil
	case tea.KeyMsg:
		// Several runes at once are text, never a key name: "up" in a
		// reason stays in the reason.
		return m.onKey(keytext.Normalize(msg))
	}
	return m, nil
}

func schemaOf(a *client.Approval) map[string]any {
	s, _ := a.InputSchema.(map[string]any)
	return s
}

// clampCursor keeps the cursors on the lists after they changed, and the
// short ids in step with them.
func (m *Model) clampCursor() {
	m.reshort()
	n := len(m.items())
	if m.cursor >= n {
		m.cursor = max(0, n-1)
	}
	if m.runCur >= len(m.runs) {
		m.runCur = max(0, len(m.runs)-1)
	}
}

func (m *Model) onApproval(a *client.Approval) {
	if m.syncing {
		m.fresh[a.ID] = true
	}
	if a.Status == "pending" {
		m.approvals[a.ID] = a
	} else {
		delete(m.approvals, a.ID)
		if m.selected == a.ID && (m.scr == screenDetail || m.scr == screenReject || m.scr == screenEdit) && m.busy == "" {
			// Decided elsewhere while open here.
			m.setFlash(fmt.Sprintf("approval %s was %s elsewhere", m.short(a.ID), a.Status), false)
			m.scr, m.edit = screenQueue, nil
		}
	}
	if m.detail != nil && m.detail.ID == a.ID {
		schema := m.detail.InputSchema
		m.detail = a
		m.detail.InputSchema = schema
	}
	m.clampCursor()
}

func (m *Model) onRun(r *client.Run) tea.Cmd {
	found := false
	for i, old := range m.runs {
		if old.ID == r.ID {
			m.runs[i], found = r, true
		}
	}
	if !found {
		m.runs = append(m.runs, r)
		sort.SliceStable(m.runs, func(i, j int) bool { return m.runs[i].CreatedAt > m.runs[j].CreatedAt })
		if len(m.runs) > 200 {
			m.runs = m.runs[:200]
		}
	}
	if r.Status == "waiting_input" {
		m.reshort()
		return m.loadQuestions(r.ID)
	}
	for id, q := range m.questions {
		if q.runID == r.ID {
			delete(m.questions, id)
		}
	}
	m.clampCursor()
	return nil
}

func (m Model) loadQuestions(runID string) tea.Cmd {
	api, ctx := m.api, m.ctx
	return func() tea.Msg {
		r, err := api.Run(ctx, runID)
		return questionsMsg{run: r, err: err}
	}
}

func (m *Model) onQuestions(msg questionsMsg) {
	if msg.err != nil || msg.run == nil {
		return // the next change of the run tries again
	}
	for id, q := range m.questions {
		if q.runID == msg.run.ID {
			delete(m.questions, id)
		}
	}
	for _, pa := range msg.run.PendingActions {
		if pa.Kind == "question" {
			m.questions[pa.ID] = &question{runID: msg.run.ID, thread: msg.run.Thread, requester: msg.run.Requester, action: pa}
		}
	}
	m.clampCursor()
}

func (m Model) loadDetail(id string, then screen) tea.Cmd {
	api, ctx := m.api, m.ctx
	return func() tea.Msg {
		a, err := api.Approval(ctx, id)
		return detailMsg{a: a, err: err, then: then}
	}
}

func (m Model) loadRun(id string) tea.Cmd {
	api, ctx := m.api, m.ctx
	return func() tea.Msg {
		r, err := api.Run(ctx, id)
		return runDetailMsg{r: r, err: err}
	}
}

func (m Model) decide(id string, d client.Decision) tea.Cmd {
	api, ctx := m.api, m.ctx
	return func() tea.Msg {
		a, err := api.Decide(ctx, id, d)
		return decidedMsg{id: id, action: d.Action, a: a, err: err}
	}
}

func (m Model) onDecided(msg decidedMsg) (tea.Model, tea.Cmd) {
	m.busy = ""
	if msg.err != nil {
		var e *client.Error
		if errors.As(msg.err, &e) && e.Status == 422 && m.scr == screenEdit && m.edit != nil {
			// Next to the field, as the API says.
			m.edit.serverError(e.Field, e.Message)
			return m, nil
		}
		m.setFlash(fmt.Sprintf("%s refused: %s", msg.action, refusal(msg.err)), true)
		return m, nil
	}
	verb := map[string]string{"approve": "approved", "reject": "rejected", "edit": "edited"}[msg.action]
	if msg.a != nil && msg.a.Status == "pending" {
		counted := 0
		for _, d := range msg.a.Decisions {
			if !d.Superseded && (d.Action == "approve" || d.Action == "edit") {
				counted++
			}
		}
		m.setFlash(fmt.Sprintf("%s %s — %d of %d approvals so far", verb, m.short(msg.id), counted, msg.a.Quorum), false)
		m.approvals[msg.id] = msg.a
	} else {
		m.setFlash(fmt.Sprintf("%s %s ✓", verb, m.short(msg.id)), false)
		delete(m.approvals, msg.id)
	}
	m.scr, m.edit = screenQueue, nil
	m.clampCursor()
	return m, nil
}

// refusal words an API refusal for the status line.
func refusal(err error) string {
	var e *client.Error
	if !errors.As(err, &e) {
		return err.Error()
	}
	msg := e.Message
	if e.By != "" && !strings.Contains(msg, e.By) {
		msg += " (by " + e.By + ")"
	}
	return fmt.Sprintf("%s (%d %s)", msg, e.Status, e.Code)
}

// short is how an id is shown: the shortest prefix of its random part
// that no other run or approval the TUI knows shares (core/shortid), so
// a run and its card never show the same short id.
func (m Model) short(id string) string {
	if s, ok := m.shortIDs[id]; ok {
		return s
	}
	return shortid.Of(id)
}

// reshort recomputes the short ids after the known runs and approvals
// changed.
func (m *Model) reshort() {
	ids := make([]string, 0, len(m.approvals)+len(m.runs)+len(m.questions))
	for id := range m.approvals {
		ids = append(ids, id)
	}
	for _, r := range m.runs {
		ids = append(ids, r.ID)
	}
	for _, q := range m.questions {
		ids = append(ids, q.runID)
	}
	m.shortIDs = shortid.Shortest(ids...)
}

// mayDecide is a hint for the help line: the server judges.
func (m Model) mayDecide(a *client.Approval) bool {
	if !m.me.Has("decide") || strings.HasPrefix(m.me.Actor, "agent:") {
		return false
	}
	for _, e := range a.Eligible {
		if e == m.me.Actor {
			return true
		}
	}
	return len(a.Eligible) == 0
}
