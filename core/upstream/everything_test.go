package upstream

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/internal/npmtest"
)

// The reference server @modelcontextprotocol/server-everything, pinned in
// testdata/npm, over both transports: a real server nobody here wrote.

const everythingSecret = "ev-secret-token-42"

func everythingServer(t *testing.T) Server {
	return Server{
		Name: "ev", Command: []string{npmtest.Bin(t, "mcp-server-everything"), "stdio"},
		Env:            map[string]string{"OPSGATE_TEST_TOKEN": everythingSecret},
		Secrets:        []string{everythingSecret},
		ConnectTimeout: 20 * time.Second, CallTimeout: 20 * time.Second, MinBackoff: 50 * time.Millisecond,
	}
}

// checkEverything exercises what both transports must do alike.
func checkEverything(t *testing.T, r *Registry) {
	t.Helper()
	echo := lookup(t, r, "ev.echo")
	if echo.Risk != approvals.RiskRead || echo.Destructive || !echo.Idempotent {
		t.Errorf("echo (readOnlyHint): risk %s destructive %v idempotent %v", echo.Risk, echo.Destructive, echo.Idempotent)
	}
	if _, err := echo.Schema.Apply(map[string]any{"msg": "typo"}); err == nil {
		t.Error("echo's schema (message required) accepted arguments without message")
	}
	res, err := call(t, r, "ev.echo", map[string]any{"message": "hello from opsgate"})
	if err != nil || res.Output != "Echo: hello from opsgate" {
		t.Fatalf("echo: %q %v", res.Output, err)
	}
	res, err = call(t, r, "ev.get-sum", map[string]any{"a": 2, "b": 40})
	if err != nil || !strings.Contains(res.Output, "42") {
		t.Fatalf("get-sum: %q %v", res.Output, err)
	}
	// Arguments the server's own validation refuses are its error, not a crash.
	if _, err := call(t, r, "ev.get-sum", map[string]any{"a": "two"}); err == nil {
		t.Fatal("get-sum with a string accepted")
	}
	// roots/list answers an empty list: opsgate shows a server none of its
	// files. (The server asks when it starts, then shows what it got.)
	res, err = call(t, r, "ev.get-roots-list", nil)
	if err != nil || !strings.Contains(res.Output, "no roots are currently configured") {
		t.Fatalf("get-roots-list: %q %v", res.Output, err)
	}
	// Sampling is not offered, so the server offers no tool that samples.
	if _, err := r.LookupTool(context.Background(), "ev.trigger-sampling-request"); err == nil {
		t.Fatal("a sampling tool is offered: opsgate declared sampling")
	}
	rep := r.Reports(context.Background())[0]
	if !rep.Connected || len(rep.Tools) < 5 {
		t.Fatalf("report: connected %v, %d tools, err %q", rep.Connected, len(rep.Tools), rep.Err)
	}
}

func TestEverythingOverStdio(t *testing.T) {
	t.Parallel()
	r, logs := start(t, everythingServer(t))
	checkEverything(t, r)
	// get-env prints the server's environment: what opsgate passed (and
	// only that, plus PATH, HOME, LANG, TZ), with the credential masked.
	res, err := call(t, r, "ev.get-env", nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(res.Output, everythingSecret) || !strings.Contains(res.Output, `"OPSGATE_TEST_TOKEN": "****"`) {
		t.Fatalf("get-env output:\n%s", res.Output)
	}
	if strings.Contains(res.Output, "OPSGATE_TEST_POSTGRES_DSN") {
		t.Fatal("the server inherited opsgate's environment")
	}
	waitLog(t, logs, "upstream stderr", "server=ev", "STDIO")
}

func TestEverythingOverStreamableHTTP(t *testing.T) {
	t.Parallel()
	url := startNodeHTTP(t, npmtest.Bin(t, "mcp-server-everything"), "streamableHttp")
	r, _ := start(t, Server{
		Name: "ev", URL: url + "/mcp", Headers: map[string]string{"Authorization": "Bearer " + everythingSecret},
		ConnectTimeout: 20 * time.Second, CallTimeout: 20 * time.Second, MinBackoff: 50 * time.Millisecond,
	})
	checkEverything(t, r)
}

// startNodeHTTP runs a node server from testdata/npm on a free loopback
// port (testdata/npm/loopback.cjs forces 127.0.0.1 and reports the port)
// and returns its base URL; it is stopped with the test.
func startNodeHTTP(t *testing.T, bin string, args ...string) string {
	t.Helper()
	shim := filepath.Join(npmtest.Dir(t), "loopback.cjs")
	cmd := exec.Command("node", append([]string{"--require", shim, bin}, args...)...)
	cmd.Env = append(os.Environ(), "PORT=0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	port := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if p, ok := strings.CutPrefix(sc.Text(), "OPSGATE_LISTENING "); ok {
				select {
				case port <- p:
				default:
				}
			}
		}
	}()
	select {
	case p := <-port:
		return fmt.Sprintf("http://127.0.0.1:%s", p)
	case <-time.After(bound):
		t.Fatalf("%s did not start listening within %s", bin, bound)
	}
	return ""
}
