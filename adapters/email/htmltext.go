package email

import (
	"html"
	"regexp"
	"strconv"
	"strings"
)

var (
	hrefRE  = regexp.MustCompile(`(?is)\bhref\s*=\s*("([^"]*)"|'([^']*)'|([^\s>]+))`)
	wsRun   = regexp.MustCompile(`\s+`)
	startRE = regexp.MustCompile(`(?is)\bstart\s*=\s*"?(\d{1,6})`)
)

// htmlToText turns HTML into readable plain text: the text part of our own
// replies (rendered by markdown.RenderHTML) and the body of
// HTML-only mail we receive. Blocks become lines, list items get bullets or
// numbers, links read "text (url)", blockquote lines get "> " (so
// StripQuotes drops quoted history), script and style vanish, entities are
// decoded.
func htmlToText(s string) string {
	var b strings.Builder
	type list struct {
		ordered bool
		n       int
	}
	var lists []list
	var hrefs []string
	quote, pre, skip := 0, 0, ""
	newline := func() {
		b.WriteByte('\n')
		for range quote {
			b.WriteString("> ")
		}
	}
	text := func(t string) {
		t = html.UnescapeString(t)
		if pre == 0 {
			t = wsRun.ReplaceAllString(t, " ")
			if last := lastByte(&b); last == 0 || last == '\n' || last == ' ' {
				t = strings.TrimLeft(t, " ")
			}
			b.WriteString(t)
			return
		}
		for i, l := range strings.Split(t, "\n") {
			if i > 0 {
				newline()
			}
			b.WriteString(l)
		}
	}
	for len(s) > 0 {
		lt := strings.IndexByte(s, '<')
		if lt < 0 {
			if skip == "" {
				text(s)
			}
			break
		}
		if lt > 0 && skip == "" {
			text(s[:lt])
		}
		s = s[lt:]
		if strings.HasPrefix(s, "<!--") {
			end := strings.Index(s, "-->")
			if end < 0 {
				break
			}
			s = s[end+3:]
			continue
		}
		gt := strings.IndexByte(s, '>')
		if gt < 0 {
			if skip == "" {
				text(s)
			}
			break
		}
		tag := s[1:gt]
		s = s[gt+1:]
		closing := strings.HasPrefix(tag, "/")
		name := strings.ToLower(strings.TrimLeft(tag, "/"))
		if i := strings.IndexAny(name, " \t\r\n/"); i >= 0 {
			name = name[:i]
		}
		if skip != "" {
			if closing && name == skip {
				skip = ""
			}
			continue
		}
		switch name {
		case "script", "style", "head", "title":
			if !closing {
				skip = name
			}
		case "br":
			newline()
		case "p", "div", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "table", "hr":
			newline()
			if name == "p" && closing {
				newline()
			}
		case "blockquote":
			if closing {
				quote = max(quote-1, 0)
			} else {
				quote++
			}
			newline()
		case "pre":
			if closing {
				pre = max(pre-1, 0)
			} else {
				pre++
			}
			newline()
		case "ul", "ol":
			if closing {
				if len(lists) > 0 {
					lists = lists[:len(lists)-1]
				}
			} else {
				l := list{ordered: name == "ol", n: 1}
				if m := startRE.FindStringSubmatch(tag); m != nil {
					l.n, _ = strconv.Atoi(m[1])
				}
				lists = append(lists, l)
			}
			newline()
		case "li":
			if closing {
				continue
			}
			newline()
			b.WriteString(strings.Repeat("  ", max(len(lists)-1, 0)))
			if n := len(lists); n > 0 && lists[n-1].ordered {
				b.WriteString(strconv.Itoa(lists[n-1].n) + ". ")
				lists[n-1].n++
			} else {
				b.WriteString("• ")
			}
		case "a":
			if closing {
				if n := len(hrefs); n > 0 {
					if h := hrefs[n-1]; h != "" {
						b.WriteString(" (" + h + ")")
					}
					hrefs = hrefs[:n-1]
				}
				continue
			}
			h := ""
			if m := hrefRE.FindStringSubmatch(tag); m != nil {
				h = html.UnescapeString(m[2] + m[3] + m[4])
			}
			hrefs = append(hrefs, h)
		}
	}
	return tidyLines(b.String())
}

func lastByte(b *strings.Builder) byte {
	s := b.String()
	if s == "" {
		return 0
	}
	return s[len(s)-1]
}

// tidyLines trims trailing spaces and collapses runs of blank lines.
func tidyLines(s string) string {
	lines := strings.Split(s, "\n")
	out := make([]string, 0, len(lines))
	blank := 0
	for _, l := range lines {
		l = strings.TrimRight(l, " \t")
		if strings.TrimSpace(strings.TrimLeft(l, "> ")) == "" && !strings.HasPrefix(l, ">") {
			blank++
			if blank > 1 {
				continue
			}
		} else {
			blank = 0
		}
		out = append(out, l)
	}
	return strings.Trim(strings.Join(out, "\n"), "\n")
}
