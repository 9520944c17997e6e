package mcp

import (
	"context"
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
