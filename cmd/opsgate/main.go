// Command opsgate is the chat-ops bot server and its admin command line.
//
// One binary does everything so an operator has one thing to deploy and one
// thing to run at 3 a.m.: `opsgate serve` runs the server, `opsgate migrate`
// prepares the store, `opsgate config check` validates a configuration, and
// the admin subcommands (approvals, runs) talk to a running server over its
// HTTP API, the same API scripts use. `opsgate audit verify` opens the store
// directly, because it must work even when the server is down.
//
// Exit codes: 0 success, 1 failure (the message says what and where),
// 2 bad usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3";
// "dev" marks a build from a working tree.
var version = "dev"

// Exit codes, kept few and stable so scripts can branch on them.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// errUsage marks an error caused by how the command was called; it maps to
// exit code 2 and is followed by the subcommand's usage.
var errUsage = errors.New("usage")

// usageError is a bad invocation with a message for the operator.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func (e *usageError) Unwrap() error { return errUsage }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

const usageText = `opsgate: a chat-ops bot that asks a human before every risky tool call.

Usage:
  opsgate serve   [--config FILE] [--log-format text|json] [--log-level LEVEL]
                  [--debug-listen 127.0.0.1:PORT]   (Go profiler, loopback only)
  opsgate migrate [--config FILE]
  opsgate config check [--config FILE]
  opsgate approvals list [--status S] [--limit N] [--json]
  opsgate approvals show ID [--json]
  opsgate approvals approve ID [--reason R] [--scope call|session]
  opsgate approvals reject ID [--reason R]
  opsgate approvals edit ID --args JSON [--reason R]
  opsgate runs list [--status S] [--limit N] [--json]
  opsgate runs show ID [--json]
  opsgate runs cancel ID
  opsgate audit verify [--config FILE]
  opsgate mcp tools [--config FILE] [--json]   (what each upstream MCP server offers)
  opsgate version

--config defaults to $OPSGATE_CONFIG, then ./opsgate.yaml, then the built-in
quickstart (SQLite under ./data, the console channel, 127.0.0.1:8080).

The approvals and runs subcommands call a running server's HTTP API:
  --server URL   default $OPSGATE_SERVER, else http://<server.listen> of the config
  --token T      default $OPSGATE_TOKEN, else <server.data_dir>/admin.token
                 (written by serve when no api token is configured)

Exit status: 0 success, 1 failure, 2 bad usage.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal starts a graceful shutdown, restore the
		// default handling: a second Ctrl-C ends a drain that takes too long.
		<-ctx.Done()
		stop()
	}()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches one command line and returns the process exit code. It never
// calls os.Exit itself, so tests and deferred cleanups behave.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usageText)
		return exitUsage
	}
	cmd, rest := args[0], args[1:]
	var err error
	switch cmd {
	case "serve":
		err = cmdServe(ctx, rest, stderr)
	case "migrate":
		err = cmdMigrate(ctx, rest, stdout, stderr)
	case "config":
		err = cmdConfig(rest, stdout, stderr)
	case "approvals":
		err = cmdApprovals(ctx, rest, stdout, stderr)
	case "runs":
		err = cmdRuns(ctx, rest, stdout, stderr)
	case "audit":
		err = cmdAudit(ctx, rest, stdout, stderr)
	case "mcp":
		err = cmdMCP(ctx, rest, stdout, stderr)
	case "version", "--version", "-version":
		printVersion(stdout)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usageText)
	default:
		err = usagef("unknown command %q (see `opsgate help`)", cmd)
	}
	return report(err, stderr)
}

// report prints err for a human and maps it to an exit code.
func report(err error, stderr io.Writer) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "opsgate: %v\n", err)
		return exitUsage
	case errors.Is(err, errSilent):
		// The command already printed what went wrong.
		return exitFail
	default:
		fmt.Fprintf(stderr, "opsgate: %v\n", err)
		return exitFail
	}
}

// errSilent is a failure whose details were already printed (config check,
// audit verify); report only sets the exit code.
var errSilent = errors.New("failed (details above)")

// newFlags makes a FlagSet that reports errors instead of exiting, with the
// usage line of the subcommand.
func newFlags(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: opsgate %s\n", usage)
		fs.PrintDefaults()
	}
	return fs
}

// parseInterleaved parses flags that may come before, between or after
// positional arguments (`approvals reject ID --reason R`), which the flag
// package alone stops at. It returns the positional arguments.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &usageError{msg: err.Error()}
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// printVersion prints the release version and what the Go toolchain recorded
// about the build, so a bug report names the exact binary.
func printVersion(w io.Writer) {
	fmt.Fprintf(w, "opsgate %s\n", version)
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return
	}
	fmt.Fprintf(w, "go: %s\n", bi.GoVersion)
	if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		fmt.Fprintf(w, "module: %s %s\n", bi.Main.Path, bi.Main.Version)
	}
	var vcs []string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision", "vcs.time", "vcs.modified":
			vcs = append(vcs, strings.TrimPrefix(s.Key, "vcs.")+"="+s.Value)
		}
	}
	if len(vcs) > 0 {
		fmt.Fprintf(w, "vcs: %s\n", strings.Join(vcs, " "))
	}
}
