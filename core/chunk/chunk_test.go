package chunk

import (
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		opt  Options
		want []string
	}{
		{
			name: "FitsWhole",
			in:   "short message",
			opt:  Options{Limit: 100, Markers: true},
			want: []string{"short message"},
		},
		{
			name: "PrefersParagraphBreak",
			in:   "first paragraph here.\n\nsecond one is here and long",
			opt:  Options{Limit: 40},
			want: []string{"first paragraph here.\n\n", "second one is here and long"},
		},
		{
			name: "PrefersLineOverWord",
			in:   "line one is here\nline two is also here ok",
			opt:  Options{Limit: 30},
			want: []string{"line one is here\n", "line two is also here ok"},
		},
		{
			name: "WordBreak",
			in:   "aaaa bbbb cccc dddd eeee ffff",
			opt:  Options{Limit: 16},
			want: []string{"aaaa bbbb cccc ", "dddd eeee ffff"},
		},
		{
			name: "HardCutOnlyForLongToken",
			in:   "ab " + strings.Repeat("x", 40),
			opt:  Options{Limit: 16},
			want: []string{"ab ", strings.Repeat("x", 16), strings.Repeat("x", 16), strings.Repeat("x", 8)},
		},
		{
			name: "FenceClosedAndReopenedWithLanguage",
			in:   "```go\nline1\nline2\nline3\n```",
			opt:  Options{Limit: 24},
			want: []string{"```go\nline1\nline2\n```", "```go\nline3\n```"},
		},
		{
			name: "LinkKeptWholeWhereItFits",
			in:   "see the docs at [the manual](https://ex.com/m) now",
			opt:  Options{Limit: 40},
			want: []string{"see the docs at ", "[the manual](https://ex.com/m) now"},
		},
		{
			name: "InlineCodeKeptWhole",
			in:   "run the command `make all test` please",
			opt:  Options{Limit: 24},
			want: []string{"run the command ", "`make all test` please"},
		},
		{
			name: "MarkersFitInsideLimit",
			in:   "aaaa bbbb cccc dddd eeee ffff gggg",
			opt:  Options{Limit: 24, Markers: true},
			want: []string{"aaaa bbbb cccc \n(1/3)", "dddd eeee ffff \n(2/3)", "gggg\n(3/3)"},
		},
		{
			name: "UTF16CountsAstralAsTwo",
			in:   "😀😀😀😀😀😀😀😀😀😀",
			opt:  Options{Limit: 16, Unit: UTF16},
			want: []string{"😀😀😀😀😀😀😀😀", "😀😀"},
		},
		{
			name: "RunesCountCodePoints",
			in:   "日本語 日本語 日本語 日本語 日本語 日本語",
			opt:  Options{Limit: 16, Unit: Runes},
			want: []string{"日本語 日本語 日本語 日本語 ", "日本語 日本語"},
		},
		{
			name: "ZWJSequenceNotSplit",
			in:   strings.Repeat("👨‍👩‍👧‍👦", 3),
			opt:  Options{Limit: 50},
			want: []string{strings.Repeat("👨‍👩‍👧‍👦", 2), "👨‍👩‍👧‍👦"},
		},
		{
			name: "FlagsNotSplit",
			in:   "🇩🇪🇫🇷🇮🇹🇪🇸🇬🇧",
			opt:  Options{Limit: 18},
			want: []string{"🇩🇪🇫🇷", "🇮🇹🇪🇸", "🇬🇧"},
		},
		{
			name: "CombiningMarksStay",
			in:   strings.Repeat("e\u0301", 10),
			opt:  Options{Limit: 16},
			want: []string{strings.Repeat("e\u0301", 5), strings.Repeat("e\u0301", 5)},
		},
		{
			name: "HTMLEntityNotCut",
			in:   "aaaaaaaaaaaaaa&amp;bbbb",
			opt:  Options{Limit: 16, Syntax: HTML},
			want: []string{"aaaaaaaaaaaaaa", "&amp;bbbb"},
		},
		{
			name: "HTMLBoldKeptWhole",
			in:   "plain words then <b>bold words</b> end",
			opt:  Options{Limit: 32, Syntax: HTML},
			want: []string{"plain words then ", "<b>bold words</b> end"},
		},
		{
			name: "HTMLPreClosedAndReopened",
			in:   "<pre><code class=\"language-sh\">echo 1\necho 2\necho 3\n</code></pre>",
			opt:  Options{Limit: 60, Syntax: HTML},
			want: []string{
				"<pre><code class=\"language-sh\">echo 1\necho 2\n</code></pre>",
				"<pre><code class=\"language-sh\">echo 3\n</code></pre>",
			},
		},
		{
			name: "HTMLLongBoldSplitInsideAndReopened",
			in:   "<b>one two three four five six</b>",
			opt:  Options{Limit: 24, Syntax: HTML},
			want: []string{"<b>one two three </b>", "<b>four five six</b>"},
		},
		{
			name: "SlackReferenceNotCut",
			in:   "ping the team <!subteam^S123|@sre> now",
			opt:  Options{Limit: 24, Syntax: Mrkdwn},
			want: []string{"ping the team ", "<!subteam^S123|@sre> now"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Split(tt.in, tt.opt)
			if strings.Join(got, "\x00") != strings.Join(tt.want, "\x00") {
				t.Fatalf("Split(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
			checkSplit(t, tt.in, tt.opt)
		})
	}
}

func TestSplitEmpty(t *testing.T) {
	t.Parallel()
	if got := Split("", Options{Limit: 100}); len(got) != 0 {
		t.Fatalf("Split(\"\") = %q, want none", got)
	}
}

func TestSplitRaisesTinyLimit(t *testing.T) {
	t.Parallel()
	for _, c := range Split(strings.Repeat("ab ", 50), Options{Limit: 1}) {
		if len(c) > MinLimit {
			t.Fatalf("chunk %q exceeds MinLimit", c)
		}
	}
}

func TestMeasure(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s                   string
		bytes, utf16, runes int
	}{
		{"", 0, 0, 0},
		{"abc", 3, 3, 3},
		{"é", 2, 1, 1},
		{"日本", 6, 2, 2},
		{"😀", 4, 2, 1},
		{"👨‍👩‍👧‍👦", 25, 11, 7},
		{"🇩🇪", 8, 4, 2},
	}
	for _, tt := range tests {
		if got := Measure(tt.s, Bytes); got != tt.bytes {
			t.Errorf("Measure(%q, Bytes) = %d, want %d", tt.s, got, tt.bytes)
		}
		if got := Measure(tt.s, UTF16); got != tt.utf16 {
			t.Errorf("Measure(%q, UTF16) = %d, want %d", tt.s, got, tt.utf16)
		}
		if got := Measure(tt.s, Runes); got != tt.runes {
			t.Errorf("Measure(%q, Runes) = %d, want %d", tt.s, got, tt.runes)
		}
	}
}

func benchText() string {
	para := "The deploy of **api** version 1.2.3 to `prod` finished; see [the log](https://ci.example.com/run/123) for details. " +
		"Latency is nominal — 日本語 ok 👍🏽.\n"
	var b strings.Builder
	for b.Len() < 1<<20 {
		b.WriteString(para)
		b.WriteString(para)
		b.WriteString("\n```go\nfunc main() {\n\tfmt.Println(\"hello\")\n}\n```\n\n")
	}
	return b.String()[:1<<20]
}

func BenchmarkSplit1MiB(b *testing.B) {
	text := benchText()
	for _, opt := range []struct {
		name string
		opt  Options
	}{
		{"Discord2000Runes", Options{Limit: 2000, Unit: Runes, Markers: true}},
		{"Telegram4096UTF16HTML", Options{Limit: 4096, Unit: UTF16, Syntax: HTML}},
		{"Slack3000Bytes", Options{Limit: 3000, Unit: Bytes, Syntax: Mrkdwn}},
	} {
		b.Run(opt.name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				SplitChunks(text, opt.opt)
			}
		})
	}
}
