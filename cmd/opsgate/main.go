// Command opsgate is the chat-ops bot server and its admin command line.
//
// One binary does everything so an operator has one thing to deploy and one
// thing to run at 3 a.m.: `opsgate serve` runs the server, `opsgate migrate`
// prepares the store, `opsgate config check` validates a configuration, and
// the admin subcommands (approvals, runs, grants) talk to a running server over its
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
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
)

// version, commit and date are set at build time (the release config and
// deploy/Dockerfile pass -ldflags "-X main.version=v1.2.3 -X main.commit=…
// -X main.date=…"). A binary built without them (`go install …@v1.2.3`,
// `go build`) falls back to what the Go toolchain recorded: the module
// version and the VCS revision and time; see buildVersion.
var (
	version = "dev"
	commit  = ""
	date    = ""
)

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
  opsgate approvals list [--status S] [--limit N] [-o table|wide|json|yaml]
  opsgate approvals show ID [--json]
  opsgate approvals approve ID [--reason R] [--scope call|task|session|forever] [--for 2h] [--pattern JSON]
  opsgate approvals reject ID [--reason R]
  opsgate approvals edit ID --args JSON [--reason R]
  opsgate approvals delegate ID --to person:NAME|group:NAME [--reason R]
  opsgate approvals receipt ID                           (the signed receipt of a decided approval)
  opsgate approvals watch [--new] [--count N] [--json]   (one line per new approval)
  opsgate approvals wait ID [--timeout D] [--json]        (exit 0 approved, 1 rejected, 3 expired, 4 cancelled)
  opsgate runs list [--status S] [--limit N] [-o table|wide|json|yaml]
  opsgate runs show ID [--json]
  opsgate runs cancel ID
  opsgate schedules list [--json]
  opsgate schedules run|pause|resume NAME     (scope admin; audited)
  opsgate grants list [--all] [-o table|wide|json|yaml]
  opsgate grants revoke ID
  opsgate audit list [--limit N] [--actor A] [--tool T] [--run ID] [--kind K]   (newest first, in words)
  opsgate audit export [--format csv|jsonl] [--after SEQ] [filters]
  opsgate policy show                         (the policy in force, rule by rule)
  opsgate receipt verify [--key FILE|--server URL] [--args JSON] RECEIPT|-
  opsgate audit verify [--config FILE] [--expect SEQ:HASH]   (reads the store itself)
  opsgate tui [--plain]                       (the approvals queue in the terminal)
  opsgate chat [--thread T]                   (a local channel thread: ask and decide in place)
  opsgate healthcheck [--server URL] [--config FILE]
  opsgate mcp tools [--config FILE] [--json]   (what each upstream MCP server offers)
  opsgate completion bash|zsh|fish            (shell completion; see docs/terminal.md)
  opsgate version

Every command takes --help, e.g. opsgate approvals --help, opsgate runs list --help.

--config defaults to $OPSGATE_CONFIG, then ./opsgate.yaml, then the built-in
quickstart (SQLite under ./data, the console channel, 127.0.0.1:8080).

The approvals, runs, schedules, grants, audit list|export, policy, receipt (without --key), tui and chat
subcommands call a running server's HTTP API:
  --server URL   default $OPSGATE_SERVER, else http://<server.listen> of the config
  --token T      default $OPSGATE_TOKEN, else <server.data_dir>/admin.token
                 (written by serve when no api token is configured)
They read only server.listen and server.data_dir of the config. --config, --server,
--token, -o/--output and --json may also come before the command
(opsgate --server URL approvals list). Lists print short ids; any command takes one, or a
prefix of the whole id, or the whole id: opsgate approvals show 3f9a2c1. -o wide shows
whole ids and more columns, -o json or yaml the API's answer.

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
	args, err := hoistGlobals(args)
	if err != nil {
		return report(err, stderr)
	}
	cmd, rest := args[0], args[1:]
	if cmd == "help" && len(rest) > 0 {
		// `opsgate help approvals list` is `opsgate approvals list --help`.
		cmd, rest = rest[0], append(rest[1:], "--help")
	}
	switch cmd {
	case "serve":
		err = cmdServe(ctx, rest, stdout, stderr)
	case "migrate":
		err = cmdMigrate(ctx, rest, stdout, stderr)
	case "config":
		err = cmdConfig(rest, stdout, stderr)
	case "approvals":
		err = cmdApprovals(ctx, rest, stdout, stderr)
	case "runs":
		err = cmdRuns(ctx, rest, stdout, stderr)
	case "schedules":
		err = cmdSchedules(ctx, rest, stdout, stderr)
	case "grants":
		err = cmdGrants(ctx, rest, stdout, stderr)
	case "receipt":
		err = cmdReceipt(ctx, rest, stdout, stderr)
	case "policy":
		err = cmdPolicy(ctx, rest, stdout, stderr)
	case "audit":
		err = cmdAudit(ctx, rest, stdout, stderr)
	case "healthcheck":
		err = cmdHealthcheck(ctx, rest, stdout, stderr)
	case "mcp":
		err = cmdMCP(ctx, rest, stdout, stderr)
	case "tui":
		err = cmdTUI(ctx, rest, stdout, stderr)
	case "chat":
		err = cmdChat(ctx, rest, stdout, stderr)
	case "version", "--version", "-version":
		err = cmdVersion(rest, stdout, stderr)
	case "completion":
		err = cmdCompletion(rest, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usageText)
	default:
		err = usagef("unknown command %q (see `opsgate help`)", cmd)
	}
	return report(err, stderr)
}

