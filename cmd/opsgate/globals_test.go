package main

import (
	"errors"
	"strings"
	"testing"
)

func TestHoistGlobals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"approvals list", "approvals list"},
		{"--server http://x --token T approvals list", "approvals list --server http://x --token T"},
		{"-server=http://x -o json runs show abc", "runs show abc -server=http://x -o json"},
		{"--json --config c.yaml approvals reject ID --reason r", "approvals reject ID --reason r --json --config c.yaml"},
		{"--token T chat -- --not-a-flag", "chat --token T -- --not-a-flag"},
		{"--help", "--help"},
		{"--version", "--version"},
	} {
		got, err := hoistGlobals(strings.Fields(tc.in))
		if err != nil || strings.Join(got, " ") != tc.want {
			t.Errorf("hoistGlobals(%q) = %q, %v; want %q", tc.in, strings.Join(got, " "), err, tc.want)
		}
	}
	for _, in := range []string{"--limit 5 runs list", "--server", "--server http://x", "--log-level debug serve"} {
		if _, err := hoistGlobals(strings.Fields(in)); !errors.Is(err, errUsage) {
			t.Errorf("hoistGlobals(%q): %v, want a usage error", in, err)
		}
	}
}

// TestGlobalFlagsBeforeTheCommand: --server and --token before the
// command are the command's own (the refused connection names the URL);
// a flag that is not global there is bad usage.
func TestGlobalFlagsBeforeTheCommand(t *testing.T) {
	t.Setenv("OPSGATE_TOKEN", "")
	t.Setenv("OPSGATE_SERVER", "")
	_, errOut, code := runInProcess(t, "--server", "http://127.0.0.1:1", "--token", "x", "runs", "list")
	if code != exitFail || !strings.Contains(errOut, "http://127.0.0.1:1") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	_, errOut, code = runInProcess(t, "--status", "pending", "approvals", "list")
	if code != exitUsage || !strings.Contains(errOut, "put it after the command") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}
