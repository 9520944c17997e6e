package chunk

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCut(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		n    int
		u    Unit
		want string
	}{
		{"hello", 5, Bytes, "hello"},
		{"hello world", 6, Runes, "hello…"},
		{"hello world", 6, UTF16, "hello…"},
		{"hello world", 6, Bytes, "hel…"}, // the ellipsis is 3 bytes
		{"😀😀😀", 3, UTF16, "😀…"},           // a surrogate pair counts 2
		{"😀😀😀", 2, Runes, "😀…"},
		{"ééé", 4, Bytes, "…"},
		{"abc", 0, Runes, ""},
		{"abc", 1, Runes, "…"},
	} {
		got := Cut(c.in, c.n, c.u)
		if got != c.want {
			t.Errorf("Cut(%q, %d, %v) = %q, want %q", c.in, c.n, c.u, got, c.want)
		}
		if Measure(got, c.u) > c.n || !utf8.ValidString(got) {
			t.Errorf("Cut(%q, %d, %v) = %q measures %d or is not valid UTF-8", c.in, c.n, c.u, got, Measure(got, c.u))
		}
	}
}

func FuzzCut(f *testing.F) {
	f.Add("hello world", 5)
	f.Add(strings.Repeat("😀é", 40), 17)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 1<<16 || !utf8.ValidString(s) {
			return
		}
		for _, u := range []Unit{Bytes, UTF16, Runes} {
			got := Cut(s, n, u)
			if Measure(got, u) > n {
				t.Fatalf("Cut(%q, %d, %v) = %q measures %d", s, n, u, got, Measure(got, u))
			}
			if !strings.HasPrefix(s, strings.TrimSuffix(got, Ellipsis)) {
				t.Fatalf("Cut(%q, %d, %v) = %q is not a prefix", s, n, u, got)
			}
		}
	})
}
