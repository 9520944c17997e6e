package tools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"text/template"
	"time"
)

// Defaults applied when a tool leaves a field zero.
const (
	// DefaultTimeout bounds a tool call whose config names no timeout, so a
	// hung tool can never hold a run (and its thread) forever.
	DefaultTimeout = 60 * time.Second
	// DefaultPreviewTimeout bounds a dry run: an approval card must not wait
	// long for its preview.
	DefaultPreviewTimeout = 10 * time.Second
	// DefaultPreviewMax caps a preview so it fits on an approval card.
	DefaultPreviewMax = 8 << 10
	// waitDelay is how long Run waits for the output pipes to close after the
	// process exited (or was killed): a grandchild that inherited stdout and
	// keeps running must not keep the call open.
	waitDelay = time.Second
)

// EnvReceipt is the variable that carries the call's approval receipt
// (Call.Receipt), when it has one.
const EnvReceipt = "OPSGATE_RECEIPT"

// inheritedEnv names the only variables an exec tool inherits from opsgate's
// own environment: enough to find programs and format text, never opsgate's
// secrets (database URLs, bot tokens).
var inheritedEnv = []string{"PATH", "HOME", "LANG", "TZ"}

// Exec is an exec tool: a program started from an argv of templates, never
// through a shell. It is safe for concurrent use once built.
type Exec struct {
	// Command is the argv; each element is a template rendered to exactly
	// one argument.
	Command []string
	// DryRun is the argv Preview runs to show an approver what Command
	// would do; empty means no preview.
	DryRun []string
	// Timeout bounds Run; zero means DefaultTimeout.
	Timeout time.Duration
	// Env is added to the minimal inherited environment.
	Env map[string]string
	// Dir is the working directory; a relative Command[0] containing a
	// slash is resolved against it.
	Dir string
	// MaxOutput caps the captured stdout+stderr; zero means DefaultMaxOutput.
	MaxOutput int64
	// PreviewTimeout bounds Preview; zero means DefaultPreviewTimeout.
	PreviewTimeout time.Duration
	// PreviewMax caps the preview text; zero means DefaultPreviewMax.
	PreviewMax int64
	// AllowDashArgs lets an argument value start an argv element with "-"
	// (exec.allow_dash_args). Off, such a value is refused (ArgError): it
	// would reach the program as an option ("--upload-pack=…", "-rf").
	AllowDashArgs bool

	once     sync.Once
	compiled *execTemplates
	err      error
}

type execTemplates struct {
	command []*template.Template
	dryRun  []*template.Template
}

func (e *Exec) templates() (*execTemplates, error) {
	e.once.Do(func() {
		e.compiled, e.err = e.compile()
	})
	return e.compiled, e.err
}

func (e *Exec) compile() (*execTemplates, error) {
	if len(e.Command) == 0 {
		return nil, errors.New("exec: command is empty")
	}
	if e.Timeout < 0 || e.PreviewTimeout < 0 {
		return nil, errors.New("exec: negative timeout")
	}
	if e.MaxOutput < 0 || e.PreviewMax < 0 {
		return nil, errors.New("exec: negative output cap")
	}
	for k, v := range e.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return nil, fmt.Errorf("exec: invalid env entry %q", k)
		}
	}
	cmd, err := compileAll("command", e.Command)
	if err != nil {
		return nil, fmt.Errorf("exec: %w", err)
	}
	dry, err := compileAll("dry_run", e.DryRun)
	if err != nil {
		return nil, fmt.Errorf("exec: %w", err)
	}
	return &execTemplates{command: cmd, dryRun: dry}, nil
}

// Validate parses the templates and checks the fields, so a broken tool is
// reported when the configuration loads rather than when an approver has
// already said yes.
func (e *Exec) Validate() error {
	_, err := e.templates()
	return err
}

// renderArgv renders each element to exactly one argument.
func renderArgv(ts []*template.Template, args map[string]any) ([]string, error) {
	data := normalize(args)
	argv := make([]string, len(ts))
	for i, t := range ts {
		s, err := render(t, data)
		if err != nil {
			return nil, err
		}
		argv[i] = s
	}
	if argv[0] == "" {
		return nil, fmt.Errorf("%w: argv[0] is empty after rendering", ErrTemplate)
	}
	return argv, nil
}

// argv renders ts and refuses a value that would read as an option.
func (e *Exec) argv(ts []*template.Template, args map[string]any) ([]string, error) {
	argv, err := renderArgv(ts, args)
	if err != nil {
		return nil, err
	}
	if !e.AllowDashArgs {
		if err := checkDash(ts, argv, args); err != nil {
			return nil, err
		}
	}
	return argv, nil
}

