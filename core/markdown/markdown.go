// Package markdown parses the small Markdown subset opsgate replies are
// authored in and renders it through a Dialect, so that a reply is written
// once and every adapter shows it properly — and so that text from outside
// (tool output, chat, email) can never become active markup: a stray "*",
// "<script>", a javascript: link or a platform's mention syntax render as
// inert text.
//
// The parser, the tree, the walk and the escaping helpers live here, in one
// reviewed place; each adapter supplies its platform's Dialect (as a backend
// supplies a slog.Handler), so this package names no platform. Plain text
// and HTML (email bodies, the web console) are built in.
//
// The subset: **bold**, _italic_ and *italic*, `inline code`, fenced code
// with a language, [text](url) links, bullet and numbered lists, > quotes and
// paragraphs. Anything else is text.
package markdown

import (
	"strconv"
	"strings"
)

// Kind is the type of a Node.
type Kind int

const (
	// Document is the root; its children are blocks.
	Document Kind = iota
	// Paragraph holds inline children.
	Paragraph
	// List holds ListItem children; Ordered and Start describe numbering.
	List
	// ListItem holds blocks.
	ListItem
	// Quote holds blocks.
	Quote
	// CodeBlock is fenced code: Text is the content, Lang the language.
	CodeBlock
	// Text is literal text.
	Text
	// LineBreak is a line break inside a paragraph (chat keeps them).
	LineBreak
	// Bold holds inline children.
	Bold
	// Italic holds inline children.
	Italic
	// Code is inline code; Text is the content.
	Code
	// Link holds inline children (the link text); URL is the target.
	Link
)

// Node is one element of the parsed tree.
type Node struct {
	Kind     Kind
	Text     string // Text, Code, CodeBlock
	Lang     string // CodeBlock
	URL      string // Link
	Ordered  bool   // List
	Start    int    // List: first number of an ordered list
	Children []*Node
}

// maxDepth bounds nesting of quotes, lists and emphasis, so hostile input
// like ">>>>>>…" or "**_**_…" cannot exhaust the stack; deeper text stays text.
const maxDepth = 12

// Parse parses src into a Document. It never fails: what is not markup is
// text.
func Parse(src string) *Node {
	src = strings.ReplaceAll(src, "\r\n", "\n")
	return &Node{Kind: Document, Children: parseBlocks(strings.Split(src, "\n"), 0)}
}

func parseBlocks(lines []string, depth int) []*Node {
	var out []*Node
	for i := 0; i < len(lines); {
		line := lines[i]
		switch {
		case strings.TrimSpace(line) == "":
			i++
		case isFence(line) != "":
			n, next := parseFence(lines, i)
			out = append(out, n)
			i = next
		case depth < maxDepth && isQuote(line):
			j := i
			var inner []string
			for ; j < len(lines) && isQuote(lines[j]); j++ {
				inner = append(inner, stripQuote(lines[j]))
			}
			out = append(out, &Node{Kind: Quote, Children: parseBlocks(inner, depth+1)})
			i = j
		case depth < maxDepth && listMarker(line) != nil:
			n, next := parseList(lines, i, depth)
			out = append(out, n)
			i = next
		default:
			j := i
			for j < len(lines) && strings.TrimSpace(lines[j]) != "" && (j == i || !startsBlock(lines[j])) {
				j++
			}
			out = append(out, &Node{Kind: Paragraph, Children: parseInlineLines(lines[i:j], depth)})
			i = j
		}
	}
	return out
}

func startsBlock(line string) bool {
	return isFence(line) != "" || isQuote(line) || listMarker(line) != nil
}

// isFence returns the fence run ("```", "~~~~") if line opens a fence.
func isFence(line string) string {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 || len(t) < 3 || (t[0] != '`' && t[0] != '~') {
		return ""
	}
	k := 0
	for k < len(t) && t[k] == t[0] {
		k++
	}
	if k < 3 || (t[0] == '`' && strings.Contains(t[k:], "`")) {
		return ""
	}
	return t[:k]
}

func parseFence(lines []string, i int) (*Node, int) {
	run := isFence(lines[i])
	info := strings.TrimSpace(strings.TrimLeft(strings.TrimLeft(lines[i], " "), run[:1]))
	lang, _, _ := strings.Cut(info, " ")
	var body []string
	j := i + 1
	for ; j < len(lines); j++ {
		t := strings.TrimSpace(lines[j])
		if strings.HasPrefix(t, run) && strings.Trim(t, run[:1]) == "" {
			j++
			break
		}
		body = append(body, lines[j])
	}
	return &Node{Kind: CodeBlock, Lang: lang, Text: strings.Join(body, "\n")}, j
}

func isQuote(line string) bool {
	t := strings.TrimLeft(line, " ")
	return len(line)-len(t) <= 3 && strings.HasPrefix(t, ">")
}

func stripQuote(line string) string {
	t := strings.TrimLeft(line, " ")[1:]
	return strings.TrimPrefix(t, " ")
}

type marker struct {
	indent  int // columns before the marker
	width   int // bytes up to the item's content
	ordered bool
	num     int
}

// listMarker recognizes "- ", "* ", "+ ", "1. ", "1) " at the start of line.
func listMarker(line string) *marker {
	t := strings.TrimLeft(line, " ")
	ind := len(line) - len(t)
	if len(t) >= 2 && (t[0] == '-' || t[0] == '*' || t[0] == '+') && (t[1] == ' ' || t[1] == '\t') {
		return &marker{indent: ind, width: ind + 2}
	}
	k := 0
	for k < len(t) && k < 9 && t[k] >= '0' && t[k] <= '9' {
		k++
	}
	if k > 0 && k+1 < len(t) && (t[k] == '.' || t[k] == ')') && (t[k+1] == ' ' || t[k+1] == '\t') {
		n, _ := strconv.Atoi(t[:k])
		return &marker{indent: ind, width: ind + k + 2, ordered: true, num: n}
	}
	return nil
}

func parseList(lines []string, i, depth int) (*Node, int) {
	first := listMarker(lines[i])
	list := &Node{Kind: List, Ordered: first.ordered, Start: first.num}
	j := i
	for j < len(lines) {
		m := listMarker(lines[j])
		if m == nil || m.ordered != first.ordered || m.indent > first.indent+1 {
			break
		}
		item := []string{lines[j][m.width:]}
		j++
		// continuation: indented lines (nested content) and lazy lines
		for j < len(lines) && strings.TrimSpace(lines[j]) != "" {
			if nm := listMarker(lines[j]); nm != nil && nm.indent <= first.indent+1 {
				break
			}
			if isFence(lines[j]) != "" || isQuote(lines[j]) {
				if len(lines[j])-len(strings.TrimLeft(lines[j], " ")) < m.width {
					break
				}
			}
			item = append(item, dedent(lines[j], m.width))
			j++
		}
		list.Children = append(list.Children, &Node{Kind: ListItem, Children: parseBlocks(item, depth+1)})
	}
	return list, j
}

func dedent(line string, n int) string {
	k := 0
	for k < n && k < len(line) && line[k] == ' ' {
		k++
	}
	return line[k:]
}
