package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/internal/fakellm"
	"github.com/opsgate/opsgate/internal/mcpfake"
	"github.com/opsgate/opsgate/internal/npmtest"
)

// Upstream MCP servers end to end: the real binary, a config file, the
// real @modelcontextprotocol/server-filesystem (pinned in testdata/npm) and
// the misbehaving fake for crashes.

// fsConfig serves a flow that writes a file in root through fs.write_file
// (which asks) and one that reads it through fs.read_text_file (allowed);
// extra is appended to the config (models and agents).
func fsConfig(e *env, root, extra string) {
	bin := npmtest.Bin(e.t, "mcp-server-filesystem")
	e.writeConfig(e.storeYAML(""), fmt.Sprintf(`
engine: {poll_interval: 100ms}
approvers:
  groups:
    sre: ["console:admin"]
mcp_servers:
  - name: fs
    command: [%q, %q]
    tools: ["read_*", "list_*", "write_file"]
flows:
  - name: write
    command: "write {name} {content}"
    steps:
      - tool: fs.write_file
        args: {path: "%s/{{.name}}", content: "{{.content}}"}
  - name: read
    command: "read {name}"
    steps:
      - tool: fs.read_text_file
        args: {path: "%s/{{.name}}"}
policy:
  rules:
    - {match: {tool: "fs.read_*"}, action: allow}
    - {match: {tool: "fs.write_file"}, action: ask, approvers: ["group:sre"]}
approvals:
  allow_self_approval: true
`, bin, root, root, root)+extra)
}

// editAndWait edits approval id of run to write "edited by the approver"
// to target, waits for the run to succeed and checks the file holds the
// edited content.
func editAndWait(t *testing.T, e *env, runID, id, target string) {
	t.Helper()
	edit := map[string]any{"action": "edit", "args": map[string]any{"path": target, "content": "edited by the approver"}}
	if code := e.api("POST", "/api/v1/approvals/"+id+"/decision", edit, nil); code != 200 {
		t.Fatalf("edit: HTTP %d", code)
	}
	done := e.waitRun(runID, "final", func(r testRun) bool { return r.Status == "succeeded" || r.Status == "failed" })
	if done.Status != "succeeded" {
		t.Fatalf("run %s: %+v", done.Status, done.Steps)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "edited by the approver" {
		t.Fatalf("file content %q (%v), want the edited content", b, err)
	}
}

func TestFilesystemWriteOnlyAfterApprovalWithEditedContent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	root := filepath.Join(e.dir, "runbooks")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	fsConfig(e, root, "")
	e.start()

	run := e.message("ops-fs", "write notes.txt proposed")
	id := pendingApproval(t, e, run.ID)
	var a struct {
		Tool    string `json:"tool"`
		Preview string `json:"dry_run_preview"`
		Risk    string `json:"risk"`
	}
	if code := e.api("GET", "/api/v1/approvals/"+id, nil, &a); code != 200 {
		t.Fatalf("GET approval: %d", code)
	}
	if a.Tool != "fs.write_file" || a.Preview != "no dry run: upstream MCP tool" || a.Risk != "reversible" {
		t.Fatalf("approval card: %+v", a)
	}
	target := filepath.Join(root, "notes.txt")
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("the file exists before any decision: %v", err)
	}
	// An edit is validated against the server's own input schema: a
	// missing required field is refused, and nothing is written.
	if code := e.api("POST", "/api/v1/approvals/"+id+"/decision", map[string]any{"action": "edit", "args": map[string]any{"path": target}}, nil); code != 422 {
		t.Fatalf("edit without content: HTTP %d, want 422", code)
	}
	editAndWait(t, e, run.ID, id, target)
	// Reading is allowed by policy: no approval, the output is the file.
	read := e.message("ops-fs-read", "read notes.txt")
	got := e.waitRun(read.ID, "final", func(r testRun) bool { return r.Status == "succeeded" || r.Status == "failed" })
	if got.Status != "succeeded" || len(got.Steps) != 1 || got.Steps[0].ApprovalID != "" || !strings.Contains(got.Steps[0].Output, "edited by the approver") {
		t.Fatalf("read run: %+v", got)
	}
}

// fakeConfig serves flows over the fake's slow tools: "put" is
// idempotent (idempotentHint), "write" is not.
func fakeConfig(e *env, fakeDir string) {
	envYAML, _ := json.Marshal(mcpfake.Env(mcpfake.ModeOK, fakeDir, "fake-secret-123"))
	e.writeConfig(e.storeYAML(""), fmt.Sprintf(`
engine: {poll_interval: 100ms, lease: 2s}
mcp_servers:
  - name: fake
    command: [%q]
    env: %s
flows:
  - {name: put, command: put, steps: [{tool: fake.slow_put}]}
  - {name: write, command: write, steps: [{tool: fake.slow_write}]}
policy:
  default: allow
  rules:
    # slow_write is destructive: it asks under default allow unless a rule allows it.
    - {match: {tool: "fake.*"}, action: allow}
`, os.Args[0], envYAML))
}

