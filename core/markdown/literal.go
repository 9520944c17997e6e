package markdown

import "strings"

// Escape makes s literal text of the Markdown subset, so people's words
// (reject feedback, an unknown command, a refused value) put into a reply
// render as the same text on every platform and never as a link, emphasis,
// code, a list, a quote or a fence. It backslash-escapes what the parser
// reads as markup: \ ` * _ [ ] anywhere, and at the start of a line the
// list, quote and fence markers (- + > ~ and the "." or ")" of "1."). Line
// breaks are kept; other text is unchanged, so the source stays readable.
func Escape(s string) string {
	var b strings.Builder
	b.Grow(len(s) + len(s)/8)
	lineStart := true // only spaces so far on this line
	digits := false   // and then only digits
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\n':
			b.WriteByte(c)
			lineStart, digits = true, false
			continue
		case strings.IndexByte("\\`*_[]", c) >= 0,
			lineStart && strings.IndexByte("-+>~", c) >= 0,
			digits && (c == '.' || c == ')'):
			b.WriteByte('\\')
		}
		b.WriteByte(c)
		switch {
		case c == ' ' || c == '\t':
			if digits {
				digits = false
			}
		case c >= '0' && c <= '9' && (lineStart || digits):
			digits = true
			lineStart = false
			continue
		default:
			digits = false
		}
		if c != ' ' && c != '\t' {
			lineStart = false
		}
	}
	return b.String()
}
