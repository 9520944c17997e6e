package tui

import (
	tea "github.com/charmbracelet/bubbletea"

	"github.com/opsgate/opsgate/internal/client"
)

// The keys of each screen (docs/terminal.md has the table). Every key
// message has been through keytext.Normalize: several runes at once are
// text, never a key name.

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
		if m.scr == screenRuns || m.scr == screenRun || m.scr == screenHistory {
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
	case "3":
		m.leaveRun()
		m.scr, m.scroll = screenHistory, 0
		m.stale = true
		return m, m.reloadHistory()
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
	case screenHistory:
		switch key {
		case "up", "k":
			m.scroll = max(0, m.scroll-1)
		case "down", "j":
			m.scroll++
		case "esc":
			m.scr = screenQueue
		}
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
		m.selected, m.detail, m.scroll, m.confirm = it.approval.ID, it.approval, 0, ""
		if key == "enter" || key == "a" {
			// "a" opens the details with the approval to confirm: what
			// is approved is on the screen before Enter approves it.
			m.scr = screenDetail
			nm, cmd := m.keyDetail(key)
			return nm, tea.Batch(m.loadDetail(it.approval.ID, screenDetail), cmd)
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
		if m.confirm != "" {
			m.confirm = ""
			return m, nil
		}
		m.scr = screenQueue
	case "up", "k":
		m.scroll = max(0, m.scroll-1)
	case "down", "j":
		m.scroll++
	case "a":
		// One key never decides: "a" asks, Enter approves.
		m.confirm = m.detail.ID
	case "enter":
		if m.confirm != m.detail.ID || m.busy != "" {
			return m, nil
		}
		m.confirm = ""
		m.busy = "approving…"
		return m, m.decide(m.detail.ID, client.Decision{Action: "approve"})
	case "r":
		m.confirm = ""
		m.reject.SetValue("")
		m.scr = screenReject
		return m, m.reject.Focus()
	case "e":
		m.confirm = ""
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
