package tools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// script writes a /bin/sh script into a temp dir and returns its path. Tests
// run it as an argument of /bin/sh rather than exec'ing it directly, which
// avoids ETXTBSY when parallel tests fork while another file is being written.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tool.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// printArgs prints every argument as [arg] on its own line.
const printArgs = `for a in "$@"; do printf '[%s]\n' "$a"; done`

func call(args map[string]any) Call {
	return Call{RunID: "run-1", IdempotencyKey: "idem-1", Args: args}
}

// processGone reports whether pid no longer runs (absent or a zombie that
// nobody reaped yet, which is common in containers).
func processGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute) // a hang backstop
	for !processGone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still running", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute) // a hang backstop
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				return pid
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestExecRun(t *testing.T) {
	t.Parallel()

	t.Run("ArgvIsNotShellInterpreted", func(t *testing.T) {
		t.Parallel()
		marker := filepath.Join(t.TempDir(), "pwned")
		e := &Exec{Command: []string{"/bin/sh", script(t, printArgs), "{{.a}}", "{{.b}}", "x {{.c}} y", "{{.d}}"}}
		res, err := e.Run(context.Background(), call(map[string]any{
			"a": "; touch " + marker,
			"b": "two words",
			"c": "$(touch " + marker + ")",
			"d": "`touch " + marker + "` | cat > /dev/null",
		}))
		if err != nil {
			t.Fatal(err)
		}
		want := "[; touch " + marker + "]\n[two words]\n[x $(touch " + marker + ") y]\n[`touch " + marker + "` | cat > /dev/null]\n"
		if res.Output != want {
			t.Fatalf("output %q, want %q", res.Output, want)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("an argument was interpreted by a shell")
		}
	})

	t.Run("RendersNumbersAndNilPlainly", func(t *testing.T) {
		t.Parallel()
		e := &Exec{Command: []string{"/bin/sh", script(t, printArgs), "{{.n}}", "{{.f}}", "{{.nil}}", "{{if .flag}}yes{{end}}"}}
		res, err := e.Run(context.Background(), call(map[string]any{"n": 1000000.0, "f": 1.5, "nil": nil, "flag": true}))
		if err != nil {
			t.Fatal(err)
		}
		if want := "[1000000]\n[1.5]\n[]\n[yes]\n"; res.Output != want {
			t.Fatalf("output %q, want %q", res.Output, want)
		}
	})

	t.Run("CapturesStdoutAndStderr", func(t *testing.T) {
		t.Parallel()
		e := &Exec{Command: []string{"/bin/sh", script(t, "echo out; echo err >&2; echo out2")}}
		res, err := e.Run(context.Background(), call(nil))
		if err != nil {
			t.Fatal(err)
		}
		if res.Output != "out\nerr\nout2\n" || res.ExitCode != 0 || res.Truncated || res.Duration <= 0 {
			t.Fatalf("result %+v", res)
		}
	})

	t.Run("NonZeroExitIsTypedError", func(t *testing.T) {
		t.Parallel()
		e := &Exec{Command: []string{"/bin/sh", script(t, "echo failing; exit 3")}}
		res, err := e.Run(context.Background(), call(nil))
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Code != 3 {
			t.Fatalf("err %v, want ExitError 3", err)
		}
		if res.ExitCode != 3 || res.Output != "failing\n" {
			t.Fatalf("result %+v", res)
		}
	})

	t.Run("OutputIsCapped", func(t *testing.T) {
		t.Parallel()
		e := &Exec{MaxOutput: 100, Command: []string{"/bin/sh", script(t, `i=0; while [ $i -lt 100 ]; do printf '%0100d' 0; i=$((i+1)); done`)}}
		res, err := e.Run(context.Background(), call(nil))
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Repeat("0", 100) + "\n[… truncated 9900 bytes]"
		if !res.Truncated || res.Output != want {
			t.Fatalf("output %q truncated=%v", res.Output, res.Truncated)
		}
	})

	t.Run("EnvHasRunIDsAndToolEnv", func(t *testing.T) {
		t.Parallel()
		e := &Exec{
			Command: []string{"/bin/sh", script(t, "env")},
			Env:     map[string]string{"REGION": "eu west", "OPSGATE_RUN_ID": "forged", "OPSGATE_RECEIPT": "forged"},
		}
		res, err := e.Run(context.Background(), Call{RunID: "r-42", IdempotencyKey: "k-42", Receipt: "h.p.s"})
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"OPSGATE_RUN_ID=r-42\n", "OPSGATE_IDEMPOTENCY_KEY=k-42\n", "OPSGATE_RECEIPT=h.p.s\n", "REGION=eu west\n", "PATH="} {
			if !strings.Contains(res.Output, want) {
				t.Errorf("env lacks %q:\n%s", want, res.Output)
			}
		}
		// A call nobody decided carries no receipt, not even the tool's own.
		res, err = e.Run(context.Background(), Call{RunID: "r-43", IdempotencyKey: "k-43"})
		if err != nil || strings.Contains(res.Output, "OPSGATE_RECEIPT") {
			t.Errorf("undecided call's env has a receipt (%v):\n%s", err, res.Output)
		}
	})

	t.Run("RelativeCommandUsesDir", func(t *testing.T) {
		t.Parallel()
		p := script(t, "pwd")
		e := &Exec{Command: []string{"/bin/sh", "./" + filepath.Base(p)}, Dir: filepath.Dir(p)}
		res, err := e.Run(context.Background(), call(nil))
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(res.Output) != filepath.Dir(p) {
			t.Fatalf("pwd %q, want %q", res.Output, filepath.Dir(p))
		}
	})

	t.Run("MissingKeyFailsBeforeStart", func(t *testing.T) {
		t.Parallel()
		marker := filepath.Join(t.TempDir(), "ran")
		e := &Exec{Command: []string{"/bin/sh", script(t, "touch "+marker), "{{.missing}}"}}
		_, err := e.Run(context.Background(), call(map[string]any{"other": "x"}))
		if !errors.Is(err, ErrTemplate) || !strings.Contains(err.Error(), "missing") {
			t.Fatalf("err %v, want template error naming the key", err)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("the tool ran despite a missing key")
		}
	})

	t.Run("EmptyArgv0IsRefused", func(t *testing.T) {
		t.Parallel()
		e := &Exec{Command: []string{"{{.prog}}", "x"}}
		if _, err := e.Run(context.Background(), call(map[string]any{"prog": ""})); !errors.Is(err, ErrTemplate) {
			t.Fatalf("err %v, want ErrTemplate", err)
		}
	})

	t.Run("MissingProgramIsError", func(t *testing.T) {
		t.Parallel()
		e := &Exec{Command: []string{filepath.Join(t.TempDir(), "nope")}}
		_, err := e.Run(context.Background(), call(nil))
		var ee *ExitError
		if err == nil || errors.As(err, &ee) {
			t.Fatalf("err %v, want a start error", err)
		}
	})

	t.Run("ConcurrentCallsKeepTheirArgs", func(t *testing.T) {
		t.Parallel()
		e := &Exec{Command: []string{"/bin/sh", script(t, printArgs), "{{.i}}"}}
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for i := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := e.Run(context.Background(), call(map[string]any{"i": float64(i)}))
				if err == nil && res.Output != fmt.Sprintf("[%d]\n", i) {
					err = fmt.Errorf("call %d got %q", i, res.Output)
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
	})
}

