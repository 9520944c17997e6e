package tools

import (
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"text/template"
	"text/template/parse"
)

// ErrArgRefused is wrapped by every *ArgError: an argument value that the
// tool refuses whatever its schema says, because it would change what the
// call means (an exec option, a URL path walk).
var ErrArgRefused = errors.New("argument refused")

// ArgError names the argument a tool refused and why. The engine reports
// it as invalid arguments (422 for an edit) before anyone is asked to
// approve the call, and Run and Preview refuse the same values again.
type ArgError struct {
	// Arg is the argument's name when one could be named, else "".
	Arg     string
	Message string
}

func (e *ArgError) Error() string {
	if e.Arg == "" {
		return e.Message
	}
	return fmt.Sprintf("argument %q: %s", e.Arg, e.Message)
}

// Unwrap makes errors.Is(err, ErrArgRefused) hold.
func (e *ArgError) Unwrap() error { return ErrArgRefused }

// literalDash reports whether a compiled argv element starts with a "-"
// written in the config itself ("--env={{.env}}", "--dry-run"), as opposed
// to one that starts with a template action, whose leading dash can only
// come from an argument value.
func literalDash(t *template.Template) bool {
	if t.Tree == nil || t.Tree.Root == nil || len(t.Tree.Root.Nodes) == 0 {
		return false
	}
	n, ok := t.Tree.Root.Nodes[0].(*parse.TextNode)
	return ok && len(n.Text) > 0 && n.Text[0] == '-'
}

// checkDash refuses an argv element (after the program) that starts with
// "-" when the dash is not the config's own: "{{.version}}" given
// "--upload-pack=evil" would reach the program as an option, however the
// schema spelled the value.
func checkDash(ts []*template.Template, argv []string, args map[string]any) error {
	for i := 1; i < len(argv) && i < len(ts); i++ {
		if !strings.HasPrefix(argv[i], "-") || literalDash(ts[i]) {
			continue
		}
		return &ArgError{Arg: dashArg(argv[i], args),
			Message: fmt.Sprintf("value %q would reach the program as an option (argv[%d] starts with \"-\"); this tool takes no argument starting with a dash unless it sets exec.allow_dash_args", clipValue(argv[i]), i)}
	}
	return nil
}

// dashArg names the argument whose value starts the element, when one does.
func dashArg(elem string, args map[string]any) string {
	names := make([]string, 0, len(args))
	for k := range args {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		s := fmt.Sprint(normalizeValue(args[k], nil))
		if strings.HasPrefix(s, "-") && strings.HasPrefix(elem, s) {
			return k
		}
	}
	return ""
}

// CheckArgs refuses argument values that would change what the call means
// whatever the schema allowed: an argv element that starts with "-" from a
// value (unless AllowDashArgs), in the command or the dry run. A template
// that does not render is left for Run to report.
func (e *Exec) CheckArgs(args map[string]any) error {
	if e.AllowDashArgs {
		return nil
	}
	ts, err := e.templates()
	if err != nil {
		return nil
	}
	for _, list := range [][]*template.Template{ts.command, ts.dryRun} {
		if len(list) == 0 {
			continue
		}
		argv, err := renderArgv(list, args)
		if err != nil {
			continue
		}
		if err := checkDash(list, argv, args); err != nil {
			return err
		}
	}
	return nil
}

// CheckArgs refuses argument values that would walk the request's URL path:
// a path segment that is "." or ".." once percent-decoded (escaping alone
// does not stop it: servers and proxies decode "%2E%2E" and resolve it). A
// URL that does not render is left for Run to report.
func (h *HTTP) CheckArgs(args map[string]any) error {
	t, err := h.templates()
	if err != nil {
		return nil
	}
	rawURL, err := render(t.url, escapeArgs(args))
	if err != nil {
		return nil
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil
	}
	return checkDotSegments(u, args)
}

// checkDotSegments refuses a URL with a "." or ".." path segment.
func checkDotSegments(u *url.URL, args map[string]any) error {
	for _, seg := range strings.Split(u.EscapedPath(), "/") {
		if d := decodeFully(seg); d == "." || d == ".." {
			return &ArgError{Arg: dotArg(args),
				Message: fmt.Sprintf("the URL path would contain the segment %q, which walks the path; a value may not be \".\" or \"..\"", seg)}
		}
	}
	return nil
}

// decodeFully percent-decodes s until it stops changing (at most a few
// rounds), so "%252E%252E" is seen as ".." by a server that decodes twice.
func decodeFully(s string) string {
	for range 4 {
		d, err := url.PathUnescape(s)
		if err != nil || d == s {
			return s
		}
		s = d
	}
	return s
}

// dotArg names the first argument (by name) whose value is a dot segment.
func dotArg(args map[string]any) string {
	names := make([]string, 0, len(args))
	for k := range args {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if s, ok := args[k].(string); ok {
			for _, seg := range strings.Split(s, "/") {
				if d := decodeFully(seg); d == "." || d == ".." {
					return k
				}
			}
		}
	}
	return ""
}

// clipValue shortens a value for an error message.
func clipValue(s string) string {
	if r := []rune(s); len(r) > 40 {
		return string(r[:37]) + "..."
	}
	return s
}
