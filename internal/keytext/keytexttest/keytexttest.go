// Package keytexttest helps the fuzz targets of the terminal's text fields
// (internal/chat, internal/tui) tell what a person can type on one line.
package keytexttest

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Typable keeps what a person can type on one line of a text field:
// printable runes and spaces, at most max bytes. ok is false when nothing
// but spaces is left (a field sends no blank line).
func Typable(s string, max int) (string, bool) {
	var b strings.Builder
	for _, r := range s {
		if r == utf8.RuneError || (!unicode.IsPrint(r) && r != ' ') || b.Len()+utf8.RuneLen(r) > max {
			continue
		}
		b.WriteRune(r)
	}
	out := b.String()
	return out, strings.TrimSpace(out) != ""
}
