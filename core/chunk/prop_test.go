package chunk

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rivo/uniseg"
	"pgregory.net/rapid"
)

// Words that exercise every segmentation hazard: multi-byte UTF-8, astral
// code points (2 UTF-16 units), ZWJ emoji sequences, flags (regional
// indicator pairs), combining marks, CJK, CR LF.
var hazardWords = []string{
	"alpha", "beta", "go", "x", "supercalifragilisticexpialidocious",
	"日本語の文章", "中文", "한국어",
	"👨‍👩‍👧‍👦", "🏳️‍🌈", "🇩🇪🇫🇷", "🇺🇸", "👍🏽",
	"e\u0301", "a\u0308\u0323", "ñ", "Ω", "𝔘𝔫𝔦", "😀😀",
	"*", "_", "\\", "&", "<", ">", "[", "]", "(", ")", "`", "~", "|",
}

var fenceOpenRe = regexp.MustCompile("^(`{3,}|~{3,})[^\n]*\n$")
var fenceCloseRe = regexp.MustCompile("^\n?(`{3,}|~{3,})$")
var htmlOpenRe = regexp.MustCompile(`^(<[a-z][^<>]*>)*$`)
var htmlCloseRe = regexp.MustCompile(`^(</[a-z][a-z0-9-]*>)*$`)
var markerRe = regexp.MustCompile(`^\n\((\d+)/(\d+)\)$`)

