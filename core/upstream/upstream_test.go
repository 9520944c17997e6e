package upstream

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core/tools"
	"github.com/opsgate/opsgate/internal/mcpfake"
	"github.com/opsgate/opsgate/internal/testkit"
)

func TestMain(m *testing.M) {
	// The misbehaving stdio server is this test binary, started again.
	mcpfake.MainIfRequested()
	os.Exit(m.Run())
}

// bound is how long any single wait in these tests may take.
const bound = 20 * time.Second

// fakeServer configures the misbehaving server over stdio, recording into
// a temp dir it returns.
func fakeServer(t *testing.T, name, mode string) (Server, string) {
	t.Helper()
	dir := t.TempDir()
	return Server{
		Name: name, Command: []string{os.Args[0]}, Env: mcpfake.Env(mode, dir, "hunter2-secret"),
		Secrets:        []string{"hunter2-secret"},
		ConnectTimeout: 5 * time.Second, CallTimeout: 5 * time.Second,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
	}, dir
}

// start builds and starts a registry over servers, closed with the test.
func start(t *testing.T, servers ...Server) (*Registry, *testkit.LogBuffer) {
	t.Helper()
	logs := &testkit.LogBuffer{}
	r, err := New(servers, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	r.Start(context.Background())
	t.Cleanup(func() {
		_ = r.Close()
		if t.Failed() {
			t.Logf("registry log:\n%s", logs.String())
		}
	})
	return r, logs
}

func lookup(t *testing.T, r *Registry, name string) *tools.Tool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	tl, err := r.LookupTool(ctx, name)
	if err != nil {
		t.Fatalf("lookup %s: %v", name, err)
	}
	return tl
}

// call looks a tool up and runs it with args.
func call(t *testing.T, r *Registry, name string, args map[string]any) (tools.Result, error) {
	t.Helper()
	tl := lookup(t, r, name)
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	return tl.Runner.Run(ctx, tools.Call{RunID: "run-1", IdempotencyKey: "run-1/0", Args: args})
}

// eventually polls cond (bounded); for state only the server's own timing
// decides, such as a refreshed tool list.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitLog waits until the registry logged a line containing every sub.
func waitLog(t *testing.T, logs *testkit.LogBuffer, subs ...string) {
	t.Helper()
	eventually(t, "log line with "+strings.Join(subs, ", "), func() bool {
		for _, line := range strings.Split(logs.String(), "\n") {
			if containsAll(line, subs...) {
				return true
			}
		}
		return false
	})
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return string(b)
}
