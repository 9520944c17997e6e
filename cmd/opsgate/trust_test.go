package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/opsgate/opsgate/approvals"
)

const (
	trustAdminToken = "admin-token-0123456789abcdef"
	trustBobToken   = "bob-token-0123456789abcdef"
)

// trustConfig: admin asks, bob (and, unless dropBob, admin) approve; scale
// is an external tool quorum-1 rules can grant for; deploy high_impact.
func trustConfig(e *env, dropBob bool) {
	scale := e.script("scale.sh", `echo "scaled $1 to $2"`+"\n")
	sre := `["console:admin", "console:bob"]`
	if dropBob {
		sre = `["console:admin"]`
	}
	e.writeConfig(e.storeYAML(""), fmt.Sprintf(`
engine:
  poll_interval: 100ms
api:
  tokens:
    - {name: admin, token: %q, actor: "console:admin"}
    - {name: bob, token: %q, actor: "console:bob"}
channels:
  console: {enabled: true}
approvers:
  groups:
    sre: %s
tools:
  - name: scale
    risk: external
    input_schema:
      type: object
      required: [service, n]
      properties:
        service: {type: string, pattern: "^[a-z0-9-]+$"}
        n: {type: string, pattern: "^[0-9]+$"}
    exec:
      command: [%q, "{{.service}}", "{{.n}}"]
      timeout: 10s
flows:
  - name: scale
    command: "scale {service} {n}"
    steps:
      - tool: scale
        args: {service: "{{.service}}", n: "{{.n}}"}
policy:
  rules:
    - {match: {tool: scale}, action: ask, approvers: ["group:sre"], escalation: [{after: 30m, remind: true}, {after: 3h, outcome: deny}]}
`, trustAdminToken, trustBobToken, sre, scale))
}

// call makes one API request with token and decodes a 2xx answer.
func (e *env) call(token, method, path string, body, out any) (int, string) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, e.baseURL()+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(data, out); err != nil {
			e.t.Fatalf("decode %s: %v", data, err)
		}
	}
	return resp.StatusCode, string(data)
}

