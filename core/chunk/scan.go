package chunk

import (
	"strings"
	"unicode/utf8"

	"github.com/rivo/uniseg"
)

// Break ranks: the higher, the better a place to cut. Outer ranks are breaks
// outside any span that should be kept whole (a link, inline code, an inline
// HTML element); inner ranks are the same breaks inside such a span, used only
// when the span cannot fit in one chunk.
const (
	rankGrapheme = iota // any grapheme cluster boundary: a hard cut
	rankInnerWord
	rankInnerLine
	rankInnerPara
	rankWord // after a space or tab
	rankLine // after a line break
	rankPara // after a blank line
	numRanks

	noBreak = -1 // inside a grapheme cluster split only to see markup
)

// fence is an open Markdown code fence.
type fence struct {
	ch   byte // '`' or '~'; 0 when no fence is open
	n    int  // length of the opening run
	info string
	at   int // offset of the opening line, to tell fences opened in this chunk
}

// elem is an open HTML element. Elements form an immutable linked stack so
// that a state snapshot is a pointer copy.
type elem struct {
	name, open string
	parent     *elem
	serial     int  // creation order: a child's serial exceeds its parent's
	openCum    int  // cost of reopening this element and its ancestors
	closeCum   int  // cost of closing this element and its ancestors
	inline     bool // this element or an ancestor is inline
	inPre      bool // this element or an ancestor is <pre>
}

// state is everything the scanner knows at a position.
type state struct {
	fence     fence
	stack     *elem
	spanEnd   int  // end of the link or code span being traversed
	lineStart bool // at the start of a line
	blankLine bool // the line so far holds only spaces and tabs
}

// splitter holds one Split call's input and per-chunk decisions.
type splitter struct {
	s       string
	opt     Options
	maxScan int // how far a lookahead for a span's end may go
	serial  int
	snaps   []state // states seen in the current chunk, see cand

	// per chunk
	p0          int
	carryFence  bool
	carryTags   bool
	startSerial int
}

// cand is a possible cut. It holds no pointers so that recording one per
// token is cheap; the state at the cut is snaps[snap] with the line flags.
type cand struct {
	end, body, snap      int
	lineStart, blankLine bool
	ok                   bool
}

func split(text string, opt Options, reserve int) []Chunk {
	sp := &splitter{s: text, opt: opt, maxScan: 4*opt.Limit + 64}
	var out []Chunk
	st := state{lineStart: true, blankLine: true}
	for p := 0; p < len(text); {
		var c Chunk
		c, p, st = sp.chunk(p, st, reserve)
		out = append(out, c)
	}
	return out
}

// chunk takes the longest good chunk starting at p0 in state st0 and returns
// it with the position and state where the next chunk starts.
func (sp *splitter) chunk(p0 int, st0 state, reserve int) (Chunk, int, state) {
	s, limit := sp.s, sp.opt.Limit
	open := sp.reopen(p0, st0, reserve)
	fixed := sp.cost(open) + reserve
	avail := limit - fixed - sp.closeCost(&st0, p0)

	var best [numRanks]cand
	st := st0
	sp.snaps = append(sp.snaps[:0], st)
	last := &sp.snaps[0]
	body := 0
	for p := p0; p < len(s); {
		end, rank := sp.next(p, &st)
		body += sp.cost(s[p:end])
		if fixed+body > limit {
			break
		}
		p = end
		if st.stack != last.stack || st.fence.ch != last.fence.ch || st.fence.at != last.fence.at || st.spanEnd != last.spanEnd {
			sp.snaps = append(sp.snaps, st)
			last = &sp.snaps[len(sp.snaps)-1]
		}
		if fixed+body+sp.closeCost(&st, end) > limit {
			continue
		}
		if end == len(s) {
			return Chunk{Open: open, Body: s[p0:end], Close: sp.closeText(&st, end)}, end, st
		}
		if rank == noBreak {
			continue
		}
		c := cand{end: end, body: body, snap: len(sp.snaps) - 1, lineStart: st.lineStart, blankLine: st.blankLine, ok: true}
		best[rank] = c
		if rank != rankGrapheme {
			best[rankGrapheme] = c
		}
	}

	pick := choose(&best, avail)
	if pick < 0 {
		return sp.hardCut(p0, st0, open, fixed)
	}
	c := best[pick]
	cst := sp.snaps[c.snap]
	cst.lineStart, cst.blankLine = c.lineStart, c.blankLine
	end, cst := sp.absorb(c.end, c.body, cst, fixed)
	return Chunk{Open: open, Body: s[p0:end], Close: sp.closeText(&cst, end)}, end, cst
}

