package tui

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/opsgate/opsgate/internal/client"
	"github.com/opsgate/opsgate/internal/keytext/keytexttest"
)

// recordingAPI is fakeAPI that also reports each decision and answer on
// a channel, so a test running a real program knows when it was sent.
type recordingAPI struct {
	*fakeAPI
	sent chan string
}

func (r *recordingAPI) Decide(ctx context.Context, id string, d client.Decision) (*client.Approval, error) {
	a, err := r.fakeAPI.Decide(ctx, id, d)
	if d.Action == "reject" {
		r.sent <- d.Reason
	} else {
		r.sent <- fmt.Sprint(d.Args["note"])
	}
	return a, err
}

func (r *recordingAPI) Answer(ctx context.Context, runID, actionID string, answer any) (*client.RunDetail, error) {
	out, err := r.fakeAPI.Answer(ctx, runID, actionID, answer)
	if qs, ok := answer.([]client.QuestionAnswer); ok && len(qs) == 1 {
		r.sent <- qs[0].Answer
	}
	return out, err
}

// textFields are the TUI's screens where a person types free text, each
// opened on a model that waits for a decision or an answer.
var textFields = map[string]func(m Model) Model{
	"RejectReason": func(m Model) Model {
		m.selected, m.detail, m.scr = "a1", m.approvals["a1"], screenReject
		m.reject.Focus()
		return m
	},
	"EditField": func(m Model) Model {
		a := m.approvals["a1"]
		m.selected, m.detail, m.scr = "a1", a, screenEdit
		m.edit = newEditForm("a1", a.Tool, map[string]any{"type": "object", "properties": map[string]any{"note": map[string]any{"type": "string"}}},
			map[string]any{"note": ""})
		return m
	},
	"AnswerText": func(m Model) Model {
		q := &question{runID: "r1", action: client.PendingAction{ID: "q1", Kind: "question",
			Questions: []client.QuestionItem{{ID: "why", Kind: "text", Text: "Why?"}}}}
		m.questions["q1"], m.selected, m.scr = q, "q1", screenAnswer
		m.answer = newAnswerForm(q)
		return m
	},
}

// typeInto feeds text and Enter as one unbracketed chunk of terminal
// input, read by Bubble Tea's own parser (as a fast paste or tmux
// send-keys arrives), into the field opened by open, and returns what the
// TUI sent to the API.
func typeInto(t *testing.T, open func(Model) Model, text string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	api := &recordingAPI{fakeAPI: &fakeAPI{approvals: map[string]*client.Approval{"a1": approval("a1", nil)},
		runs: map[string]*client.RunDetail{"r1": {Run: client.Run{ID: "r1"}}}}, sent: make(chan string, 1)}
	m := New(ctx, Options{API: api, Me: &client.Me{Actor: "console:admin", Scopes: []string{"decide"}}, Now: func() time.Time { return t0 }})
	m.approvals["a1"] = api.approvals["a1"]
	p := tea.NewProgram(open(m), tea.WithContext(ctx), tea.WithInput(bytes.NewReader([]byte(text+"\r"))),
		tea.WithOutput(io.Discard), tea.WithoutRenderer(), tea.WithoutSignalHandler())
	done := make(chan error, 1)
	go func() { _, err := p.Run(); done <- err }()
	var got string
	select {
	case got = <-api.sent:
	case <-ctx.Done():
		t.Errorf("nothing was sent for %q", text)
	}
	p.Quit()
	if err := <-done; err != nil && !errors.Is(err, tea.ErrProgramKilled) {
		t.Fatalf("program: %v", err)
	}
	return got
}

// TestTextFieldsKeepEveryWord: in every text field, words that are also
// key names ("up", "left", "down", "ctrl+u") arriving in one chunk are
// text: a reject reason is recorded as typed.
func TestTextFieldsKeepEveryWord(t *testing.T) {
	t.Parallel()
	for name, open := range textFields {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, s := range []string{"roll back up to left", "what is up", "down then right", "the end", "ctrl+u home tab"} {
				if got := typeInto(t, open, s); got != s {
					t.Errorf("typed %q, sent %q", s, got)
				}
			}
		})
	}
}

// FuzzTextFieldsKeepTypedText: whatever one line of text arrives in one
// chunk, each text field sends exactly that text.
func FuzzTextFieldsKeepTypedText(f *testing.F) {
	for _, s := range []string{"roll back up to left", "what is up", "shift+tab esc", "ünïcødé ✓ down"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		s, ok := keytexttest.Typable(s, 1000)
		if !ok {
			return
		}
		for name, open := range textFields {
			if got := typeInto(t, open, s); got != s {
				t.Fatalf("%s: typed %q, sent %q", name, s, got)
			}
		}
	})
}