// ask posts "scale api <n>" as admin and waits for its approval id.
func (e *env) ask(n string) (runID, approvalID string) {
	e.t.Helper()
	var resp struct {
		Run *testRun `json:"run"`
	}
	if code, body := e.call(trustAdminToken, "POST", "/api/v1/messages", map[string]string{"thread": "ops", "text": "scale api " + n}, &resp); resp.Run == nil {
		e.t.Fatalf("message: %d %s", code, body)
	}
	deadline := time.Now().Add(waitBound)
	for {
		var r testRun
		e.call(trustAdminToken, "GET", "/api/v1/runs/"+resp.Run.ID, nil, &r)
		if r.Status == "waiting_approval" && len(r.Steps) > 0 && r.Steps[0].ApprovalID != "" {
			return r.ID, r.Steps[0].ApprovalID
		}
		if r.Status == "succeeded" {
			return r.ID, ""
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("run %s: %+v", r.ID, r)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// succeeded waits, asking with the trust config's admin token, until the
// run succeeded.
func (e *env) succeeded(run string) {
	e.t.Helper()
	deadline := time.Now().Add(waitBound)
	for {
		var r testRun
		e.call(trustAdminToken, "GET", "/api/v1/runs/"+run, nil, &r)
		if r.Status == "succeeded" {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("run %s: %+v", run, r)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitLog waits until the server log contains s.
func (e *env) waitLog(s string) {
	e.t.Helper()
	deadline := time.Now().Add(waitBound)
	for !strings.Contains(e.srv.logs.String(), s) {
		if time.Now().After(deadline) {
			e.t.Fatalf("server log never said %q:\n%s", s, e.srv.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAttack_RemovedApproverDecidesAfterReload: bob leaves the team, the
// operator edits the config and sends SIGHUP; bob's click on the card he
// already got is refused. A broken file is refused and changes nothing.
func TestAttack_RemovedApproverDecidesAfterReload(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	trustConfig(e, false)
	e.start()
	_, ap := e.ask("3")
	trustConfig(e, true)
	_ = e.srv.cmd.Process.Signal(syscall.SIGHUP)
	e.waitLog("configuration reloaded")
	code, body := e.call(trustBobToken, "POST", "/api/v1/approvals/"+ap+"/decision", map[string]string{"action": "approve"}, nil)
	if code != 403 || !strings.Contains(body, "not_approver") {
		t.Fatalf("removed approver: %d %s", code, body)
	}
	// A file with a problem is refused; the reloaded configuration stays.
	if err := os.WriteFile(e.cfgPath, []byte("server:\n  listen: [nope]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = e.srv.cmd.Process.Signal(syscall.SIGHUP)
	e.waitLog("config reload refused")
	if code, body := e.call(trustBobToken, "POST", "/api/v1/approvals/"+ap+"/decision", map[string]string{"action": "approve"}, nil); code != 403 {
		t.Fatalf("after a refused reload: %d %s", code, body)
	}
	// The reloads are in the audit log.
	var page struct {
		Items []struct{ Kind string } `json:"items"`
	}
	e.call(trustAdminToken, "GET", "/api/v1/audit?limit=1000", nil, &page)
	kinds := map[string]bool{}
	for _, it := range page.Items {
		kinds[it.Kind] = true
	}
	if !kinds["config.reloaded"] || !kinds["config.reload_refused"] {
		t.Fatalf("audit kinds %v", kinds)
	}
}

// TestGrantsCLI: approve with scope forever from the CLI, see the grant,
// a later identical call runs unasked, revoke it, the next one asks.
func TestGrantsCLI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	trustConfig(e, false)
	e.start()
	cli := func(args ...string) string {
		t.Helper()
		return e.mustCLI(append(args, "--token", trustBobToken)...)
	}
	run, ap := e.ask("4")
	cli("approvals", "approve", ap, "--scope", "forever")
	e.succeeded(run)
	out := cli("grants", "list")
	if !strings.Contains(out, approvals.GrantID(ap)) || !strings.Contains(out, `exactly {"n":"4","service":"api"}`) {
		t.Fatalf("grants list:\n%s", out)
	}
	if _, ap2 := e.ask("4"); ap2 != "" {
		t.Fatalf("a call the forever grant covers asked again (%s)", ap2)
	}
	if out := cli("grants", "revoke", approvals.GrantID(ap)); !strings.Contains(out, "revoked") {
		t.Fatalf("revoke: %s", out)
	}
	if _, ap3 := e.ask("4"); ap3 == "" {
		t.Fatal("a revoked grant still covers")
	}
	if out := cli("grants", "list", "--all"); !strings.Contains(out, "revoked") {
		t.Fatalf("grants list --all:\n%s", out)
	}
}

// TestGrantsCLISessionFor: `approvals show` tells the ladder, what happens
// next and what each scope would save; approving with --scope session
// --for says what the grant covers before it is saved; the grant lists its
// end; --for where it does not apply is a usage error.
func TestGrantsCLISessionFor(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	trustConfig(e, false)
	e.start()
	cli := func(args ...string) string {
		t.Helper()
		return e.mustCLI(append(args, "--token", trustBobToken)...)
	}
	run, ap := e.ask("5")
	out := cli("approvals", "show", ap)
	for _, want := range []string{"after 30m0s: remind", "after 3h0m0s: deny", "next      the approvers are reminded at",
		"scope     saves a task grant: this run's calls of scale", "scope     saves a session grant: console:admin's in console:ops, calls of scale"} {
		if !strings.Contains(out, want) {
			t.Fatalf("approvals show lacks %q:\n%s", want, out)
		}
	}
	if _, errOut, code := e.cli("approvals", "approve", ap, "--scope", "task", "--for", "1h", "--token", trustBobToken); code != 2 || !strings.Contains(errOut, "--for goes with --scope session or forever") {
		t.Fatalf("--for with task: %d %s", code, errOut)
	}
	out = cli("approvals", "approve", ap, "--scope", "session", "--for", "20m")
	if !strings.Contains(out, "saves a session grant: console:admin's in console:ops, calls of scale") || !strings.Contains(out, "for 20m") ||
		!strings.Contains(out, "is now approved") {
		t.Fatalf("approve --scope session --for:\n%s", out)
	}
	e.succeeded(run)
	out = cli("grants", "list")
	if !strings.Contains(out, approvals.GrantID(ap)) || !strings.Contains(out, "console:admin in console:ops") || strings.Contains(out, "when revoked") {
		t.Fatalf("grants list:\n%s", out)
	}
}

// TestAttack_ResealedAuditChainVerifies: someone with write access to the
// database rewrote a decision and re-sealed the chain with the public
// algorithm; `audit verify` used to say intact. The key file is private,
// and --expect catches a chain cut back to an older head.
func TestAttack_ResealedAuditChainVerifies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	deployConfig(e, "")
	e.start()
	run := e.message("ops-9", "deploy api 9.0.0")
	id := pendingApproval(t, e, run.ID)
	e.mustCLI("approvals", "approve", id)
	e.waitStatus(run.ID, "succeeded")
	e.stop()

	keyPath := filepath.Join(e.dir, "data", "audit.key")
	if st, err := os.Stat(keyPath); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("audit key: %v, mode %v", err, st)
	}
	out := e.mustCLI("audit", "verify")
	var seq int64
	var hash string
	if _, err := fmt.Sscanf(out[strings.Index(out, "head: seq "):], "head: seq %d, hash %s", &seq, &hash); err != nil || !strings.HasPrefix(hash, "hmac:") {
		t.Fatalf("head of %q: %v", out, err)
	}
	if out := e.mustCLI("audit", "verify", "--expect", fmt.Sprintf("%d:%s", seq, hash)); !strings.Contains(out, "unchanged") {
		t.Fatalf("--expect the current head: %s", out)
	}

	db, err := sql.Open("sqlite", filepath.Join(e.dir, "data", "opsgate.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT seq, at, kind, actor, run_id, approval_id, tool, detail, prev_hash, hash FROM audit ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	var all []approvals.AuditEntry
	for rows.Next() {
		var en approvals.AuditEntry
		var at int64
		var detail sql.NullString
		if err := rows.Scan(&en.Seq, &at, &en.Kind, &en.Actor, &en.RunID, &en.ApprovalID, &en.Tool, &detail, &en.PrevHash, &en.Hash); err != nil {
			t.Fatal(err)
		}
		en.At = time.UnixMicro(at).UTC()
		en.Detail = json.RawMessage(detail.String)
		all = append(all, en)
	}
	rows.Close()
	// Rewrite the decision and re-seal everything from it on.
	prev := ""
	for i := range all {
		en := &all[i]
		if en.Kind == "approval.decided" {
			en.Detail = json.RawMessage(strings.Replace(string(en.Detail), `"approved"`, `"rejected"`, 1))
		}
		en.Seal(en.Seq, prev)
		prev = en.Hash
		if _, err := db.Exec(`UPDATE audit SET detail = ?, prev_hash = ?, hash = ? WHERE seq = ?`, string(en.Detail), en.PrevHash, en.Hash, en.Seq); err != nil {
			t.Fatal(err)
		}
	}
	out, _, code := e.cli("audit", "verify")
	if code != 1 || !strings.Contains(out, "ALTERED") {
		t.Fatalf("re-sealed chain: exit %d\n%s", code, out)
	}
}

// TestAuditKeyMismatchRefusesToStart: a replica with a key the chain was
// not sealed with does not start.
func TestAuditKeyMismatchRefusesToStart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	deployConfig(e, "")
	e.start()
	run := e.message("ops-1", "deploy api 1.0.0")
	pendingApproval(t, e, run.ID) // the chain now holds keyed entries
	e.stop()
	keyPath := filepath.Join(e.dir, "data", "audit.key")
	if err := os.WriteFile(keyPath, []byte(strings.Repeat("cd", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runBounded(t, e.dir, "serve", "--config", e.cfgPath)
	if code == 0 || !strings.Contains(out+errOut, "different key") {
		t.Fatalf("serve with another audit key: exit %d\n%s%s", code, out, errOut)
	}
	// A key others may read is refused too.
	if err := os.Chmod(keyPath, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := runOpsgate(t, e.dir, []string{"audit", "verify", "--config", e.cfgPath}); code == 0 || !strings.Contains(out+errOut, "mode") {
		t.Fatalf("verify with a world-readable key: exit %d\n%s%s", code, out, errOut)
	}
}

// TestAuditVerifyExpectCatchesCutBack: entries removed from the end leave
// an intact chain; the recorded head says so.
func TestAuditVerifyExpectCatchesCutBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	deployConfig(e, "")
	e.start()
	run := e.message("ops-2", "deploy api 2.0.0")
	pendingApproval(t, e, run.ID)
	e.stop()
	out := e.mustCLI("audit", "verify")
	var seq int64
	var hash string
	fmt.Sscanf(out[strings.Index(out, "head: seq "):], "head: seq %d, hash %s", &seq, &hash)
	db, err := sql.Open("sqlite", filepath.Join(e.dir, "data", "opsgate.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`DELETE FROM audit WHERE seq = ?`, seq); err != nil {
		t.Fatal(err)
	}
	out, _, code := e.cli("audit", "verify", "--expect", fmt.Sprintf("%d:%s", seq, hash))
	if code != 1 || !strings.Contains(out, "no longer in the chain") {
		t.Fatalf("--expect after the head was removed: exit %d\n%s", code, out)
	}
	if _, errOut, code := e.cli("audit", "verify", "--expect", "nope"); code != 2 || !strings.Contains(errOut, "SEQ:HASH") {
		t.Fatalf("bad --expect: exit %d %s", code, errOut)
	}
}

// runBounded runs the binary like runOpsgate, but kills it after waitBound:
// a command expected to fail at once must not hang the suite if it starts.
func runBounded(t *testing.T, dir string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "OPSGATE_TOKEN=", "OPSGATE_SERVER=", "OPSGATE_CONFIG=")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("opsgate %v still running after %s:\n%s%s", args, waitBound, out.String(), errb.String())
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run opsgate %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}
