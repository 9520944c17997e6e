package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSecondServerOnOneSQLiteFileIsRefused: a second `opsgate serve` on the
// SQLite file a running one uses exits at once with an error naming the
// file, the holder's pid and Postgres; once the first is killed (SIGKILL:
// no cleanup), the second starts.
func TestSecondServerOnOneSQLiteFileIsRefused(t *testing.T) {
	t.Parallel()
	a := newEnv(t)
	deployConfig(a, "")
	a.start()

	b := newEnv(t)
	deployConfig(b, "")
	cfg, err := os.ReadFile(b.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(a.dir, "data", "opsgate.db")
	cfg = []byte(strings.Replace(string(cfg), filepath.Join(b.dir, "data", "opsgate.db"), shared, 1))
	if err := os.WriteFile(b.cfgPath, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binPath, "serve", "--config", b.cfgPath)
	cmd.Dir = b.dir
	cmd.Env = append(os.Environ(), fmt.Sprintf("OPSGATE_LISTEN=127.0.0.1:%d", b.port))
	done := make(chan []byte, 1)
	go func() { out, _ := cmd.CombinedOutput(); done <- out }()
	var out []byte
	select {
	case out = <-done:
	case <-time.After(waitBound):
		_ = cmd.Process.Kill()
		t.Fatal("the second server did not exit")
	}
	if cmd.ProcessState.ExitCode() != exitFail {
		t.Fatalf("second server: exit %d, want 1\n%s", cmd.ProcessState.ExitCode(), out)
	}
	for _, want := range []string{"already running on the SQLite database " + shared,
		"pid " + strconv.Itoa(a.srv.cmd.Process.Pid), "store.driver: postgres"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("second server's error lacks %q:\n%s", want, out)
		}
	}
	a.kill()
	b.start()
	b.stop()
}
