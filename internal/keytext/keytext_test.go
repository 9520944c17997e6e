package keytext

import (
	"testing"

	tea "github.com/charmbracelet/bubbletea"
)

func TestNormalize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   tea.KeyMsg
		want string // String() after Normalize
	}{
		{"WordIsText", tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("up")}, "[up]"},
		{"KeyNameIsText", tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("ctrl+u")}, "[ctrl+u]"},
		{"OneRuneIsAKey", tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("a")}, "a"},
		{"ArrowIsAKey", tea.KeyMsg{Type: tea.KeyUp}, "up"},
		{"EnterIsAKey", tea.KeyMsg{Type: tea.KeyEnter}, "enter"},
		{"SpaceIsAKey", tea.KeyMsg{Type: tea.KeySpace, Runes: []rune(" ")}, " "},
		{"PasteStaysPaste", tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("left"), Paste: true}, "[left]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := Normalize(tc.in)
			if got.String() != tc.want {
				t.Fatalf("Normalize(%q).String() = %q, want %q", tc.in.String(), got.String(), tc.want)
			}
			if string(got.Runes) != string(tc.in.Runes) {
				t.Fatalf("runes changed: %q → %q", string(tc.in.Runes), string(got.Runes))
			}
		})
	}
}