// absorb extends a cut over closing tags and a closing fence line that follow
// it, so a chunk does not end just before them and force the next chunk to
// reopen an element only to close it again.
func (sp *splitter) absorb(end, body int, cst state, fixed int) (int, state) {
	s := sp.s
	for end < len(s) {
		st := cst
		next, rank := sp.next(end, &st)
		if rank == noBreak {
			break
		}
		closesTag := sp.opt.Syntax == HTML && s[end] == '<' && end+1 < len(s) && s[end+1] == '/' &&
			depth(st.stack) < depth(cst.stack)
		closesFence := cst.fence.ch != 0 && st.fence.ch == 0
		if !closesTag && !closesFence {
			break
		}
		nbody := body + sp.cost(s[end:next])
		if fixed+nbody+sp.closeCost(&st, next) > sp.opt.Limit {
			break
		}
		end, body, cst = next, nbody, st
		if closesFence && end < len(s) {
			// take the fence line's line break too
			st2 := cst
			end2, rank2 := sp.next(end, &st2)
			if tok := s[end:end2]; (tok == "\n" || tok == "\r\n") && rank2 != noBreak && fixed+body+sp.cost(tok) <= sp.opt.Limit {
				end, body, cst = end2, body+sp.cost(tok), st2
			}
		}
	}
	return end, cst
}

func depth(e *elem) int {
	n := 0
	for ; e != nil; e = e.parent {
		n++
	}
	return n
}

// choose picks the cut: an outer break that fills at least half the chunk,
// preferring paragraph over line over word; else the latest outer break; then
// the same for inner breaks; then the latest grapheme boundary. It returns -1
// when nothing fits.
func choose(best *[numRanks]cand, avail int) int {
	for _, group := range [2][2]int{{rankPara, rankWord}, {rankInnerPara, rankInnerWord}} {
		for r := group[0]; r >= group[1]; r-- {
			if best[r].ok && 2*best[r].body >= avail {
				return r
			}
		}
		pick := -1
		for r := group[0]; r >= group[1]; r-- {
			if best[r].ok && (pick < 0 || best[r].end > best[pick].end) {
				pick = r
			}
		}
		if pick >= 0 {
			return pick
		}
	}
	if best[rankGrapheme].ok {
		return rankGrapheme
	}
	return -1
}

// hardCut handles a first token (a grapheme cluster, tag or fence line) that
// does not fit on its own: it is cut at a code point boundary.
func (sp *splitter) hardCut(p0 int, st0 state, open string, fixed int) (Chunk, int, state) {
	s := sp.s
	tmp := st0
	end, _ := sp.next(p0, &tmp)
	// Cut at grapheme boundaries inside the token (an atom such as a long
	// tag holds several); split a cluster into code points only when the
	// first one alone does not fit.
	used := fixed
	cut := p0
	for cut < end {
		g, _ := graphemeEnd(s[:end], cut)
		w := sp.cost(s[cut:g])
		if used+w+sp.closeCost(&st0, g) > sp.opt.Limit {
			break
		}
		used += w
		cut = g
	}
	if cut == p0 {
		// not even one cluster fits: fill with code points, at least one so
		// the split always progresses
		for cut < end {
			_, size := utf8.DecodeRuneInString(s[cut:end])
			w := sp.cost(s[cut : cut+size])
			if used+w+sp.closeCost(&st0, cut+size) > sp.opt.Limit && cut > p0 {
				break
			}
			used += w
			cut += size
		}
	}
	nst := st0
	nst.lineStart, nst.blankLine = false, false
	return Chunk{Open: open, Body: s[p0:cut], Close: sp.closeText(&st0, cut)}, cut, nst
}

// reopen decides what the chunk starting at p0 carries over from the previous
// one and returns the text that reopens it. State whose reopening and closing
// would leave less than a quarter of the limit for content is not carried
// (see the package doc).
func (sp *splitter) reopen(p0 int, st0 state, reserve int) string {
	sp.p0 = p0
	sp.startSerial = sp.serial
	sp.carryFence, sp.carryTags = false, false
	half := sp.opt.Limit - sp.opt.Limit/4 - reserve
	if f := st0.fence; f.ch != 0 {
		ticks := strings.Repeat(string(f.ch), f.n)
		for _, o := range []string{ticks + f.info + "\n", ticks + "\n"} {
			if sp.cost(o)+f.n+1 <= half {
				sp.carryFence = true
				return o
			}
		}
	}
	if e := st0.stack; e != nil && e.openCum+e.closeCum <= half {
		sp.carryTags = true
		sp.startSerial = 0
		var parts []string
		for ; e != nil; e = e.parent {
			parts = append(parts, e.open)
		}
		var b strings.Builder
		for i := len(parts) - 1; i >= 0; i-- {
			b.WriteString(parts[i])
		}
		return b.String()
	}
	return ""
}