func TestExecEnvIsMinimal(t *testing.T) {
	t.Setenv("OPSGATE_TEST_SECRET", "hunter2")
	e := &Exec{Command: []string{"/bin/sh", script(t, "env")}}
	res, err := e.Run(context.Background(), call(nil))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(res.Output, "hunter2") {
		t.Fatalf("opsgate's own environment leaked into the tool:\n%s", res.Output)
	}
}

func TestExecTimeoutKillsProcessGroup(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pid")
	e := &Exec{
		// Long enough for a loaded CI machine to reach the sleeps; the
		// assertion is on the kill, not on the timer's precision.
		Timeout: 2 * time.Second,
		Command: []string{"/bin/sh", script(t, `echo started; sleep 600 & echo $! > "$1"; sleep 600`), pidFile},
	}
	start := time.Now()
	res, err := e.Run(context.Background(), call(nil))
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("err %v, want ErrTimeout", err)
	}
	// Not a latency bound: far past any scheduling delay, far short of
	// the sleeps a Run that waited for them would have waited out.
	if d := time.Since(start); d > 2*time.Minute {
		t.Fatalf("Run took %s after a 2s timeout", d)
	}
	if res.Output != "started\n" {
		t.Fatalf("partial output %q", res.Output)
	}
	waitGone(t, readPID(t, pidFile))
}

func TestExecGrandchildHoldingStdoutDoesNotBlock(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pid")
	e := &Exec{
		Timeout: time.Minute,
		Command: []string{"/bin/sh", script(t, `sleep 600 & echo $! > "$1"; echo done`), pidFile},
	}
	start := time.Now()
	res, err := e.Run(context.Background(), call(nil))
	if err != nil {
		t.Fatal(err)
	}
	// Far past any scheduling delay, far short of the grandchild's sleep.
	if d := time.Since(start); d > 2*time.Minute {
		t.Fatalf("Run took %s: it waited for the grandchild", d)
	}
	if res.Output != "done\n" {
		t.Fatalf("output %q", res.Output)
	}
	waitGone(t, readPID(t, pidFile))
}

func TestExecContextCancel(t *testing.T) {
	t.Parallel()
	e := &Exec{Command: []string{"/bin/sh", script(t, "sleep 30")}}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	_, err := e.Run(ctx, call(nil))
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrTimeout) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
}

