package chat

import (
	"strings"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/markdown"
)

// opsgate's replies are Markdown (a code fence around tool output, bold,
// lists, links). The chat renders them with the project's own walker
// (core/markdown) rather than printing the fences: ansiDialect styles them
// with SGR sequences on a terminal, markdown.Plain drops the markup for a
// pipe. A terminal renderer such as glamour would add a syntax highlighter
// and a second Markdown parser to the binary for the same few styles.

// SGR sequences the dialect emits; every other escape byte in the output
// comes from nowhere, because Text and CodeBlock neutralize the input's.
const (
	sgrBold, sgrBoldOff       = "\x1b[1m", "\x1b[22m"
	sgrItalic, sgrItalicOff   = "\x1b[3m", "\x1b[23m"
	sgrUnder, sgrUnderOff     = "\x1b[4m", "\x1b[24m"
	sgrCode, sgrColorOff      = "\x1b[36m", "\x1b[39m" // cyan
	sgrFaint, sgrFaintOff     = "\x1b[2m", "\x1b[22m"
	codeBar, quoteBar, bullet = "│ ", "┃ ", "• "
)

// ansiDialect renders Markdown for a terminal.
type ansiDialect struct{}

var _ markdown.Dialect = ansiDialect{}

// safe keeps outside text's line breaks and shows every other control
// character (escape sequences, bidi overrides) visibly, as core.OneLine
// does, and replaces bytes that are not UTF-8, so a reply can never move
// the cursor or restyle the terminal.
func safe(s string) string {
	// A stray byte is no character; in some terminals 0x9b starts a
	// control sequence.
	s = strings.ToValidUTF8(s, "\uFFFD")
	lines := strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.ReplaceAll(core.OneLine(l), "\t", "    ")
	}
	return strings.Join(lines, "\n")
}

func (ansiDialect) Text(s string) string         { return safe(s) }
func (ansiDialect) Bold(inner string) string     { return sgrBold + inner + sgrBoldOff }
func (ansiDialect) Italic(inner string) string   { return sgrItalic + inner + sgrItalicOff }
func (ansiDialect) Code(s string) string         { return sgrCode + safe(s) + sgrColorOff }
func (ansiDialect) Bullet() string               { return bullet }
func (ansiDialect) Quote(inner string) string    { return markdown.PrefixLines(inner, quoteBar, quoteBar) }
func (ansiDialect) CodeBlock(_, s string) string { return codeLines(s, sgrFaint+codeBar+sgrFaintOff) }
func (ansiDialect) Link(u, label, text string) string {
	if label == "" || text == u {
		return sgrUnder + safe(u) + sgrUnderOff
	}
	return sgrUnder + label + sgrUnderOff + " " + sgrFaint + "(" + safe(u) + ")" + sgrFaintOff
}

// plainDialect is markdown.Plain with code blocks set off by a bar, so a
// pipe reads tool output apart from the text around it, without fences.
type plainDialect struct{ markdown.Dialect }

func (plainDialect) Text(s string) string         { return safe(s) }
func (plainDialect) Code(s string) string         { return safe(s) }
func (plainDialect) CodeBlock(_, s string) string { return codeLines(s, codeBar) }
func (plainDialect) Link(u, label, text string) string {
	if label == "" || text == u {
		return safe(u)
	}
	return label + " (" + safe(u) + ")"
}

// codeLines is a code block's lines, each behind bar.
func codeLines(s, bar string) string {
	lines := strings.Split(strings.TrimRight(safe(s), "\n"), "\n")
	for i, l := range lines {
		lines[i] = bar + l
	}
	return strings.Join(lines, "\n")
}

// renderMarkdown renders a reply for the terminal (ansi) or a pipe.
func renderMarkdown(md string, ansi bool) []string {
	var out string
	if ansi {
		out = markdown.Convert(md, ansiDialect{})
	} else {
		out = markdown.Convert(md, plainDialect{markdown.Plain})
	}
	return strings.Split(strings.TrimRight(out, "\n"), "\n")
}
