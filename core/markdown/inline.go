package markdown

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// parseInlineLines parses a paragraph's lines, keeping line breaks.
func parseInlineLines(lines []string, depth int) []*Node {
	var out []*Node
	for i, l := range lines {
		if i > 0 {
			out = append(out, &Node{Kind: LineBreak})
		}
		out = append(out, parseInline(strings.TrimSpace(l), depth)...)
	}
	return mergeText(out)
}

// inline is a recursive-descent parser for one line. An opener whose closer
// cannot be found is literal text; once a delimiter has no closer anywhere
// after a position, later openers of it are not searched again, which keeps
// hostile input ("** ** ** …") linear.
//
// budget bounds the total lookahead to a constant times the line length:
// once spent, remaining openers are text. Well-formed text never gets near it.
type inline struct {
	s       string
	noClose map[string]int // delimiter → position after which it has no closer
	budget  int
	inLink  int // links do not nest
}

func parseInline(s string, depth int) []*Node {
	p := &inline{s: s, noClose: map[string]int{}, budget: 32*len(s) + 1024}
	return p.parse(0, len(s), depth)
}

func (p *inline) parse(from, to, depth int) []*Node {
	s := p.s
	var out []*Node
	var text strings.Builder
	flush := func() {
		if text.Len() > 0 {
			out = append(out, &Node{Kind: Text, Text: text.String()})
			text.Reset()
		}
	}
	for i := from; i < to; {
		c := s[i]
		switch {
		case c == '\\' && i+1 < to && isPunct(s[i+1]):
			text.WriteByte(s[i+1])
			i += 2
			continue
		case c == '`':
			if n, end, ok := p.codeSpan(i, to); ok {
				flush()
				out = append(out, &Node{Kind: Code, Text: n})
				i = end
				continue
			}
			j := i
			for j < to && s[j] == '`' {
				j++
			}
			text.WriteString(s[i:j])
			i = j
			continue
		case c == '[' && depth < maxDepth && p.inLink == 0:
			if txtEnd, url, end, ok := p.link(i, to); ok {
				flush()
				p.inLink++
				children := p.parse(i+1, txtEnd, depth+1)
				p.inLink--
				out = append(out, &Node{Kind: Link, URL: url, Children: children})
				i = end
				continue
			}
		case (c == '*' || c == '_') && depth < maxDepth:
			delim := string(c)
			kind := Italic
			if i+1 < to && s[i+1] == c {
				delim, kind = delim+delim, Bold
			}
			if end, ok := p.emphasis(i, to, delim); ok {
				flush()
				out = append(out, &Node{Kind: kind, Children: p.parse(i+len(delim), end, depth+1)})
				i = end + len(delim)
				continue
			}
			text.WriteString(delim)
			i += len(delim)
			continue
		}
		_, size := utf8.DecodeRuneInString(s[i:to])
		text.WriteString(s[i : i+size])
		i += size
	}
	flush()
	return out
}

// codeSpan matches `code` with a closing backtick run of the same length.
// Without a match it returns the end of the opening run.
func (p *inline) codeSpan(i, to int) (string, int, bool) {
	s := p.s
	j := i
	for j < to && s[j] == '`' {
		j++
	}
	run := s[i:j]
	if p.spend(j - i) {
		return "", j, false
	}
	for k := j; k < to; {
		if p.spend(1) {
			return "", j, false
		}
		idx := strings.Index(s[k:to], run)
		if idx < 0 {
			p.spend(to - k)
			return "", j, false
		}
		p.spend(idx)
		a := k + idx
		b := a + len(run)
		if b < to && s[b] == '`' {
			for b < to && s[b] == '`' {
				b++
			}
			p.spend(b - a)
			k = b
			continue
		}
		content := s[j:a]
		if len(content) >= 2 && content[0] == ' ' && content[len(content)-1] == ' ' && strings.Trim(content, " ") != "" {
			content = content[1 : len(content)-1]
		}
		return content, b, true
	}
	return "", j, false
}

