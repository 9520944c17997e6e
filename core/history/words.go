// Package history puts what happened into words people read: one sentence
// per audit entry ("alice (slack) rejected deploy service=api version=1.2.3
// env=prod: not during the freeze") and a timeline of a run's events with
// the time between them and where the time went. The console, the CLI and
// the TUI render history through it, so the three say the same thing
// (docs/terminal.md, "History in words").
//
// Everything from outside (arguments, reasons, names) is made one line with
// core.OneLine and capped; the sentences are plain text, escaped by whoever
// shows them (html/template in the console).
package history

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/opsgate/opsgate/core"
)

// Call is what an approval asked to run: the tool and its arguments. A
// decision's audit entry names its approval but not the arguments, so the
// renderer looks them up in Calls.
type Call struct {
	Tool string
	Args map[string]any
}

// Calls are the calls of approvals by approval id, for the entries that
// name an approval without its arguments. Missing ones are rendered with
// the tool name alone.
type Calls map[string]Call

// maxValue caps one argument value, maxText a reason or message, in a
// sentence.
const (
	maxValue = 40
	maxText  = 200
)

// clip makes outside text one line of at most n runes.
func clip(s string, n int) string {
	s = strings.ReplaceAll(core.OneLine(strings.TrimSpace(s)), "\t", " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// callText is "deploy env=prod service=api version=1.2.3": the tool, then
// the arguments sorted by name.
func callText(tool string, args map[string]any) string {
	var b strings.Builder
	b.WriteString(clip(tool, maxValue))
	for _, a := range core.ArgsFromMap(args) {
		fmt.Fprintf(&b, " %s=%s", clip(a.Name, maxValue), clip(a.Value, maxValue))
	}
	if b.Len() == 0 {
		return "a call"
	}
	return b.String()
}

// detail is an entry's or event's JSON detail, decoded; nil when absent or
// not an object.
type detail map[string]any

func decode(raw json.RawMessage) detail {
	var d detail
	if len(raw) == 0 || json.Unmarshal(raw, &d) != nil {
		return nil
	}
	return d
}

// str is a detail value as text: strings as they are, the rest as JSON.
func (d detail) str(k string) string {
	v, ok := d[k]
	if !ok || v == nil {
		return ""
	}
	if s, ok := v.(string); ok {
		return s
	}
	return core.ArgString(v)
}

// num is a numeric detail value (JSON numbers decode as float64).
func (d detail) num(k string) (int, bool) {
	f, ok := d[k].(float64)
	return int(f), ok
}

// args is a detail value that is an object of arguments.
func (d detail) args(k string) map[string]any {
	m, _ := d[k].(map[string]any)
	return m
}

// list is a detail value that is a list of strings, joined.
func (d detail) list(k string) string {
	vs, _ := d[k].([]any)
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		out = append(out, clip(core.ArgString(v), maxValue))
	}
	return strings.Join(out, ", ")
}

// rest renders the detail as "k=v" pairs sorted by key: the fallback for
// kinds and events this package does not know.
func (d detail) rest() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(d)) {
		parts = append(parts, clip(k, maxValue)+"="+clip(d.str(k), maxValue))
	}
	return strings.Join(parts, " ")
}

// Duration says how long d was for people: "850ms", "12s", "3m05s",
// "2h04m", "3d02h".
func Duration(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%dms", max(d, 0).Milliseconds())
	}
	switch d = d.Round(time.Second); {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}
