package mcp

import (
	"bufio"
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/internal/npmtest"
)

// TestTypeScriptClient runs the official TypeScript SDK's client
// (testdata/npm/mcp-client.mjs) against this package's real server: the
// tool list, each tool, an agent task, an elicitation, the approval
// refusal.
func TestTypeScriptClient(t *testing.T) {
	t.Parallel()
	npmtest.Bin(t, "inspector") // the same npm ci installs the SDK
	dir := npmtest.Dir(t)
	c := connect(t, agentToken)
	qRun, qID := waitingRun(t, c, twoQuestions)
	aRun := c.mustOK("flow", map[string]any{"flowName": "deploy", "intent": "ts 1.0"}).obj("run")["id"].(string)
	waitRun(t, aRun, core.RunWaitingApproval)
	as, _, err := theEnv.store.ApprovalList(context.Background(), approvals.ApprovalListParams{RunID: aRun})
	if err != nil || len(as) != 1 {
		t.Fatal(as, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "mcp-client.mjs"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "OPSGATE_MCP_URL="+theEnv.url+PathExternal, "OPSGATE_TOKEN="+agentToken,
		"OPSGATE_QUESTION_RUN="+qRun, "OPSGATE_QUESTION_ID="+qID, "OPSGATE_APPROVAL_RUN="+aRun, "OPSGATE_APPROVAL_ID="+as[0].ID)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil || !strings.Contains(string(out), "PASS (0 failed)") {
		t.Fatalf("TypeScript client: %v", err)
	}
	if theEnv.qs.answer(qID) == nil {
		t.Fatal("the form's answer did not reach the engine")
	}
}

// TestInspectorStrict runs the MCP Inspector's CLI with --strict against
// every endpoint: its schema portability lint must find nothing (no
// error, no warning).
func TestInspectorStrict(t *testing.T) {
	t.Parallel()
	bin := npmtest.Bin(t, "inspector")
	for _, ep := range []struct{ path, token string }{{PathExternal, adminToken}, {PathCodex, agentToken}, {PathInternal, studioToken}, {PathStudio, studioToken}} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, "node", bin, "--cli", theEnv.url+ep.path, "--transport", "http",
			"--header", "Authorization: Bearer "+ep.token, "--method", "tools/list", "--strict")
		cmd.Dir = t.TempDir()
		cmd.Env = append(os.Environ(), "HOME="+cmd.Dir, "MCP_CATALOG_PATH="+filepath.Join(cmd.Dir, "mcp.json"))
		out, err := cmd.CombinedOutput()
		cancel()
		s := string(out)
		if err != nil || strings.Contains(s, "Schema portability") || strings.Contains(s, "Warning:") || strings.Contains(s, "Error:") ||
			!strings.Contains(s, `"list_workflows"`) {
			t.Errorf("inspector --strict on %s: %v\n%s", ep.path, err, s)
		}
	}
}

// TestTypeScriptTasks runs the official TypeScript SDK at 2026-07-28 with
// the official Tasks requester (testdata/npm/mcp-tasks.mjs) against this
// package's server and a second server over the same store (a restart,
// another replica): a task created, handed off, resumed on the other
// server and polled to its end; the approver's URL elicitation of the
// approval's console page. The script never decides: this test decides as
// the person would in the console when the script says the task waits.
func TestTypeScriptTasks(t *testing.T) {
	t.Parallel()
	npmtest.Bin(t, "inspector")
	dir := npmtest.Dir(t)
	other, err := New(Options{Engine: theEnv.eng, Store: theEnv.store, StateKey: testKey, PublicURL: "https://ops.example.com",
		Tokens: []Token{{Name: "claude", Token: agentToken, Actor: "agent:claude"}}, Flows: flowsOf(testFlows)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(other.Routes()[PathExternal])
	defer hs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "mcp-tasks.mjs"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "OPSGATE_MCP_URL="+theEnv.url+PathExternal, "OPSGATE_MCP_URL_B="+hs.URL+PathExternal,
		"OPSGATE_TOKEN="+agentToken, "OPSGATE_APPROVER_TOKEN="+aliceToken)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	decided := map[string]bool{}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		out.WriteString(line + "\n")
		word, rest, _ := strings.Cut(line, " ")
		switch word {
		case "RESUMED":
			task, err := theEnv.store.MCPTaskGet(context.Background(), rest)
			if err != nil || decided[rest] {
				t.Errorf("task %q: %v (decided before: %v)", rest, err, decided[rest])
				continue
			}
			decided[rest] = true
			r, _ := theEnv.store.RunGet(context.Background(), task.RunID)
			if r == nil || r.Status != core.RunWaitingApproval {
				t.Errorf("task %s's run: %+v", rest, r)
				continue
			}
			approve(t, task.RunID) // as console:alice, in the console
		case "URL":
			// The approval's console page: alice requested this call, so
			// in the console she may reject it, never approve it.
			id := rest[strings.LastIndexByte(rest, '/')+1:]
			if decided[id] {
				continue // offered again on a later poll
			}
			decided[id] = true
			if _, err := theEnv.eng.Decide(context.Background(), core.Actor{ID: "console:alice"}, "console",
				core.Decision{ApprovalID: id, Action: approvals.ActionReject, Scope: approvals.ScopeCall, Reason: "not now"}); err != nil {
				t.Errorf("reject %s as alice: %v", id, err)
			}
		}
	}
	err = cmd.Wait()
	t.Logf("%s%s", out.String(), stderr.String())
	if err != nil || !strings.Contains(out.String(), "PASS (0 failed)") {
		t.Fatalf("TypeScript tasks client: %v", err)
	}
}
