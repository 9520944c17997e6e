package chat

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/opsgate/opsgate/internal/keytext/keytexttest"
)

// typeAtPrompt feeds text and Enter to the real prompt as one unbracketed
// chunk of terminal input, read by Bubble Tea's own parser (as a fast
// paste or tmux send-keys arrives), and returns the line the prompt sent.
func typeAtPrompt(t *testing.T, text string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	sent := make(chan string, 1)
	m := newPrompt(ctx, "test", func(_ context.Context, line string) ([]string, error) {
		sent <- line
		return nil, ErrQuit
	})
	p := tea.NewProgram(m, tea.WithContext(ctx), tea.WithInput(bytes.NewReader([]byte(text+"\r"))),
		tea.WithOutput(io.Discard), tea.WithoutRenderer(), tea.WithoutSignalHandler())
	if _, err := p.Run(); err != nil && !errors.Is(err, tea.ErrProgramKilled) {
		t.Fatalf("program: %v", err)
	}
	select {
	case line := <-sent:
		return line
	default:
		t.Fatalf("the prompt sent nothing for %q (ctx: %v)", text, ctx.Err())
	}
	return ""
}

// TestPromptKeepsEveryWord: words that are also key names ("up",
// "left", "end", "ctrl+u") arriving in one chunk are text, not keys.
func TestPromptKeepsEveryWord(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"what is up", "roll back up to left", "go down, then right", "the end", "delete home tab",
		"ctrl+u ctrl+a backspace", "esc enter pgup"} {
		if got := typeAtPrompt(t, s); got != s {
			t.Errorf("typed %q, the prompt sent %q", s, got)
		}
	}
}

// FuzzPromptKeepsTypedText: whatever one line of text arrives in one
// chunk, the prompt sends exactly that line.
func FuzzPromptKeepsTypedText(f *testing.F) {
	for _, s := range []string{"what is up", "roll back up to left", "right left down up", "x end", "ctrl+w alt+b", "ünïcødé ✓ up"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		s, ok := keytexttest.Typable(s, 2000)
		if !ok {
			return
		}
		if got := typeAtPrompt(t, s); got != s {
			t.Fatalf("typed %q, the prompt sent %q", s, got)
		}
	})
}
