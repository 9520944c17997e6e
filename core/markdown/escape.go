package markdown

import "strings"

// The escaping helpers every Dialect builds on: one reviewed place for the
// ways text is kept inert, whichever platform shows it.

// ZWSP is the zero-width space used to break markup that a platform offers
// no escape for (Slack's * _ ~ `, Discord's @everyone) without changing what
// a reader sees.
const ZWSP = "\u200b"

// EscapeEntities writes &, < and > as HTML entities (&amp; &lt; &gt;), as
// HTML-like formats and Slack's mrkdwn require.
func EscapeEntities(s string) string { return entities.Replace(s) }

// entities and attrEntities are built once: a Replacer is safe for
// concurrent use, and building one per call cost every reply its tables.
var (
	entities     = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")
	attrEntities = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")
)

// EscapeAttr is EscapeEntities for a double-quoted attribute value: " too.
func EscapeAttr(s string) string { return attrEntities.Replace(s) }

// Inert fences every character of chars in s with zero-width spaces, so it
// can neither open nor close formatting on a platform that has no escape
// for it.
func Inert(s, chars string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(chars, c) {
			b.WriteString(ZWSP + string(c) + ZWSP)
		} else {
			b.WriteRune(c)
		}
	}
	return b.String()
}

// BackslashEscape puts a backslash before every character of chars in s.
func BackslashEscape(s, chars string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(chars, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// BreakFences keeps code from closing its own ``` fence.
func BreakFences(s string) string {
	return strings.ReplaceAll(s, "```", "`"+ZWSP+"``")
}

// LongestRun is the length of the longest run of c in s (the fence an
// inline code span needs is one longer).
func LongestRun(s string, c byte) int {
	best, n := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			n++
			best = max(best, n)
		} else {
			n = 0
		}
	}
	return best
}

// PrefixLines prefixes the first line of s with first and every other line
// with rest (quotes, list items).
func PrefixLines(s, first, rest string) string {
	lines := strings.Split(s, "\n")
	for i := range lines {
		if i == 0 {
			lines[i] = first + lines[i]
		} else {
			lines[i] = rest + lines[i]
		}
	}
	return strings.Join(lines, "\n")
}

// PlainText flattens inline nodes to their text.
func PlainText(nodes []*Node) string {
	var b strings.Builder
	for _, n := range nodes {
		switch n.Kind {
		case Text, Code:
			b.WriteString(n.Text)
		case LineBreak:
			b.WriteString(" ")
		default:
			b.WriteString(PlainText(n.Children))
		}
	}
	return b.String()
}
