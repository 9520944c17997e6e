package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opsgate/opsgate/internal/mcpfake"
	"github.com/opsgate/opsgate/internal/testkit"
	"github.com/opsgate/opsgate/store/pgtest"
)

// The process-level tests build the real binary once and drive it as an
// operator would: start `opsgate serve` with a config file, talk to it with
// HTTP and the `opsgate` CLI, kill it with SIGKILL, restart it.

// binPath is the opsgate binary built by TestMain.
var binPath string

func TestMain(m *testing.M) {
	// Started again with mcpfake's environment, this binary is the
	// misbehaving upstream MCP server of upstream_test.go.
	mcpfake.MainIfRequested()
	dir, err := os.MkdirTemp("", "opsgate-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "opsgate test: temp dir:", err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "opsgate")
	// Built as deploy/Dockerfile builds it (static, trimmed), so the
	// Dockerfile test's build reuses every compiled package and only links:
	// one compile of the tree per test run, not two.
	build := exec.Command("go", "build", "-trimpath", "-o", binPath, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "opsgate test: go build:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	// pgtest.Main runs the tests and stops its throwaway Postgres cluster
	// (if one was started); it returns, so the binary is removed after.
	pgtest.Main(m)
	os.RemoveAll(dir)
}

// waitBound ends a wait that would otherwise hang: far beyond the slowest
// step on a loaded 2-core machine (the tests wait on events, never on it).
const waitBound = 2 * time.Minute

// env is one test's world: a temp directory with a config file, scripts
// and a log the tools append their idempotency keys to.
type env struct {
	t       *testing.T
	dir     string
	cfgPath string
	port    int
	keyLog  string
	srv     *serverProc
}

// freePort picks a loopback port for the external server: listen on port
// 0, note the port, close.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{t: t, dir: dir, cfgPath: filepath.Join(dir, "opsgate.yaml"), port: freePort(t), keyLog: filepath.Join(dir, "keys.log")}
	return e
}

// script writes an executable shell script into the env and returns its path.
func (e *env) script(name, body string) string {
	e.t.Helper()
	p := filepath.Join(e.dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\nset -eu\n"+body), 0o755); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// storeYAML returns the store section for sqlite (dsn "") or postgres.
func (e *env) storeYAML(pgDSN string) string {
	if pgDSN == "" {
		return fmt.Sprintf("store:\n  driver: sqlite\n  dsn: %s\n", filepath.Join(e.dir, "data", "opsgate.db"))
	}
	return fmt.Sprintf("store:\n  driver: postgres\n  dsn: %q\n", pgDSN)
}

// writeConfig writes the config: server section from the env, then body.
func (e *env) writeConfig(store, body string) {
	e.t.Helper()
	head := fmt.Sprintf("server:\n  listen: 127.0.0.1:%d\n  data_dir: %s\n", e.port, filepath.Join(e.dir, "data"))
	if err := os.WriteFile(e.cfgPath, []byte(head+store+body), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) baseURL() string { return "http://127.0.0.1:" + strconv.Itoa(e.port) }

// serverProc is one running `opsgate serve`.
type serverProc struct {
	cmd  *exec.Cmd
	logs *testkit.LogBuffer
	done chan struct{}
}

// start runs `opsgate serve --config` (or, when the env has no config
// path, plain `opsgate serve` on the built-in quickstart) and waits until
// /healthz answers.
func (e *env) start() {
	e.t.Helper()
	if e.srv != nil {
		e.t.Fatal("server already running")
	}
	args := []string{"serve", "--log-level", "debug"}
	if e.cfgPath != "" {
		args = append(args, "--config", e.cfgPath)
	}
	cmd := exec.Command(binPath, args...)
	cmd.Dir = e.dir
	cmd.Env = append(os.Environ(), "OPSGATE_TOKEN=", "OPSGATE_SERVER=", "OPSGATE_CONFIG=",
		fmt.Sprintf("OPSGATE_LISTEN=127.0.0.1:%d", e.port))
	logs := &testkit.LogBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		e.t.Fatalf("start server: %v", err)
	}
	p := &serverProc{cmd: cmd, logs: logs, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	e.srv = p
	e.t.Cleanup(func() {
		if e.srv == p {
			e.kill()
		}
		if e.t.Failed() {
			e.t.Logf("server log:\n%s", logs.String())
		}
	})
	deadline := time.Now().Add(waitBound)
	for {
		select {
		case <-p.done:
			e.t.Fatalf("server exited during start:\n%s", logs.String())
		default:
		}
		resp, err := http.Get(e.baseURL() + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("server not healthy after %s:\n%s", waitBound, logs.String())
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// kill ends the server with SIGKILL: no drain, no cleanup, like a crash.
func (e *env) kill() {
	e.t.Helper()
	if e.srv == nil {
		return
	}
	_ = e.srv.cmd.Process.Signal(syscall.SIGKILL)
	<-e.srv.done
	e.srv = nil
}

// stop ends the server with SIGTERM and expects a clean exit.
func (e *env) stop() {
	e.t.Helper()
	if e.srv == nil {
		return
	}
	p := e.srv
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(waitBound):
		e.t.Fatalf("server did not stop after SIGTERM:\n%s", p.logs.String())
	}
	e.srv = nil
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		e.t.Fatalf("server exit code %d after SIGTERM:\n%s", code, p.logs.String())
	}
}

// cli runs the opsgate binary and returns stdout, stderr and the exit code.
// The env's config is passed so the CLI finds the server and the token.
func (e *env) cli(args ...string) (string, string, int) {
	e.t.Helper()
	return runOpsgate(e.t, e.dir, append(args, "--config", e.cfgPath))
}

// runOpsgate runs the binary in dir with a clean opsgate environment.
func runOpsgate(t *testing.T, dir string, args []string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(binPath, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "OPSGATE_TOKEN=", "OPSGATE_SERVER=", "OPSGATE_CONFIG=")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("run opsgate %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	return out.String(), errb.String(), code
}

// mustCLI runs the CLI and fails the test on a non-zero exit.
func (e *env) mustCLI(args ...string) string {
	e.t.Helper()
	out, errOut, code := e.cli(args...)
	if code != 0 {
		e.t.Fatalf("opsgate %v: exit %d\nstdout: %s\nstderr: %s", args, code, out, errOut)
	}
	return out
}

// token is the admin token the running server generated.
func (e *env) token() string {
	e.t.Helper()
	b, err := os.ReadFile(filepath.Join(e.dir, "data", "admin.token"))
	if err != nil {
		e.t.Fatalf("read admin token: %v", err)
	}
	return strings.TrimSpace(string(b))
}

// api calls the server's API with the generated token and decodes the answer.
func (e *env) api(method, path string, body any, out any) int {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, e.baseURL()+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.token())
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(data, out); err != nil {
			e.t.Fatalf("%s %s: decode %s: %v", method, path, data, err)
		}
	}
	return resp.StatusCode
}

type testRun struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Steps  []struct {
		Status         string `json:"status"`
		Output         string `json:"output"`
		ApprovalID     string `json:"approval_id"`
		IdempotencyKey string `json:"idempotency_key"`
	} `json:"steps"`
}

// message posts a console message and returns the run it started.
func (e *env) message(thread, text string) testRun {
	e.t.Helper()
	var resp struct {
		Run *testRun `json:"run"`
	}
	if code := e.api("POST", "/api/v1/messages", map[string]string{"thread": thread, "text": text}, &resp); code != 200 && code != 201 {
		e.t.Fatalf("POST message: HTTP %d", code)
	}
	if resp.Run == nil {
		e.t.Fatalf("message %q started no run", text)
	}
	return *resp.Run
}

func (e *env) run(id string) testRun {
	e.t.Helper()
	var r testRun
	if code := e.api("GET", "/api/v1/runs/"+id, nil, &r); code != 200 {
		e.t.Fatalf("GET run %s: HTTP %d", id, code)
	}
	return r
}

// waitRun polls the run until cond holds, bounded by waitBound.
func (e *env) waitRun(id string, what string, cond func(testRun) bool) testRun {
	e.t.Helper()
	deadline := time.Now().Add(waitBound)
	for {
		r := e.run(id)
		if cond(r) {
			return r
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("run %s: not %s after %s (status %s, steps %+v)", id, what, waitBound, r.Status, r.Steps)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *env) waitStatus(id, status string) testRun {
	e.t.Helper()
	return e.waitRun(id, status, func(r testRun) bool { return r.Status == status })
}

// keys returns the idempotency keys the tools logged, one per dispatch.
func (e *env) keys() []string {
	e.t.Helper()
	b, err := os.ReadFile(e.keyLog)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// waitFile waits until path exists (a tool signalling it started).
func (e *env) waitFile(path string) {
	e.t.Helper()
	deadline := time.Now().Add(waitBound)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s not created after %s", path, waitBound)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