// report prints err for a human and maps it to an exit code.
func report(err error, stderr io.Writer) int {
	var ee *exitError
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
	case errors.As(err, &ee):
		// A command whose exit status is its answer (approvals wait).
		if ee.msg != "" {
			fmt.Fprintf(stderr, "opsgate: %s\n", ee.msg)
		}
		return ee.code
	default:
		fmt.Fprintf(stderr, "opsgate: %v\n", err)
		return exitFail
	}
}

// exitError ends a command with a chosen exit status, and a message for
// stderr when msg is set.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return fmt.Sprintf("exit %d: %s", e.code, e.msg) }

// errSilent is a failure whose details were already printed (config check,
// audit verify); report only sets the exit code.
var errSilent = errors.New("failed (details above)")

// flagSet is a subcommand's flags: parse errors go to stderr with the
// usage; --help prints the usage and the flag list to stdout and ends the
// command with exit status 0.
type flagSet struct {
	*flag.FlagSet
	stdout io.Writer
}

// newFlags makes the flags of `opsgate <name>`; usage is the synopsis after
// "opsgate ", about an optional paragraph printed under it by --help.
func newFlags(name, usage, about string, stdout, stderr io.Writer) *flagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: opsgate %s\n", usage)
		if about != "" {
			fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(about))
		}
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintln(w, "\nflags:")
			fs.PrintDefaults()
		}
	}
	return &flagSet{FlagSet: fs, stdout: stdout}
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "help"
}

// parse parses flags that may come before, between or after positional
// arguments (`approvals reject ID --reason R`), which the flag package
// alone stops at, and returns the positional arguments. -h, -help or
// --help anywhere before "--" prints the usage to stdout and returns
// flag.ErrHelp (exit status 0).
func (fs *flagSet) parse(args []string) ([]string, error) {
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "-help" || a == "--help" {
			fs.SetOutput(fs.stdout)
			fs.Usage()
			return nil, flag.ErrHelp
		}
	}
	return parseInterleaved(fs.FlagSet, args)
}

// parseInterleaved is flagSet.parse without the help handling.
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

func cmdVersion(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("version", "version", "Prints the version, the commit and the build date of this binary.", stdout, stderr)
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("version takes no arguments")
	}
	printVersion(stdout)
	return nil
}

// buildVersion is the version, commit and build date of this binary: the
// -ldflags values when set, else what the toolchain recorded (the module
// version for `go install …@vX`, the VCS revision and commit time for a
// build in a git checkout).
func buildVersion() (ver, rev, built string, modified bool) {
	bi, ok := debug.ReadBuildInfo()
	return versionFrom(bi, ok)
}

// versionFrom is buildVersion over the given build information.
func versionFrom(bi *debug.BuildInfo, ok bool) (ver, rev, built string, modified bool) {
	ver, rev, built = version, commit, date
	if !ok || bi == nil {
		return ver, rev, built, false
	}
	if ver == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		ver = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if rev == "" {
				rev = s.Value
			}
		case "vcs.time":
			if built == "" {
				built = s.Value
			}
		case "vcs.modified":
			modified = s.Value == "true" && commit == ""
		}
	}
	return ver, rev, built, modified
}

// printVersion prints what buildVersion knows and the Go toolchain, so a
// bug report names the exact binary.
func printVersion(w io.Writer) {
	ver, rev, built, modified := buildVersion()
	fmt.Fprintf(w, "opsgate %s\n", ver)
	if rev == "" {
		rev = "unknown"
	} else if modified {
		rev += " (modified)"
	}
	if built == "" {
		built = "unknown"
	}
	fmt.Fprintf(w, "commit: %s\nbuilt:  %s\n", rev, built)
	if bi, ok := debug.ReadBuildInfo(); ok {
		fmt.Fprintf(w, "go:     %s %s/%s\n", bi.GoVersion, runtime.GOOS, runtime.GOARCH)
	}
}
