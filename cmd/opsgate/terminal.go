package main

import (
	"context"
	"io"
	"os"
	"time"

	"github.com/opsgate/opsgate/internal/client"
	"github.com/opsgate/opsgate/internal/tui"
)

// The terminal surfaces (docs/terminal.md): `opsgate tui`, the approvals
// queue on a terminal, and `opsgate chat`, a local channel thread.

// terminalClient resolves --server and --token like the admin
// subcommands and returns the terminal surfaces' client.
func terminalClient(f clientFlags) (*client.Client, error) {
	c, err := newClient(f)
	if err != nil {
		return nil, err
	}
	return client.New(c.base.String(), c.token)
}

func cmdTUI(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("tui", "tui [--server URL] [--token T] [--plain]", `
The approvals queue in the terminal: pending approvals and questions with
countdowns, each one's details (tool, arguments, reason, risk, dry run, who
asked, who may decide, expiry); approve, reject with a reason, edit the
arguments in a form checked against the tool's schema, answer questions;
the runs and each run's timeline. Live over the server's change feed.
Decisions are made with the token, judged and audited by the server.

When stdout is not a terminal (or with --plain) it prints the queue and
the newest runs as plain text once and exits. See docs/terminal.md.`, stdout, stderr)
	plain := fs.Bool("plain", false, "print the queue as plain text and exit, even on a terminal")
	cf := addClientFlags(fs)
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("tui takes no arguments")
	}
	c, err := terminalClient(cf)
	if err != nil {
		return err
	}
	out, isFile := stdout.(*os.File)
	if *plain || !isFile || !tui.IsTerminal(out) || !tui.IsTerminal(os.Stdin) {
		return tui.Plain(ctx, c, stdout, time.Now())
	}
	return tui.Run(ctx, c, os.Stdin, out)
}
