package tui

import (
	"context"
	"encoding/json"
	"errors"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/opsgate/opsgate/internal/client"
)

// A run's page: its steps, then its events as they stream.

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
