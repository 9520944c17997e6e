package engine

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/opsgate/opsgate/core"
)

// fold fences tool output for a reply and cuts it past foldChars, pointing
// to the full output in the console: chat threads stay readable and the
// chunker never has to split a wall of log lines.
func (x *execution) fold(out string) string {
	out = strings.TrimRight(out, "\n")
	if utf8.RuneCountInString(out) <= foldChars {
		return fence(out)
	}
	cut := core.Clip(out, foldChars)
	more := utf8.RuneCountInString(out) - utf8.RuneCountInString(cut)
	link := "opsgate runs show " + x.run.ID
	if u := x.e.opts.PublicURL; u != "" {
		link = strings.TrimRight(u, "/") + "/runs/" + x.run.ID
	}
	return fmt.Sprintf("%s\n… %d more characters folded; full output: %s", fence(cut), more, link)
}

// fence wraps s in a code fence longer than any backtick run inside it, so
// tool output can never close the block early.
func fence(s string) string {
	longest, cur := 0, 0
	for _, r := range s {
		if r == '`' {
			cur++
			longest = max(longest, cur)
		} else {
			cur = 0
		}
	}
	f := strings.Repeat("`", max(3, longest+1))
	return f + "\n" + s + "\n" + f
}

// joinOr joins names for a sentence, or returns fallback when there are none.
func joinOr(names []string, fallback string) string {
	if len(names) == 0 {
		return fallback
	}
	return strings.Join(names, ", ")
}
