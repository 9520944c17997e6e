package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
)

// The admin subcommands: thin, scriptable wrappers over /api/v1. Lists print
// a table (short ids; -o wide adds columns and whole ids), show prints a
// readable summary; -o json (or --json) prints the API's answer unchanged
// for scripts, -o yaml the same as YAML. The groups live in approvals.go,
// runs.go, grants.go and audit.go.

// adminSub is one admin subcommand: its synopsis and description for
// --help, the flags it takes beyond the connection flags, and what it
// does. flags declares them on fs and returns the function to run.
type adminSub struct {
	name, args, summary, about string
	flags                      func(fs *flagSet) func(ctx context.Context, a *adminCall, pos []string) error
	// wide: the subcommand prints a list, which -o wide widens.
	wide bool
	// local, when set, runs the subcommand with its own flags instead of
	// the server's (audit verify reads the store).
	local func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// adminCall is what a running admin subcommand has: the connection flags,
// the output format, and where the answer goes.
type adminCall struct {
	client clientFlags
	out    *outputFlags
	stdout io.Writer
	stderr io.Writer
	c      *apiClient
}

// format is the output format the call asked for (-o, --json).
func (a *adminCall) format() string { return a.out.format() }

// api connects on first use.
func (a *adminCall) api() (*apiClient, error) {
	if a.c == nil {
		c, err := newClient(a.client)
		if err != nil {
			return nil, err
		}
		a.c = c
	}
	return a.c, nil
}

// call makes one API request and, with -o json or yaml, prints the answer
// as it came (done is then true); otherwise it decodes the answer into out
// for the caller to render. what prefixes errors. An error always comes
// with done.
func (a *adminCall) call(ctx context.Context, what, method, path string, q url.Values, body, out any) (done bool, err error) {
	c, err := a.api()
	if err != nil {
		return true, err
	}
	var raw json.RawMessage
	if err := c.do(ctx, method, path, q, body, &raw); err != nil {
		return true, fmt.Errorf("%s: %w", what, err)
	}
	switch a.format() {
	case outputJSON:
		return true, printJSON(a.stdout, raw)
	case outputYAML:
		return true, printYAML(a.stdout, raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return true, fmt.Errorf("%s: decode: %w", what, err)
	}
	return false, nil
}

// runAdmin dispatches `opsgate <group> <sub> …` over subs: the group's
// --help lists the subcommands, each subcommand's --help its own flags.
func runAdmin(ctx context.Context, group, about string, subs []adminSub, args []string, stdout, stderr io.Writer) error {
	groupHelp := func(w io.Writer) {
		fmt.Fprintf(w, "usage: opsgate %s <subcommand> [flags]\n\n%s\n\nsubcommands:\n", group, about)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, s := range subs {
			fmt.Fprintf(tw, "  %s\t%s\n", strings.TrimSpace(s.name+" "+s.args), s.summary)
		}
		_ = tw.Flush()
		fmt.Fprintf(w, "\nRun `opsgate %s <subcommand> --help` for its flags.\n", group)
	}
	if len(args) == 0 {
		var b strings.Builder
		groupHelp(&b)
		return usagef("%s needs a subcommand\n%s", group, strings.TrimRight(b.String(), "\n"))
	}
	if isHelp(args[0]) {
		groupHelp(stdout)
		return nil
	}
	var sub *adminSub
	var names []string
	for i := range subs {
		names = append(names, subs[i].name)
		if subs[i].name == args[0] {
			sub = &subs[i]
		}
	}
	if sub == nil {
		return usagef("unknown %s subcommand %q: want one of %s (see `opsgate %s --help`)", group, args[0], strings.Join(names, ", "), group)
	}
	if sub.local != nil {
		return sub.local(ctx, args[1:], stdout, stderr)
	}
	synopsis := strings.Join(strings.Fields(group+" "+sub.name+" "+sub.args+" [flags]"), " ")
	fs := newFlags(group+" "+sub.name, synopsis, sub.about, stdout, stderr)
	a := &adminCall{stdout: stdout, stderr: stderr}
	do := sub.flags(fs)
	a.out = addOutputFlags(fs, sub.wide)
	a.client = addClientFlags(fs)
	pos, err := fs.parse(args[1:])
	if err != nil {
		return err
	}
	if err := a.out.check(sub.wide); err != nil {
		return err
	}
	want := 0
	if sub.args != "" {
		want = len(strings.Fields(sub.args))
	}
	if len(pos) != want {
		if want == 0 {
			return usagef("%s %s takes no arguments; usage: opsgate %s", group, sub.name, synopsis)
		}
		return usagef("usage: opsgate %s", synopsis)
	}
	return do(ctx, a, pos)
}

const idNote = "\nID may be any unique prefix of the id, as with git (opsgate %s %s 0199c3a4)."
