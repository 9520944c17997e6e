// Package keytext keeps typed text from being read as key names in the
// terminal surfaces (opsgate tui, opsgate chat).
//
// Bubble Tea reads the terminal in chunks and turns a run of printable
// characters into one key message of type KeyRunes; a word that arrives in
// one chunk — a fast paste without bracketed paste, tmux send-keys, a slow
// link — is one message whose String() is the word itself. Key bindings
// compare String() with key names, so the word "up", "left", "end",
// "delete" or "ctrl+u" in a reason was taken for that key and dropped (or
// worse, acted on) by the text input and by our own key handling
// (docs/terminal.md, "Typing and pasting").
//
// A key press is never more than one rune, so a message of several runes
// is text. Normalize marks it as pasted, which Bubble Tea and Bubbles
// already treat as text: its String() is "[up]", which matches no
// binding, and a text input inserts its runes.
package keytext

import (
	"slices"

	tea "github.com/charmbracelet/bubbletea"
)

// Normalize returns msg with a multi-rune KeyRunes message marked as
// pasted text, and its runes its own: Bubble Tea hands every space key the
// same package-level runes and Bubbles' text input sanitizes runes in
// place, so two programs in one process (the tests run several) would
// write one array. Models call it on every key message before they look
// at its String().
func Normalize(msg tea.KeyMsg) tea.KeyMsg {
	if IsText(msg) {
		msg.Paste = true
	}
	msg.Runes = slices.Clone(msg.Runes)
	return msg
}

// IsText reports whether msg carries text rather than one key press:
// several runes at once (or a bracketed paste).
func IsText(msg tea.KeyMsg) bool {
	return msg.Type == tea.KeyRunes && (msg.Paste || len(msg.Runes) > 1)
}
