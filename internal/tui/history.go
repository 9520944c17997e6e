package tui

import (
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/opsgate/opsgate/core/history"
	"github.com/opsgate/opsgate/internal/client"
)

// The history screen (3): the newest audit entries as sentences
// (core/history), the same words as the console's audit page and
// `opsgate audit list`.

// historyLimit is how many entries the screen shows; historyLookups bounds
// the approvals it reads to name the calls of decisions.
const (
	historyLimit   = 100
	historyLookups = 30
)

// historyLine is one audit entry in words.
type historyLine struct {
	seq  int64
	at   time.Time
	text string
}

// reloadHistory reads the newest entries again when the history screen is
// open (a change on the feed usually adds some); one read at a time, and
// one more if changes came during it.
func (m *Model) reloadHistory() tea.Cmd {
	if m.scr != screenHistory {
		return nil
	}
	if m.loading {
		m.stale = true
		return nil
	}
	m.loading, m.stale = true, false
	api, ctx := m.api, m.ctx
	return func() tea.Msg {
		entries, _, err := api.Audit(ctx, client.AuditQuery{Newest: true, Limit: historyLimit})
		if err != nil {
			return historyMsg{err: err}
		}
		calls := client.AuditCalls(ctx, api.Approval, entries, historyLookups)
		lines := make([]historyLine, 0, len(entries))
		for _, e := range entries {
			lines = append(lines, historyLine{seq: e.Seq, at: e.At, text: history.Sentence(e, calls)})
		}
		return historyMsg{lines: lines}
	}
}

func (m Model) viewHistory(w int) ([]string, string) {
	out := []string{styleTitle.Render(" HISTORY (newest first)")}
	if m.historyErr != "" {
		out = append(out, styleErr.Render(" could not read the audit log: "+text(m.historyErr)))
	}
	if len(m.history) == 0 && m.historyErr == "" {
		msg := "  Nothing recorded yet."
		if m.loading {
			msg = "  loading…"
		}
		out = append(out, "", styleFaint.Render(msg))
	}
	for _, l := range m.history {
		out = append(out, wrapped(" "+l.at.Local().Format("01-02 15:04:05")+"  ", l.text, w)...)
	}
	return out, "↑↓ scroll · tab queue · 2 runs · q quit"
}