func TestExecValidate(t *testing.T) {
	t.Parallel()
	cases := map[string]*Exec{
		"EmptyCommand":     {},
		"UnparsableArgv":   {Command: []string{"x", "{{.a"}},
		"UnparsableDryRun": {Command: []string{"x"}, DryRun: []string{"{{end}}"}},
		"UnknownFunction":  {Command: []string{"x", "{{shell .a}}"}},
		"NegativeTimeout":  {Command: []string{"x"}, Timeout: -1},
		"NegativeCap":      {Command: []string{"x"}, MaxOutput: -1},
		"BadEnvName":       {Command: []string{"x"}, Env: map[string]string{"A=B": "c"}},
	}
	for name, e := range cases {
		if err := e.Validate(); err == nil {
			t.Errorf("%s: Validate accepted it", name)
		}
	}
	ok := &Exec{Command: []string{"./deploy.sh", "{{.service}}", "{{json .meta}}"}, DryRun: []string{"./deploy.sh", "--dry-run"}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid tool refused: %v", err)
	}
}

func TestExecPreview(t *testing.T) {
	t.Parallel()

	t.Run("NoDryRunIsEmpty", func(t *testing.T) {
		t.Parallel()
		e := &Exec{Command: []string{"/bin/true"}}
		got, err := e.Preview(context.Background(), call(nil))
		if got != "" || err != nil {
			t.Fatalf("got %q, %v", got, err)
		}
	})

	t.Run("RunsDryRunNotCommand", func(t *testing.T) {
		t.Parallel()
		marker := filepath.Join(t.TempDir(), "ran")
		e := &Exec{
			Command: []string{"/bin/sh", script(t, "touch "+marker)},
			DryRun:  []string{"/bin/sh", script(t, `echo "would deploy $1 ($OPSGATE_RUN_ID)"`), "{{.service}}"},
		}
		got, err := e.Preview(context.Background(), call(map[string]any{"service": "api"}))
		if err != nil || got != "would deploy api (run-1)\n" {
			t.Fatalf("got %q, %v", got, err)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("Preview ran the real command")
		}
	})

	t.Run("NonZeroExitIsInText", func(t *testing.T) {
		t.Parallel()
		e := &Exec{Command: []string{"x"}, DryRun: []string{"/bin/sh", script(t, "echo nope; exit 2")}}
		got, err := e.Preview(context.Background(), call(nil))
		if err != nil || got != "nope\nexit status 2" {
			t.Fatalf("got %q, %v", got, err)
		}
	})

	t.Run("BoundedInSize", func(t *testing.T) {
		t.Parallel()
		e := &Exec{Command: []string{"x"}, PreviewMax: 10, DryRun: []string{"/bin/sh", script(t, "printf '%0100d' 0")}}
		got, err := e.Preview(context.Background(), call(nil))
		if err != nil || got != "0000000000\n[… truncated 90 bytes]" {
			t.Fatalf("got %q, %v", got, err)
		}
	})

	t.Run("BoundedInTime", func(t *testing.T) {
		t.Parallel()
		e := &Exec{Command: []string{"x"}, PreviewTimeout: 200 * time.Millisecond, DryRun: []string{"/bin/sh", script(t, "sleep 600")}}
		start := time.Now()
		_, err := e.Preview(context.Background(), call(nil))
		// 2 min: far past any scheduling delay, far short of the sleep.
		if !errors.Is(err, ErrTimeout) || time.Since(start) > 2*time.Minute {
			t.Fatalf("err %v after %s", err, time.Since(start))
		}
	})

	t.Run("MissingKeyIsError", func(t *testing.T) {
		t.Parallel()
		e := &Exec{Command: []string{"x"}, DryRun: []string{"/bin/echo", "{{.nope}}"}}
		if _, err := e.Preview(context.Background(), call(nil)); !errors.Is(err, ErrTemplate) {
			t.Fatalf("err %v, want ErrTemplate", err)
		}
	})
}

func TestDirectScriptExec(t *testing.T) {
	// Not parallel: exec'ing a freshly written file directly can hit ETXTBSY
	// if another test forks while the file is open for writing.
	p := script(t, printArgs)
	e := &Exec{Command: []string{p, "{{.a}}"}}
	res, err := e.Run(context.Background(), call(map[string]any{"a": "a b"}))
	if err != nil || res.Output != "[a b]\n" {
		t.Fatalf("got %q, %v", res.Output, err)
	}
}

func FuzzRenderArgv(f *testing.F) {
	f.Add("api", "1.2.3")
	f.Add("; rm -rf /", "$(id)")
	f.Add("a b\tc\nd", "{{.a}}")
	f.Add("", "\x00\xff")
	ts, err := compileAll("command", []string{"prog", "{{.a}}", "--v={{.b}}", "{{.a}} {{.b}}", "{{json .a}}"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		argv, err := renderArgv(ts, map[string]any{"a": a, "b": b})
		if err != nil {
			t.Fatal(err)
		}
		if len(argv) != 5 {
			t.Fatalf("argv length %d, want 5: %q", len(argv), argv)
		}
		if argv[1] != a || argv[2] != "--v="+b || argv[3] != a+" "+b {
			t.Fatalf("argv %q does not hold the values literally", argv)
		}
	})
}