// link matches [text](url) and returns the end of the text, the URL and the
// end of the link.
func (p *inline) link(i, to int) (int, string, int, bool) {
	s := p.s
	level := 0
	k := i + 1
	for ; k < to; k++ {
		if p.spend(1) {
			return 0, "", 0, false
		}
		switch s[k] {
		case '\\':
			k++
			continue
		case '`':
			// skip the span, or the unmatched run, whole
			_, end, _ := p.codeSpan(k, to)
			k = end - 1
			continue
		case '[':
			level++
			continue
		case ']':
			if level > 0 {
				level--
				continue
			}
		default:
			continue
		}
		break
	}
	if k+1 >= to || s[k] != ']' || s[k+1] != '(' {
		return 0, "", 0, false
	}
	txtEnd := k
	paren := 0
	for k += 2; k < to; k++ {
		if p.spend(1) {
			return 0, "", 0, false
		}
		switch s[k] {
		case '(':
			paren++
		case ')':
			if paren == 0 {
				url := strings.TrimSpace(s[txtEnd+2 : k])
				if url == "" || strings.ContainsAny(url, " \t") {
					return 0, "", 0, false
				}
				return txtEnd, strings.Trim(url, "<>"), k + 1, true
			}
			paren--
		}
	}
	return 0, "", 0, false
}

// emphasis finds the closer of delim opened at i: the opener must be followed
// by a non-space, the closer preceded by one; "_" must not touch letters on
// the outside (snake_case stays text).
func (p *inline) emphasis(i, to int, delim string) (int, bool) {
	s := p.s
	start := i + len(delim)
	if start >= to || isSpaceByte(s[start]) {
		return 0, false
	}
	if delim[0] == '_' && i > 0 && isWordBefore(s, i) {
		return 0, false
	}
	if nc, ok := p.noClose[delim]; ok && start >= nc {
		return 0, false
	}
	for k := start + 1; k < to; k++ {
		if p.spend(1) {
			return 0, false
		}
		switch s[k] {
		case '\\':
			k++
			continue
		case '`':
			// skip the span, or the unmatched run, whole
			_, end, _ := p.codeSpan(k, to)
			k = end - 1
			continue
		case '[':
			if _, _, end, ok := p.link(k, to); ok {
				k = end - 1
			}
			continue
		}
		if !strings.HasPrefix(s[k:to], delim) || isSpaceByte(s[k-1]) {
			continue
		}
		after := k + len(delim)
		if len(delim) == 1 && after < to && s[after] == delim[0] {
			// "**" inside single-delimiter emphasis belongs to a bold
			k = after
			continue
		}
		if delim[0] == '_' && after < to && isWordAt(s, after) {
			continue
		}
		return k, true
	}
	if to == len(s) {
		p.noClose[delim] = start
	}
	return 0, false
}

// spend takes n steps from the budget and reports whether it is exhausted.
func (p *inline) spend(n int) bool {
	p.budget -= n
	return p.budget < 0
}

func isSpaceByte(c byte) bool { return c == ' ' || c == '\t' || c == '\n' }

func isWordBefore(s string, i int) bool {
	r, _ := utf8.DecodeLastRuneInString(s[:i])
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

func isWordAt(s string, i int) bool {
	r, _ := utf8.DecodeRuneInString(s[i:])
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

func isPunct(c byte) bool {
	return c < utf8.RuneSelf && unicode.IsPunct(rune(c)) || strings.IndexByte("`*_~<>[]()#+-.!|\\", c) >= 0
}

// mergeText joins adjacent Text nodes.
func mergeText(in []*Node) []*Node {
	var out []*Node
	for _, n := range in {
		if n.Kind == Text && len(out) > 0 && out[len(out)-1].Kind == Text {
			out[len(out)-1] = &Node{Kind: Text, Text: out[len(out)-1].Text + n.Text}
			continue
		}
		out = append(out, n)
	}
	return out
}
