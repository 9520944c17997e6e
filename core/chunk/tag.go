package chunk

import "strings"

// isInline reports the HTML elements kept whole where they fit. Block elements
// (<pre>, <blockquote>) may be cut at their line breaks and are reopened.
func isInline(name string) bool {
	switch name {
	case "a", "b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "span", "code",
		"tg-spoiler", "tg-emoji":
		return true
	}
	return false
}

// isVoid reports the elements that never have a closing tag.
func isVoid(name string) bool {
	switch name {
	case "br", "hr", "img", "wbr", "meta", "link", "input":
		return true
	}
	return false
}

// tag consumes an HTML tag at p, pushing or popping the element stack, and
// returns its end; -1 when the "<" does not start a tag (it is then text, as
// in a renderer that failed to escape it).
func (sp *splitter) tag(p int, st *state) int {
	s := sp.s
	i := p + 1
	if i >= len(s) {
		return -1
	}
	closing := false
	if s[i] == '/' {
		closing = true
		i++
	}
	if i < len(s) && s[i] == '!' && !closing {
		// comment or doctype: an atom, no element
		if strings.HasPrefix(s[i:], "!--") {
			if k := strings.Index(s[i+3:], "-->"); k >= 0 && k < sp.maxScan {
				return i + 3 + k + 3
			}
			return -1
		}
		return sp.tagEnd(i)
	}
	start := i
	for i < len(s) && isNameByte(s[i], i == start) {
		i++
	}
	if i == start {
		return -1
	}
	name := strings.ToLower(s[start:i])
	end := sp.tagEnd(i)
	if end < 0 {
		return -1
	}
	if closing {
		for e := st.stack; e != nil; e = e.parent {
			if e.name == name {
				st.stack = e.parent
				break
			}
		}
		return end
	}
	if isVoid(name) || s[end-2] == '/' {
		return end
	}
	sp.serial++
	e := &elem{name: name, open: s[p:end], parent: st.stack, serial: sp.serial}
	e.openCum = sp.cost(e.open)
	e.closeCum = sp.cost(closeTag(name))
	e.inPre = name == "pre"
	e.inline = isInline(name)
	if par := st.stack; par != nil {
		e.openCum += par.openCum
		e.closeCum += par.closeCum
		e.inPre = e.inPre || par.inPre
		e.inline = e.inline || par.inline
	}
	if name == "code" && e.inPre {
		// code inside pre is a code block: cut at its lines like a fence
		e.inline = st.stack != nil && st.stack.inline
	}
	st.stack = e
	return end
}

// tagEnd returns the position after the ">" that ends a tag whose name ends
// before i, or -1 if another "<" or the scan limit comes first.
func (sp *splitter) tagEnd(i int) int {
	s := sp.s
	limit := min(len(s), i+sp.maxScan)
	for k := i; k < limit; k++ {
		switch s[k] {
		case '>':
			return k + 1
		case '<':
			return -1
		}
	}
	return -1
}

func isNameByte(c byte, first bool) bool {
	if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' {
		return true
	}
	return !first && ('0' <= c && c <= '9' || c == '-')
}