// genMarkdown builds Markdown with paragraphs, lines, links, inline code and
// well-formed fences.
func genMarkdown(t *rapid.T) string {
	var b strings.Builder
	blocks := rapid.IntRange(1, 12).Draw(t, "blocks")
	for i := 0; i < blocks; i++ {
		if rapid.IntRange(0, 3).Draw(t, "fence") == 0 {
			lang := rapid.SampledFrom([]string{"", "go", "python", "sh"}).Draw(t, "lang")
			ticks := rapid.SampledFrom([]string{"```", "````", "~~~"}).Draw(t, "ticks")
			b.WriteString(ticks + lang + "\n")
			lines := rapid.IntRange(0, 8).Draw(t, "codelines")
			for j := 0; j < lines; j++ {
				b.WriteString(genLine(t, false))
				b.WriteString("\n")
			}
			b.WriteString(ticks + "\n")
		} else {
			lines := rapid.IntRange(1, 4).Draw(t, "lines")
			for j := 0; j < lines; j++ {
				b.WriteString(genLine(t, true))
				b.WriteString(rapid.SampledFrom([]string{"\n", "\r\n"}).Draw(t, "nl"))
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

func genLine(t *rapid.T, inline bool) string {
	n := rapid.IntRange(0, 14).Draw(t, "words")
	var w []string
	for i := 0; i < n; i++ {
		switch k := rapid.IntRange(0, 9).Draw(t, "kind"); {
		case inline && k == 0:
			w = append(w, "[link "+rapid.SampledFrom(hazardWords).Draw(t, "lt")+"](https://example.com/"+rapid.StringMatching(`[a-z0-9]{0,20}`).Draw(t, "path")+")")
		case inline && k == 1:
			w = append(w, "`code "+rapid.SampledFrom(hazardWords[:12]).Draw(t, "ct")+"`")
		case k == 2:
			w = append(w, rapid.StringN(1, 40, -1).Draw(t, "junk"))
		default:
			w = append(w, rapid.SampledFrom(hazardWords).Draw(t, "w"))
		}
	}
	sep := rapid.SampledFrom([]string{" ", "  ", "\t", " "}).Draw(t, "sep")
	return strings.Join(w, sep)
}

// genHTML builds balanced Telegram-style HTML.
func genHTML(t *rapid.T, depth int) string {
	var b strings.Builder
	n := rapid.IntRange(1, 10).Draw(t, "items")
	for i := 0; i < n; i++ {
		switch k := rapid.IntRange(0, 9).Draw(t, "hk"); {
		case k == 0 && depth < 3:
			tag := rapid.SampledFrom([]string{"b", "i", "u", "s", "code", "tg-spoiler"}).Draw(t, "tag")
			b.WriteString("<" + tag + ">" + genHTML(t, depth+1) + "</" + tag + ">")
		case k == 1 && depth < 3:
			b.WriteString(`<a href="https://example.com/?a=1&amp;b=2">` + genHTML(t, depth+1) + "</a>")
		case k == 2 && depth == 0:
			b.WriteString(`<pre><code class="language-go">`)
			lines := rapid.IntRange(0, 6).Draw(t, "prelines")
			for j := 0; j < lines; j++ {
				b.WriteString(escapeHTML(genLine(t, false)) + "\n")
			}
			b.WriteString("</code></pre>")
		case k == 3:
			b.WriteString(rapid.SampledFrom([]string{"\n", "\n\n", " "}).Draw(t, "ws"))
		case k == 4:
			b.WriteString(rapid.SampledFrom([]string{"&amp;", "&lt;", "&gt;", "&quot;", "&#128512;"}).Draw(t, "ent"))
		default:
			b.WriteString(escapeHTML(genLine(t, false)))
		}
	}
	return b.String()
}

func escapeHTML(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// checkSplit asserts every property Split promises for input in, and returns
// the chunks.
func checkSplit(t interface {
	Helper()
	Fatalf(string, ...any)
}, in string, opt Options) []Chunk {
	t.Helper()
	parts := SplitChunks(in, opt)
	limit := max(opt.Limit, MinLimit)
	flat := Split(in, opt)
	if len(flat) != len(parts) {
		t.Fatalf("Split gave %d chunks, SplitChunks %d", len(flat), len(parts))
	}
	if in == "" {
		if len(parts) != 0 {
			t.Fatalf("empty input gave %d chunks", len(parts))
		}
		return parts
	}
	// 1. Bodies reproduce the input exactly; added text is only Open, Close, Marker.
	var joined strings.Builder
	cuts := []int{}
	for i, p := range parts {
		if flat[i] != p.String() {
			t.Fatalf("chunk %d: Split %q != parts %q", i, flat[i], p.String())
		}
		if p.Body == "" {
			t.Fatalf("chunk %d has an empty body", i)
		}
		joined.WriteString(p.Body)
		cuts = append(cuts, joined.Len())
	}
	if joined.String() != in {
		t.Fatalf("bodies do not reproduce the input:\n got %q\nwant %q", joined.String(), in)
	}
	graphemeBoundary := map[int]bool{len(in): true}
	bigCluster := map[int]bool{}
	g := uniseg.NewGraphemes(in)
	for g.Next() {
		from, to := g.Positions()
		graphemeBoundary[from] = true
		if Measure(in[from:to], opt.Unit) > limit/8 {
			for k := from; k <= to; k++ {
				bigCluster[k] = true
			}
		}
	}
	for i, p := range parts {
		s := p.String()
		// 2. within the limit, 3. valid UTF-8
		if m := Measure(s, opt.Unit); m > limit {
			t.Fatalf("chunk %d measures %d %s > limit %d: %q", i, m, opt.Unit, limit, s)
		}
		if !utf8.ValidString(s) {
			t.Fatalf("chunk %d is not valid UTF-8: %q", i, s)
		}
		// 4. no grapheme cluster split (unless the cluster alone nearly fills a chunk)
		if c := cuts[i]; !graphemeBoundary[c] && !bigCluster[c] {
			t.Fatalf("cut after chunk %d at %d splits a grapheme cluster: %q|%q\nopt %+v\nin %q\nchunks %q", i, c, in[max(0, c-8):c], in[c:min(len(in), c+8)], opt, in, parts)
		}
		// 5. markers
		if opt.Markers && len(parts) > 1 && markerWidth(len(fmt.Sprint(len(parts)))) <= limit/4 {
			if want := fmt.Sprintf("\n(%d/%d)", i+1, len(parts)); p.Marker != want {
				t.Fatalf("chunk %d marker %q, want %q", i, p.Marker, want)
			}
		} else if p.Marker != "" && !(opt.Markers && markerRe.MatchString(p.Marker)) {
			t.Fatalf("chunk %d has unexpected marker %q", i, p.Marker)
		}
		if len(parts) == 1 && p.Marker != "" {
			t.Fatalf("single chunk carries marker %q", p.Marker)
		}
		// 6. added text has the documented shape; markup balanced per chunk
		switch opt.Syntax {
		case HTML:
			if !htmlOpenRe.MatchString(p.Open) || !htmlCloseRe.MatchString(p.Close) {
				t.Fatalf("chunk %d added %q / %q", i, p.Open, p.Close)
			}
			if err := tagsBalanced(p.Open + p.Body + p.Close); err != nil {
				t.Fatalf("chunk %d: %v: %q", i, err, s)
			}
		default:
			if (p.Open != "" && !fenceOpenRe.MatchString(p.Open)) || (p.Close != "" && !fenceCloseRe.MatchString(p.Close)) {
				t.Fatalf("chunk %d added %q / %q", i, p.Open, p.Close)
			}
			if fenceOpenAtEnd(s) {
				t.Fatalf("chunk %d leaves a code fence open: %q", i, s)
			}
		}
	}
	return parts
}

// fenceOpenAtEnd is an independent CommonMark-style fence tracker.
func fenceOpenAtEnd(s string) bool {
	var ch byte
	n := 0
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSuffix(line, "\r")
		trimmed := strings.TrimLeft(line, " ")
		if len(line)-len(trimmed) > 3 || trimmed == "" || (trimmed[0] != '`' && trimmed[0] != '~') {
			continue
		}
		c := trimmed[0]
		k := 0
		for k < len(trimmed) && trimmed[k] == c {
			k++
		}
		if k < 3 {
			continue
		}
		rest := trimmed[k:]
		if ch == 0 {
			if c == '`' && strings.Contains(rest, "`") {
				continue
			}
			ch, n = c, k
		} else if c == ch && k >= n && strings.TrimSpace(rest) == "" {
			ch = 0
		}
	}
	return ch != 0
}

var tagRe = regexp.MustCompile(`<(/?)([a-zA-Z][a-zA-Z0-9-]*)[^<>]*>`)

func tagsBalanced(s string) error {
	var stack []string
	for _, m := range tagRe.FindAllStringSubmatch(s, -1) {
		if m[1] == "" {
			stack = append(stack, m[2])
			continue
		}
		if len(stack) == 0 || stack[len(stack)-1] != m[2] {
			return fmt.Errorf("unbalanced </%s> with open %v", m[2], stack)
		}
		stack = stack[:len(stack)-1]
	}
	if len(stack) > 0 {
		return fmt.Errorf("left open %v", stack)
	}
	return nil
}

func drawOptions(t *rapid.T, syn Syntax) Options {
	return Options{
		Limit:   rapid.IntRange(MinLimit, 300).Draw(t, "limit"),
		Unit:    rapid.SampledFrom([]Unit{Bytes, UTF16, Runes}).Draw(t, "unit"),
		Markers: rapid.Bool().Draw(t, "markers"),
		Syntax:  syn,
	}
}

func TestPropertyMarkdown(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		syn := rapid.SampledFrom([]Syntax{Markdown, Mrkdwn}).Draw(t, "syntax")
		opt := drawOptions(t, syn)
		// fence reopening must leave room: keep limits above the longest fence overhead
		opt.Limit = max(opt.Limit, 40)
		checkSplit(t, genMarkdown(t), opt)
	})
}

func TestPropertyHTML(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		opt := drawOptions(t, HTML)
		// the deepest generated element stack reopens in ~150 bytes
		opt.Limit = max(opt.Limit, 260)
		checkSplit(t, genHTML(t, 0), opt)
	})
}