// callLines returns the fake's record of tools/call: "<tool> <key> <run>".
func callLines(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "calls.log"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// crashDuringUpstreamCall starts a run whose upstream call blocks, kills
// opsgate with SIGKILL while it is in flight, lets the tool finish, and
// restarts opsgate. It returns the run id.
func crashDuringUpstreamCall(t *testing.T, e *env, fakeDir, text string) string {
	t.Helper()
	fakeConfig(e, fakeDir)
	e.start()
	run := e.message("ops-crash", text)
	e.waitRun(run.ID, "dispatching", func(r testRun) bool { return len(r.Steps) > 0 && r.Steps[0].Status == "dispatching" })
	e.waitFile(filepath.Join(fakeDir, "calls.log")) // the fake has the call, and holds it
	e.kill()
	if err := os.WriteFile(filepath.Join(fakeDir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e.start()
	return run.ID
}

func TestUpstreamIdempotentCallResentWithTheSameKeyAfterCrash(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fakeDir := t.TempDir()
	id := crashDuringUpstreamCall(t, e, fakeDir, "put")
	done := e.waitRun(id, "final", func(r testRun) bool {
		return r.Status == "succeeded" || r.Status == "failed" || r.Status == "interrupted"
	})
	if done.Status != "succeeded" {
		t.Fatalf("idempotent run after a crash: %s %+v", done.Status, done.Steps)
	}
	want := fmt.Sprintf("slow_put %s/0 %s", id, id)
	if lines := callLines(t, fakeDir); len(lines) != 2 || lines[0] != want || lines[1] != want {
		t.Fatalf("calls %q, want twice %q (same idempotency key in _meta)", lines, want)
	}
}

func TestUpstreamNonIdempotentCallInterruptedAfterCrash(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fakeDir := t.TempDir()
	id := crashDuringUpstreamCall(t, e, fakeDir, "write")
	done := e.waitRun(id, "final", func(r testRun) bool {
		return r.Status == "succeeded" || r.Status == "failed" || r.Status == "interrupted"
	})
	if done.Status != "interrupted" {
		t.Fatalf("non-idempotent run after a crash: %s %+v", done.Status, done.Steps)
	}
	if lines := callLines(t, fakeDir); len(lines) != 1 {
		t.Fatalf("calls %q: a non-idempotent upstream call was re-sent", lines)
	}
}

func TestMCPToolsCommandListsWhatServersOffer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	root := filepath.Join(e.dir, "runbooks")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	fsConfig(e, root, "")
	out, errOut, code := e.cli("mcp", "tools")
	if code != 0 {
		t.Fatalf("mcp tools: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"fs (stdio ", "fs.read_text_file", "read", "idempotent", "path: string*",
		"fs.write_file", "reversible", "destructive", "content: string*", "fs.move_file", "not offered: left out by tools globs"} {
		if !strings.Contains(out, want) {
			t.Errorf("listing lacks %q:\n%s", want, out)
		}
	}
	js, _, code := e.cli("mcp", "tools", "--json")
	var servers []struct {
		Name  string `json:"name"`
		Tools []struct {
			Name        string `json:"name"`
			Offered     bool   `json:"offered"`
			Destructive bool   `json:"destructive"`
		} `json:"tools"`
	}
	if err := json.Unmarshal([]byte(js), &servers); err != nil || code != 0 || len(servers) != 1 {
		t.Fatalf("--json: exit %d, %v:\n%s", code, err, js)
	}

	// A server that cannot be reached makes the command fail, with the
	// reason and without its credential.
	bad := newEnv(t)
	bad.writeConfig("", `
mcp_servers:
  - name: gh
    url: "http://127.0.0.1:1/mcp"
    headers: {Authorization: "Bearer ${UPSTREAM_TEST_TOKEN:-tok-from-env-99}"}
    connect_timeout: 5s
`)
	out, errOut, code = bad.cli("mcp", "tools")
	if code != 1 || !strings.Contains(out, "gh (http http://127.0.0.1:1/mcp): unavailable:") || !strings.Contains(out, "connection refused") {
		t.Fatalf("unreachable server: exit %d\n%s\n%s", code, out, errOut)
	}
	if strings.Contains(out+errOut, "tok-from-env-99") {
		t.Fatal("the credential was printed")
	}
}

// The agent variant: an agent on the fake model calls the real
// server-filesystem's write_file. The file is written only after an
// approval, with the approver's edited content, and the model is told the
// arguments were edited and gets the server's result.
func TestAgentFilesystemWriteOnlyAfterApprovalWithEditedContent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	root := filepath.Join(e.dir, "runbooks")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(root, "notes.txt")
	sc := llmServer().Script(t)
	args, _ := json.Marshal(map[string]string{"path": target, "content": "proposed by the model", "reason": "you asked for notes"})
	sc.Push(fakellm.CallTool(agent.WireName("fs.write_file"), string(args)), fakellm.Say("Written."))
	fsConfig(e, root, fmt.Sprintf(`
models:
  - {name: default, provider: openai, base_url: %q, model: test-model, timeout: 10s}
agents:
  - {name: ops, model: default, tools: ["fs.*"], default: true}
`, sc.OpenAIURL()))
	e.start()

	run := e.message("ops-agent-fs", "please write the notes file")
	t.Cleanup(func() {
		if t.Failed() {
			for i, r := range sc.Requests() {
				t.Logf("model request %d:\n%s", i, strings.Join(r.Texts(), "\n"))
			}
		}
	})
	id := pendingApproval(t, e, run.ID)
	var a struct {
		Tool   string `json:"tool"`
		Reason string `json:"reason"`
	}
	if code := e.api("GET", "/api/v1/approvals/"+id, nil, &a); code != 200 || a.Tool != "fs.write_file" || a.Reason != "you asked for notes" {
		t.Fatalf("GET approval: %d %+v", code, a)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("the file exists before any decision: %v", err)
	}
	editAndWait(t, e, run.ID, id, target)
	reqs := sc.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the model got %d requests, want 2", len(reqs))
	}
	if txt := strings.Join(reqs[1].Texts(), "\n"); !strings.Contains(txt, "edited") || !strings.Contains(txt, "console:admin") {
		t.Fatalf("the model was not told who edited the arguments:\n%s", txt)
	}
}
