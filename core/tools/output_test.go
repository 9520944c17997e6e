package tools

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCappedBuffer(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		max     int64
		writes  []string
		want    string
		trimmed bool
	}{
		{"UnderCap", 10, []string{"abc", "def"}, "abcdef", false},
		{"ExactlyCap", 6, []string{"abc", "def"}, "abcdef", false},
		{"SplitAcrossWrites", 4, []string{"abc", "def"}, "abcd\n[… truncated 2 bytes]", true},
		// "é" is two bytes; a cut after its first byte moves back before it.
		{"CutInsideRune", 4, []string{"abcé!"}, "abc\n[… truncated 3 bytes]", true},
		{"CutAfterRune", 5, []string{"abcé!"}, "abcé\n[… truncated 1 bytes]", true},
		{"CutInsideFourByteRune", 5, []string{"ab😀cd"}, "ab\n[… truncated 6 bytes]", true},
		{"BinaryKeptAsIs", 2, []string{"\xff\xfe\xfd"}, "\xff\xfe\n[… truncated 1 bytes]", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newCappedBuffer(tc.max)
			for _, w := range tc.writes {
				if n, err := b.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			got, trimmed := b.result()
			if got != tc.want || trimmed != tc.trimmed {
				t.Fatalf("got %q (%v), want %q (%v)", got, trimmed, tc.want, tc.trimmed)
			}
		})
	}
}

func TestCappedBufferKeepsValidUTF8(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("añ😀b", 50)
	for max := int64(1); max < int64(len(text)); max++ {
		b := newCappedBuffer(max)
		_, _ = b.Write([]byte(text))
		got, _ := b.result()
		if !utf8.ValidString(got) {
			t.Fatalf("max %d: invalid UTF-8 %q", max, got)
		}
	}
}

func BenchmarkRenderArgv(b *testing.B) {
	ts, err := compileAll("command", []string{"./deploy.sh", "--dry-run", "{{.service}}", "{{.version}}", "{{.env}}"})
	if err != nil {
		b.Fatal(err)
	}
	args := map[string]any{"service": "api", "version": "1.2.3", "env": "staging"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := renderArgv(ts, args); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHTTPBuild(b *testing.B) {
	h := &HTTP{Method: "POST", URL: "https://status.internal/api/{{.service}}?env={{.env}}", Headers: map[string]string{"Authorization": "Bearer x"}, Body: `{"v": {{json .version}}}`}
	t, err := h.templates()
	if err != nil {
		b.Fatal(err)
	}
	c := call(map[string]any{"service": "api", "version": "1.2.3", "env": "staging"})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := t.build(c); err != nil {
			b.Fatal(err)
		}
	}
}

func TestCapOutputMatchesTheCappedBuffer(t *testing.T) {
	for _, tc := range []struct {
		in  string
		max int64
	}{{"short", 10}, {"exactly10!", 10}, {"0123456789abc", 10}, {"ééééé", 5}, {"日本語テキスト", 7}} {
		b := newCappedBuffer(tc.max)
		_, _ = b.Write([]byte(tc.in))
		want, wantCut := b.result()
		got, cut := CapOutput(tc.in, tc.max)
		if got != want || cut != wantCut {
			t.Errorf("CapOutput(%q, %d) = %q %v, want %q %v", tc.in, tc.max, got, cut, want, wantCut)
		}
	}
}
