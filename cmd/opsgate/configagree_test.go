package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// shippedConfigs are the configuration files the repository ships: every
// configs/*.yaml and the container and compose defaults.
func shippedConfigs(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../configs/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("configs/*.yaml: %v %v", files, err)
	}
	files = append(files, "../../deploy/docker/opsgate.yaml", "../../deploy/compose/opsgate.yaml")
	for i, f := range files {
		abs, err := filepath.Abs(f)
		if err != nil {
			t.Fatal(err)
		}
		files[i] = abs
	}
	return files
}

// listenLine is server.listen in a shipped config.
var listenLine = regexp.MustCompile(`(?m)^  listen: .*$`)

// problemLine is one "file:line: path: message" line of a refusal.
var problemLine = regexp.MustCompile(`(?m)^\S+\.yaml:\d+: .*$`)

// TestShippedConfigsCheckAndServeAgree: for every shipped config, run from
// a fresh directory elsewhere (as `--config configs/quickstart.yaml` from a
// checkout is), `config check` and `serve` agree. Where check refuses —
// only ever for secrets the config names and this environment does not
// set — serve refuses before doing anything, with the very same problems;
// where check accepts,
// serve starts, and for the SQLite ones a flow runs its exec tool — the
// demo script serve installed — to success. (A config that check accepts
// and that names a non-loopback host, Postgres at "postgres" or the real
// platforms, is not started: tests reach only loopback.)
func TestShippedConfigsCheckAndServeAgree(t *testing.T) {
	t.Parallel()
	for _, file := range shippedConfigs(t) {
		name := filepath.Base(filepath.Dir(file)) + "/" + filepath.Base(file)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.cfgPath = file
			checkOut, _, checkCode := runOpsgate(t, e.dir, []string{"config", "check", "--config", file})
			if checkCode != 0 {
				if checkCode != exitFail {
					t.Fatalf("config check: exit %d\n%s", checkCode, checkOut)
				}
				serveOut, serveCode := serveUntilExit(t, e)
				if serveCode != exitFail {
					t.Fatalf("config check refused (exit 1), serve exited %d:\ncheck:\n%s\nserve:\n%s", serveCode, checkOut, serveOut)
				}
				want, got := problemLine.FindAllString(checkOut, -1), problemLine.FindAllString(serveOut, -1)
				if len(want) == 0 || !slices.Equal(want, got) {
					t.Errorf("config check and serve list different problems:\ncheck:\n%s\nserve:\n%s", checkOut, serveOut)
				}
				// A shipped config is refused only for the secrets it
				// asks the environment for, never for what it says.
				for _, p := range want {
					if !strings.Contains(p, "environment variable") || !strings.Contains(p, "is not set") {
						t.Errorf("a shipped config has a problem of its own: %s", p)
					}
				}
				return
			}
			if !strings.Contains(checkOut, "OK") {
				t.Fatalf("config check exit 0 without OK:\n%s", checkOut)
			}
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(data, []byte("driver: sqlite")) {
				t.Skipf("config check accepts %s, which names a store or platform beyond loopback: not started here", name)
			}
			if !bytes.Contains(data, []byte("OPSGATE_LISTEN")) {
				// A fixed listen address (0.0.0.0:8080 in a container):
				// the same file on the test's loopback port, in a
				// directory of its own, still not the working directory.
				e.cfgPath = filepath.Join(t.TempDir(), filepath.Base(file))
				fixed := listenLine.ReplaceAll(data, fmt.Appendf(nil, "  listen: 127.0.0.1:%d", e.port))
				if bytes.Equal(fixed, data) {
					t.Fatalf("%s: no server.listen line to move to loopback", name)
				}
				if err := os.WriteFile(e.cfgPath, fixed, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			e.start()
			run := e.message("agree", "status web")
			if r := e.waitStatus(run.ID, "succeeded"); len(r.Steps) == 0 || !strings.Contains(r.Steps[0].Output, "healthy") {
				t.Errorf("status web: %+v, want the demo script's report", r.Steps)
			}
			e.stop()
		})
	}
}

// serveUntilExit runs `opsgate serve` for e's config in e.dir and returns
// its output and exit code once it exits; one that is still running after
// waitBound (it started instead of refusing) is killed and reported.
func serveUntilExit(t *testing.T, e *env) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, "serve", "--config", e.cfgPath)
	cmd.Dir = e.dir
	cmd.Env = append(os.Environ(), "OPSGATE_TOKEN=", "OPSGATE_SERVER=", "OPSGATE_CONFIG=",
		fmt.Sprintf("OPSGATE_LISTEN=127.0.0.1:%d", e.port))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("serve still running after %v, where config check refused:\n%s", waitBound, out.String())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run serve: %v", err)
	}
	return out.String(), cmd.ProcessState.ExitCode()
}