// environ builds the child's environment: the inherited minimum, the tool's
// Env, then the run identifiers (which the tool's Env cannot override).
func (e *Exec) environ(c Call) []string {
	env := map[string]string{}
	for _, k := range inheritedEnv {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	for k, v := range e.Env {
		env[k] = v
	}
	env["OPSGATE_RUN_ID"] = c.RunID
	env["OPSGATE_IDEMPOTENCY_KEY"] = c.IdempotencyKey
	delete(env, EnvReceipt) // never the tool's own value
	if c.Receipt != "" {
		env[EnvReceipt] = c.Receipt
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// Run renders Command from c.Args and runs it. A non-zero exit returns the
// filled Result and an *ExitError; the tool's timeout returns an error
// wrapping ErrTimeout; cancelling ctx returns an error wrapping ctx.Err().
// In every case the whole process group is killed, grandchildren included.
func (e *Exec) Run(ctx context.Context, c Call) (Result, error) {
	ts, err := e.templates()
	if err != nil {
		return Result{}, err
	}
	argv, err := e.argv(ts.command, c.Args)
	if err != nil {
		return Result{}, fmt.Errorf("exec: %w", err)
	}
	res, err := e.run(ctx, c, argv, orDefault(e.Timeout, DefaultTimeout), orDefault(e.MaxOutput, DefaultMaxOutput), c.Output)
	if err != nil {
		return res, fmt.Errorf("exec %s: %w", argv[0], err)
	}
	return res, nil
}

// Preview renders and runs DryRun, bounded by PreviewTimeout and PreviewMax.
// It returns "" and nil when the tool has no dry run. A non-zero exit of the
// dry run is part of the preview text ("exit status N"), not an error; an
// error means the preview could not be produced (bad template, program not
// found, timeout) and the engine shows it as "dry run failed: …".
func (e *Exec) Preview(ctx context.Context, c Call) (string, error) {
	ts, err := e.templates()
	if err != nil {
		return "", err
	}
	if len(ts.dryRun) == 0 {
		return "", nil
	}
	argv, err := e.argv(ts.dryRun, c.Args)
	if err != nil {
		return "", fmt.Errorf("exec dry run: %w", err)
	}
	res, err := e.run(ctx, c, argv, orDefault(e.PreviewTimeout, DefaultPreviewTimeout), orDefault(e.PreviewMax, DefaultPreviewMax), nil)
	var exitErr *ExitError
	switch {
	case errors.As(err, &exitErr):
		sep := "\n"
		if res.Output == "" || strings.HasSuffix(res.Output, "\n") {
			sep = ""
		}
		return res.Output + sep + exitErr.Error(), nil
	case err != nil:
		return "", fmt.Errorf("exec dry run %s: %w", argv[0], err)
	}
	return res.Output, nil
}

// run starts argv in its own process group and waits for it; live, when
// set, sees the output as it is written.
func (e *Exec) run(ctx context.Context, c Call, argv []string, timeout time.Duration, maxOut int64, live OutputSink) (Result, error) {
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	out := newCappedBuffer(maxOut)
	out.live = live
	cmd := exec.CommandContext(runCtx, argv[0], argv[1:]...)
	cmd.Dir = e.Dir
	cmd.Env = e.environ(c)
	cmd.Stdin = nil // reads see EOF at once: a tool must not wait for input
	cmd.Stdout = out
	cmd.Stderr = out // same writer: os/exec shares one pipe, writes stay ordered
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// Kill the group, not just the leader, so a script's children die
		// with it.
		return killGroup(cmd)
	}
	cmd.WaitDelay = waitDelay

	start := time.Now()
	if err := cmd.Start(); err != nil {
		return Result{}, fmt.Errorf("start: %w", err)
	}
	waitErr := cmd.Wait()
	if errors.Is(waitErr, exec.ErrWaitDelay) {
		// The program exited but something it started still holds the
		// output open; end it rather than leak it.
		_ = killGroup(cmd)
	}
	res := Result{Duration: time.Since(start), ExitCode: exitCode(cmd.ProcessState)}
	res.Output, res.Truncated = out.result()

	// A process that exited successfully before the deadline succeeded,
	// even if the context ends a moment later: os/exec reports a cancel only
	// when the kill actually decided the outcome.
	killed := waitErr != nil && !errors.Is(waitErr, exec.ErrWaitDelay) && runCtx.Err() != nil
	switch {
	case killed && ctx.Err() != nil:
		return res, fmt.Errorf("cancelled: %w", ctx.Err())
	case killed:
		return res, fmt.Errorf("after %s: %w", timeout, ErrTimeout)
	case res.ExitCode != 0:
		return res, &ExitError{Code: res.ExitCode}
	case waitErr != nil && !errors.Is(waitErr, exec.ErrWaitDelay):
		return res, fmt.Errorf("wait: %w", waitErr)
	}
	return res, nil
}

// killGroup sends SIGKILL to the process group led by cmd's process.
func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

// exitCode maps a finished process to a shell-style exit code: the status,
// or 128+N when killed by signal N; -1 when it never finished.
func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// orDefault returns v, or def when v is zero.
func orDefault[T int64 | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}
