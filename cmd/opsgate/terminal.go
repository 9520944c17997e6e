package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/internal/chat"
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

func cmdChat(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("chat", "chat [--thread T] [--server URL] [--token T]", `
A conversation with opsgate from the terminal, in a thread of the local
channel: what you type is sent as your token's actor (deploy api 1.2.3,
help); replies, approval cards and their outcomes appear inline. Decide the
thread's card in place with /approve, /reject <reason> or /edit key=value
(the same checks as any decision: who may decide, quorum, expiry, the
tool's schema). /help lists the commands.

On a terminal it is an inline prompt; otherwise it reads lines from stdin
and, at their end, waits for the runs it started to finish or to wait for
a human. The server needs channels.local.enabled: true. See docs/terminal.md.`, stdout, stderr)
	thread := fs.String("thread", "", "the thread to talk in, local:<key> or <key> (default: your user name)")
	cf := addClientFlags(fs)
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("chat takes no arguments (use --thread)")
	}
	th := *thread
	if th == "" {
		th = defaultThread()
	}
	if k := strings.TrimPrefix(th, core.LocalChannel+":"); k == "" || len(k) > 256 || strings.ContainsAny(k, "\r\n") {
		return usagef("--thread %q: want local:<key> or <key>, one line of at most 256 bytes", th)
	}
	c, err := terminalClient(cf)
	if err != nil {
		return err
	}
	me, err := c.Me(ctx)
	if err != nil {
		return fmt.Errorf("who is this token: %w", err)
	}
	s := chat.NewSession(c, me, th, time.Now)
	out, isFile := stdout.(*os.File)
	if isFile && tui.IsTerminal(out) && tui.IsTerminal(os.Stdin) {
		return s.Terminal(ctx, os.Stdin, out)
	}
	return s.Lines(ctx, os.Stdin, stdout)
}

// defaultThread is a thread of one's own: the login name.
func defaultThread() string {
	for _, v := range []string{"USER", "LOGNAME"} {
		if u := os.Getenv(v); u != "" {
			return u
		}
	}
	return "terminal"
}
