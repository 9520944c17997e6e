package engine

import (
	"strings"
	"testing"

	"github.com/opsgate/opsgate/core"
)

func TestFoldLongOutputLinksToConsole(t *testing.T) {
	t.Parallel()
	x := &execution{e: &Engine{opts: Options{PublicURL: "https://ops.example.com/"}}, run: &core.Run{ID: "r1"}}
	short := x.fold("hello\n")
	if short != "```\nhello\n```" {
		t.Fatalf("short output: %q", short)
	}
	long := strings.Repeat("é", foldChars+500)
	got := x.fold(long)
	if !strings.Contains(got, "500 more characters folded; full output: https://ops.example.com/runs/r1") {
		t.Fatalf("folded output tail: %q", got[len(got)-120:])
	}
	if strings.Count(got, "é") != foldChars {
		t.Fatalf("kept %d characters, want %d", strings.Count(got, "é"), foldChars)
	}
	x.e.opts.PublicURL = ""
	if got := x.fold(long); !strings.Contains(got, "opsgate runs show r1") {
		t.Fatalf("no console: %q", got[len(got)-80:])
	}
}

// FuzzFence checks that tool output, which is outside input, can never
// close its code fence early and spill into the reply as markup.
func FuzzFence(f *testing.F) {
	for _, s := range []string{"", "plain", "```", "a```b", "````\n```", "`", "\n```\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := fence(s)
		first, _, _ := strings.Cut(out, "\n")
		if len(first) < 3 || strings.Trim(first, "`") != "" {
			t.Fatalf("opening fence %q", first)
		}
		if !strings.HasSuffix(out, "\n"+first) {
			t.Fatalf("closing fence missing: %q", out)
		}
		inner := out[len(first)+1 : len(out)-len(first)-1]
		if inner != s || strings.Contains(inner, first) {
			t.Fatalf("content %q can close fence %q", inner, first)
		}
	})
}