// closeCost is the cost of closeText at end.
func (sp *splitter) closeCost(st *state, end int) int {
	n := 0
	if f := st.fence; f.ch != 0 && (sp.carryFence || f.at >= sp.p0) {
		n = f.n
		if end == 0 || sp.s[end-1] != '\n' {
			n++
		}
	}
	if st.stack != nil {
		if sp.carryTags {
			n += st.stack.closeCum
		} else {
			for e := st.stack; e != nil && e.serial > sp.startSerial; e = e.parent {
				n += sp.cost(closeTag(e.name))
			}
		}
	}
	return n
}

// closeText closes the fence and elements open at end that this chunk opened
// or reopened.
func (sp *splitter) closeText(st *state, end int) string {
	var b strings.Builder
	if f := st.fence; f.ch != 0 && (sp.carryFence || f.at >= sp.p0) {
		if end == 0 || sp.s[end-1] != '\n' {
			b.WriteByte('\n')
		}
		b.WriteString(strings.Repeat(string(f.ch), f.n))
	}
	for e := st.stack; e != nil && e.serial > sp.startSerial; e = e.parent {
		b.WriteString(closeTag(e.name))
	}
	return b.String()
}

func closeTag(name string) string { return "</" + name + ">" }

// cost measures s in the options' unit, fast for one ASCII byte.
func (sp *splitter) cost(s string) int {
	if len(s) == 1 && s[0] < utf8.RuneSelf {
		return 1
	}
	return Measure(s, sp.opt.Unit)
}

// next consumes the token at p, updates st to the state after it and returns
// the token's end and the rank of the break there. A token is a grapheme
// cluster or an atom that must never be cut: a fence line, an HTML tag or
// entity, a Slack/Discord <…> reference, a run of backticks.
func (sp *splitter) next(p int, st *state) (int, int) {
	s, syn := sp.s, sp.opt.Syntax
	if syn != HTML && st.lineStart {
		if end, ok := sp.fenceLine(p, st); ok {
			st.lineStart, st.blankLine = false, false
			return end, rankGrapheme
		}
	}
	end := -1
	switch c := s[p]; {
	case c == '<' && syn == HTML:
		end = sp.tag(p, st)
	case c == '<' && (syn == Mrkdwn || st.fence.ch == 0):
		end = sp.angle(p)
	case c == '&' && syn != Markdown:
		end = entity(s, p)
	case c == '`' && syn != HTML && st.fence.ch == 0:
		end = sp.codeSpan(p, st)
	case c == '[' && syn == Markdown && st.fence.ch == 0 && p >= st.spanEnd:
		sp.link(p, st)
	}
	glued := false
	if end < 0 {
		end, glued = graphemeEnd(s, p)
	} else if end < len(s) && s[end] >= utf8.RuneSelf {
		// an atom followed by a combining mark, ZWJ…: the mark belongs to
		// the atom's last character, so no cut between them
		_, size := utf8.DecodeLastRuneInString(s[:end])
		cl, _, _, _ := uniseg.FirstGraphemeClusterInString(s[end-size:], -1)
		glued = len(cl) > size
	}
	rank := rankGrapheme
	switch tok := s[p:end]; tok {
	case "\n", "\r\n":
		rank = rankLine
		if st.blankLine {
			rank = rankPara
		}
		st.lineStart, st.blankLine = true, true
	case " ", "\t":
		rank = rankWord
		st.lineStart = false
	default:
		st.lineStart, st.blankLine = false, false
	}
	if rank != rankGrapheme && (end < st.spanEnd || (st.stack != nil && st.stack.inline)) {
		rank -= rankWord - rankInnerWord
	}
	if glued {
		rank = noBreak
	}
	return end, rank
}