func TestPropertyArbitraryText(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		in := rapid.String().Draw(t, "in")
		opt := drawOptions(t, rapid.SampledFrom([]Syntax{Markdown, Mrkdwn, HTML}).Draw(t, "syntax"))
		parts := SplitChunks(in, opt)
		var b strings.Builder
		for i, p := range parts {
			b.WriteString(p.Body)
			if m := Measure(p.String(), opt.Unit); m > opt.Limit {
				t.Fatalf("chunk %d measures %d > %d", i, m, opt.Limit)
			}
			if !utf8.ValidString(p.String()) && utf8.ValidString(in) {
				t.Fatalf("chunk %d invalid UTF-8", i)
			}
		}
		if b.String() != in {
			t.Fatalf("bodies %q != input %q", b.String(), in)
		}
	})
}

func FuzzSplit(f *testing.F) {
	f.Add("hello world\n\n```go\ncode\n```\n", 16, 0, 0, true)
	f.Add("<b>x &amp; y</b><pre><code class=\"language-go\">a\nb\n</code></pre>", 40, 1, 2, false)
	f.Add("👨‍👩‍👧‍👦🇩🇪e\u0301 [link](https://x.y) `code`", 17, 2, 1, true)
	f.Fuzz(func(t *testing.T, in string, limit, unit, syn int, markers bool) {
		if !utf8.ValidString(in) {
			// the splitter keeps invalid bytes as they are; properties are about valid text
			return
		}
		opt := Options{Limit: MinLimit + abs(limit)%500, Unit: Unit(abs(unit) % 3), Syntax: Syntax(abs(syn) % 3), Markers: markers}
		parts := SplitChunks(in, opt)
		var b strings.Builder
		for i, p := range parts {
			b.WriteString(p.Body)
			if m := Measure(p.String(), opt.Unit); m > opt.Limit {
				t.Fatalf("chunk %d measures %d > %d: %q", i, m, opt.Limit, p.String())
			}
			if !utf8.ValidString(p.String()) {
				t.Fatalf("chunk %d invalid UTF-8: %q", i, p.String())
			}
			if p.Body == "" {
				t.Fatalf("chunk %d empty body", i)
			}
		}
		if b.String() != in {
			t.Fatalf("bodies do not reproduce input")
		}
	})
}

func abs(n int) int {
	if n < 0 {
		if n == -n {
			return 0
		}
		return -n
	}
	return n
}
