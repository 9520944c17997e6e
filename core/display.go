package core

import (
	"fmt"
	"strings"
	"unicode"
)

// LineMark is how a line break inside a value is shown on a card: visibly,
// on the same line, so an argument "1.2.3\nApproved by alice" cannot pass
// for a line of the card itself.
const LineMark = "⏎"

// OneLine renders a value from outside (an argument, a reason, feedback)
// for one line of a card: line breaks (\r\n, \n, \r, \v, \f, U+0085,
// U+2028, U+2029) become LineMark, and other control characters and the
// bidirectional overrides that reorder what a reader sees become visible
// \u escapes. Printable text is unchanged; OneLine(OneLine(s)) == OneLine(s).
func OneLine(s string) string {
	if !strings.ContainsFunc(s, hidden) {
		return s
	}
	s = strings.ReplaceAll(s, "\r\n", "\n")
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n' || r == '\r' || r == '\v' || r == '\f' || r == 0x85 || r == 0x2028 || r == 0x2029:
			b.WriteString(LineMark)
		case r == '\t':
			b.WriteRune(r)
		case hidden(r):
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Clip keeps at most n runes of s (a preview on a card, an excerpt in a
// reply), cutting between runes.
func Clip(s string, n int) string {
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos]
		}
		i++
	}
	return s
}

// hidden reports a rune that would break a line or change how the text
// around it reads: control characters (tab aside), line and paragraph
// separators, bidi embeddings, overrides and isolates.
func hidden(r rune) bool {
	switch {
	case r == '\t':
		return false
	case unicode.IsControl(r), r == 0x2028, r == 0x2029:
		return true
	case r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069, r == 0x200E, r == 0x200F, r == 0x061C:
		return true
	}
	return false
}

// Shown is the argument's value for display on a card (OneLine). Value
// stays the exact text, for edit forms and modals.
func (a CardArg) Shown() string { return OneLine(a.Value) }
