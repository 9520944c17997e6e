package tui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/internal/client"
)

// API is what the TUI asks of the server; *client.Client is one.
type API interface {
	Approval(ctx context.Context, id string) (*client.Approval, error)
	Run(ctx context.Context, id string) (*client.RunDetail, error)
	Decide(ctx context.Context, id string, d client.Decision) (*client.Approval, error)
	Answer(ctx context.Context, runID, actionID string, answer any) (*client.RunDetail, error)
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
	busy     string // an API call in flight ("approving…")
	flash    string
	flashErr bool

	run       *client.RunDetail
	runEvents []client.RunEvent
	runEnded  string
	runFeed   chan tea.Msg
	runCancel context.CancelFunc
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
		return m, waitFeed(m.feed)
	case runMsg:
		cmd := m.onRun(msg.r)
		return m, tea.Batch(cmd, waitFeed(m.feed))
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
		return m.onKey(msg)
	}
	return m, nil
}

func schemaOf(a *client.Approval) map[string]any {
	s, _ := a.InputSchema.(map[string]any)
	return s
}

func (m *Model) clampCursor() {
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
			m.setFlash(fmt.Sprintf("approval %s was %s elsewhere", short(a.ID), a.Status), false)
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
		m.setFlash(fmt.Sprintf("%s %s — %d of %d approvals so far", verb, short(msg.id), counted, msg.a.Quorum), false)
		m.approvals[msg.id] = msg.a
	} else {
		m.setFlash(fmt.Sprintf("%s %s ✓", verb, short(msg.id)), false)
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

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
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

func (m Model) onKey(k tea.KeyMsg) (tea.Model, tea.Cmd) {
	key := k.String()
	if key == "ctrl+c" {
		return m, m.quit()
	}
	switch m.scr {
	case screenReject:
		return m.keyReject(k)
	case screenEdit:
		return m.keyEdit(k)
	case screenAnswer:
		return m.keyAnswer(k)
	case screenHelp:
		m.scr = m.back
		return m, nil
	}
	switch key {
	case "q":
		return m, m.quit()
	case "?":
		m.back, m.scr = m.scr, screenHelp
		return m, nil
	case "tab":
		if m.scr == screenRuns || m.scr == screenRun {
			m.leaveRun()
			m.scr = screenQueue
		} else {
			m.scr = screenRuns
		}
		m.scroll = 0
		return m, nil
	case "1":
		m.leaveRun()
		m.scr = screenQueue
		return m, nil
	case "2":
		m.leaveRun()
		m.scr = screenRuns
		return m, nil
	}
	switch m.scr {
	case screenQueue:
		return m.keyQueue(key)
	case screenDetail:
		return m.keyDetail(key)
	case screenRuns:
		return m.keyRuns(key)
	case screenRun:
		return m.keyRun(key)
	}
	return m, nil
}

func (m Model) quit() tea.Cmd {
	if m.runCancel != nil {
		m.runCancel()
	}
	return tea.Quit
}

func (m Model) keyQueue(key string) (tea.Model, tea.Cmd) {
	its := m.items()
	switch key {
	case "up", "k":
		m.cursor = max(0, m.cursor-1)
	case "down", "j":
		m.cursor = min(max(0, len(its)-1), m.cursor+1)
	case "enter", "a", "r", "e":
		it, ok := m.current()
		if !ok {
			return m, nil
		}
		if it.question != nil {
			m.selected = it.question.action.ID
			m.answer = newAnswerForm(it.question)
			m.scr = screenAnswer
			return m, nil
		}
		m.selected, m.detail, m.scroll = it.approval.ID, it.approval, 0
		if key == "enter" {
			m.scr = screenDetail
			return m, m.loadDetail(it.approval.ID, screenDetail)
		}
		return m.keyDetail(key)
	}
	return m, nil
}

func (m Model) keyDetail(key string) (tea.Model, tea.Cmd) {
	if m.detail == nil {
		return m, nil
	}
	switch key {
	case "esc", "backspace":
		m.scr = screenQueue
	case "up", "k":
		m.scroll = max(0, m.scroll-1)
	case "down", "j":
		m.scroll++
	case "a":
		if m.busy != "" {
			return m, nil
		}
		m.busy = "approving…"
		return m, m.decide(m.detail.ID, client.Decision{Action: "approve"})
	case "r":
		m.reject.SetValue("")
		m.scr = screenReject
		return m, m.reject.Focus()
	case "e":
		if schemaOf(m.detail) == nil {
			m.busy = "loading the tool's schema…"
			return m, m.loadDetail(m.detail.ID, screenEdit)
		}
		m.edit = newEditForm(m.detail.ID, m.detail.Tool, schemaOf(m.detail), m.detail.ProposedArgs)
		m.scr = screenEdit
	}
	return m, nil
}

func (m Model) keyReject(k tea.KeyMsg) (tea.Model, tea.Cmd) {
	switch k.String() {
	case "esc":
		m.reject.Blur()
		m.scr = screenDetail
		return m, nil
	case "enter":
		if m.busy != "" || m.detail == nil {
			return m, nil
		}
		m.busy = "rejecting…"
		m.reject.Blur()
		return m, m.decide(m.detail.ID, client.Decision{Action: "reject", Reason: m.reject.Value()})
	}
	var cmd tea.Cmd
	m.reject, cmd = m.reject.Update(k)
	return m, cmd
}

func (m Model) keyEdit(k tea.KeyMsg) (tea.Model, tea.Cmd) {
	f := m.edit
	if f == nil {
		m.scr = screenDetail
		return m, nil
	}
	switch k.String() {
	case "esc":
		m.scr, m.edit = screenDetail, nil
		return m, nil
	case "tab", "down":
		f.setFocus(f.focus + 1)
		return m, nil
	case "shift+tab", "up":
		f.setFocus(f.focus - 1)
		return m, nil
	case "enter", "ctrl+s":
		if m.busy != "" {
			return m, nil
		}
		args, ok := f.args()
		if !ok {
			for i, fd := range f.fields {
				if fd.err != "" {
					f.setFocus(i)
					break
				}
			}
			return m, nil
		}
		m.busy = "saving the edit…"
		return m, m.decide(f.approvalID, client.Decision{Action: "edit", Args: args})
	}
	if len(f.fields) == 0 {
		return m, nil
	}
	fd := f.fields[f.focus]
	var cmd tea.Cmd
	fd.input, cmd = fd.input.Update(k)
	fd.err = ""
	return m, cmd
}

func (m Model) keyAnswer(k tea.KeyMsg) (tea.Model, tea.Cmd) {
	f := m.answer
	if f == nil || len(f.fields) == 0 {
		m.scr = screenQueue
		return m, nil
	}
	fd := f.fields[f.focus]
	switch k.String() {
	case "esc":
		m.scr, m.answer = screenQueue, nil
		return m, nil
	case "tab", "down":
		f.setFocus(f.focus + 1)
		return m, nil
	case "shift+tab", "up":
		f.setFocus(f.focus - 1)
		return m, nil
	case "enter", "ctrl+s":
		if m.busy != "" {
			return m, nil
		}
		ans, ok := f.answer()
		if !ok {
			return m, nil
		}
		m.busy = "answering…"
		api, ctx, q := m.api, m.ctx, f.q
		return m, func() tea.Msg {
			_, err := api.Answer(ctx, q.runID, q.action.ID, ans)
			return answeredMsg{runID: q.runID, actionID: q.action.ID, err: err}
		}
	}
	switch fd.item.Kind {
	case "choice":
		n := len(fd.item.Choices)
		switch s := k.String(); {
		case s == "left" || s == "h":
			fd.choice = (fd.choice - 1 + n) % max(n, 1)
		case s == "right" || s == "l" || s == " ":
			fd.choice = (fd.choice + 1) % max(n, 1)
		case len(s) == 1 && s[0] >= '1' && s[0] <= '9' && int(s[0]-'1') < n:
			fd.choice = int(s[0] - '1')
		}
		return m, nil
	case "confirm":
		switch k.String() {
		case "ctrl+y":
			fd.confirm = true
			return m, nil
		case "ctrl+n":
			fd.confirm = false
			return m, nil
		}
		if fd.input.Value() == "" {
			switch k.String() {
			case "y":
				fd.confirm = true
				return m, nil
			case "n":
				fd.confirm = false
				return m, nil
			}
		}
	}
	var cmd tea.Cmd
	fd.input, cmd = fd.input.Update(k)
	fd.err = ""
	return m, cmd
}

func (m Model) keyRuns(key string) (tea.Model, tea.Cmd) {
	switch key {
	case "up", "k":
		m.runCur = max(0, m.runCur-1)
	case "down", "j":
		m.runCur = min(max(0, len(m.runs)-1), m.runCur+1)
	case "esc":
		m.scr = screenQueue
	case "enter":
		if len(m.runs) == 0 {
			return m, nil
		}
		return m.openRun(m.runs[m.runCur].ID)
	}
	return m, nil
}

func (m Model) keyRun(key string) (tea.Model, tea.Cmd) {
	switch key {
	case "esc", "backspace":
		m.leaveRun()
		m.scr = screenRuns
	case "up", "k":
		m.scroll = max(0, m.scroll-1)
	case "down", "j":
		m.scroll++
	}
	return m, nil
}

// openRun shows a run's timeline: its steps, then its events live.
func (m Model) openRun(id string) (tea.Model, tea.Cmd) {
	m.leaveRun()
	m.scr, m.scroll = screenRun, 0
	m.run = &client.RunDetail{Run: client.Run{ID: id}}
	m.runEvents, m.runEnded = nil, ""
	cmds := []tea.Cmd{m.loadRun(id)}
	if m.events != nil {
		ctx, cancel := context.WithCancel(m.ctx)
		ch := make(chan tea.Msg, 64)
		m.runFeed, m.runCancel = ch, cancel
		events := m.events
		go func() {
			err := events(ctx, id, func(ev client.Event) error {
				if ev.Type == "end" {
					var end struct {
						Status string `json:"status"`
					}
					_ = json.Unmarshal(ev.Data, &end)
					select {
					case ch <- runEndMsg{runID: id, status: end.Status}:
					case <-ctx.Done():
					}
					return errEnd
				}
				var re client.RunEvent
				if json.Unmarshal(ev.Data, &re) != nil {
					re = client.RunEvent{Type: ev.Type}
				}
				select {
				case ch <- runEventMsg{runID: id, ev: re}:
				case <-ctx.Done():
					return ctx.Err()
				}
				return nil
			})
			if err != nil && !errors.Is(err, errEnd) && ctx.Err() == nil {
				select {
				case ch <- runEndMsg{runID: id, err: err}:
				case <-ctx.Done():
				}
			}
		}()
		cmds = append(cmds, waitFeed(ch))
	}
	return m, tea.Batch(cmds...)
}

var errEnd = errors.New("end")

func (m *Model) leaveRun() {
	if m.runCancel != nil {
		m.runCancel()
	}
	m.runCancel, m.runFeed = nil, nil
}