// graphemeEnd returns the end of the grapheme cluster at p. ASCII followed by
// ASCII (other than CR LF) is always a cluster of its own, which keeps plain
// text fast; everything else asks uniseg. A cluster that swallows an ASCII
// byte after its start (a Prepend mark such as U+0600 before "<") is ended
// before that byte, so markup is still seen; glued reports that the position
// returned is inside a cluster and must not be cut.
func graphemeEnd(s string, p int) (end int, glued bool) {
	c := s[p]
	if c < utf8.RuneSelf && (p+1 == len(s) || (s[p+1] < utf8.RuneSelf && !(c == '\r' && s[p+1] == '\n'))) {
		return p + 1, false
	}
	cl, _, _, _ := uniseg.FirstGraphemeClusterInString(s[p:], -1)
	if c != '\r' {
		for i := 1; i < len(cl); i++ {
			if cl[i] < utf8.RuneSelf {
				return p + i, true
			}
		}
	}
	return p + len(cl), false
}

// fenceLine recognizes a fence line (up to three spaces, then three or more
// backticks or tildes) at a line start, updates the fence state and returns
// the line's end (before its line break).
func (sp *splitter) fenceLine(p int, st *state) (int, bool) {
	s := sp.s
	i := p
	for i < len(s) && i-p < 3 && s[i] == ' ' {
		i++
	}
	if i >= len(s) || (s[i] != '`' && s[i] != '~') {
		return 0, false
	}
	ch := s[i]
	j := i
	for j < len(s) && s[j] == ch {
		j++
	}
	n := j - i
	if n < 3 {
		return 0, false
	}
	lineEnd := len(s)
	if k := strings.IndexByte(s[j:], '\n'); k >= 0 {
		lineEnd = j + k
		if lineEnd > j && s[lineEnd-1] == '\r' {
			lineEnd--
		}
	}
	rest := s[j:lineEnd]
	if st.fence.ch != 0 {
		if ch == st.fence.ch && n >= st.fence.n && strings.TrimRight(rest, " \t") == "" {
			st.fence = fence{}
			return lineEnd, true
		}
		return 0, false
	}
	info := strings.TrimSpace(rest)
	if ch == '`' && strings.IndexByte(info, '`') >= 0 {
		return 0, false
	}
	st.fence = fence{ch: ch, n: n, info: info, at: p}
	return lineEnd, true
}

// codeSpan consumes a run of backticks; outside a span it looks for the
// closing run of the same length on the same line and, if found, marks the
// span so that it is kept whole where it fits.
func (sp *splitter) codeSpan(p int, st *state) int {
	s := sp.s
	j := p
	for j < len(s) && s[j] == '`' {
		j++
	}
	n := j - p
	if p < st.spanEnd {
		return j
	}
	limit := min(len(s), j+sp.maxScan)
	for k := j; k < limit; {
		switch s[k] {
		case '\n':
			return j
		case '`':
			m := k
			for m < len(s) && s[m] == '`' {
				m++
			}
			if m-k == n {
				st.spanEnd = m
				return j
			}
			k = m
		default:
			k++
		}
	}
	return j
}

// link marks a [text](url) link starting at p as a span kept whole where it
// fits. Lookahead stops at line breaks and stray brackets, so scanning stays
// linear.
func (sp *splitter) link(p int, st *state) {
	s := sp.s
	limit := min(len(s), p+sp.maxScan)
	k := p + 1
	for ; k < limit; k++ {
		if c := s[k]; c == ']' {
			break
		} else if c == '\n' || c == '[' {
			return
		}
	}
	if k+1 >= limit || s[k] != ']' || s[k+1] != '(' {
		return
	}
	for k += 2; k < limit; k++ {
		switch s[k] {
		case ')':
			st.spanEnd = k + 1
			return
		case ' ', '\t', '\n', '(', '[', ']':
			return
		}
	}
}

// angle returns the end of a <…> reference (Slack <url|text>, <@U1>, <!here>;
// Discord <@1>, <#1>, <t:1>, <https://…>) or -1. In Markdown the reference may
// not hold spaces, so a stray "<" in prose is not an atom.
func (sp *splitter) angle(p int) int {
	s := sp.s
	limit := min(len(s), p+sp.maxScan)
	for k := p + 1; k < limit; k++ {
		switch s[k] {
		case '>':
			if k == p+1 {
				return -1
			}
			return k + 1
		case '<', '\n':
			return -1
		case ' ', '\t':
			if sp.opt.Syntax == Markdown {
				return -1
			}
		}
	}
	return -1
}

// entity returns the end of an HTML entity like &amp; or &#128512; at p, or -1.
func entity(s string, p int) int {
	for k := p + 1; k < len(s) && k-p <= 32; k++ {
		c := s[k]
		switch {
		case c == ';':
			if k == p+1 {
				return -1
			}
			return k + 1
		case c == '#' && k == p+1,
			'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		default:
			return -1
		}
	}
	return -1
}
