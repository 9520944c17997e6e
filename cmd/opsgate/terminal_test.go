package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/internal/client"
	"github.com/opsgate/opsgate/internal/fakellm"
	"github.com/opsgate/opsgate/internal/testkit"
)

// The terminal surfaces end to end, against a real `opsgate serve`:
// approvals watch and wait here, the TUI under tmux in tui_test.go.

// termConfig is a deploy flow behind an ask, decided by console:admin (the
// generated token's actor), with the local channel on.
func termConfig(e *env, ttl string) {
	deploy := e.script("deploy.sh", `echo "deployed $1 $2 to $3"`)
	e.writeConfig(e.storeYAML(""), fmt.Sprintf(`engine:
  poll_interval: 100ms
channels:
  local: {enabled: true}
approvers:
  groups:
    sre: ["console:admin"]
tools:
  - name: deploy
    description: Deploy a service version to an environment
    risk: high_impact
    input_schema:
      type: object
      required: [service, version]
      additionalProperties: false
      properties:
        service: {type: string, pattern: "^[a-z0-9][a-z0-9-]*$"}
        version: {type: string, pattern: "^[A-Za-z0-9][A-Za-z0-9._+-]*$"}
        env: {type: string, enum: [staging, prod], default: staging}
    exec:
      command: [%q, "{{.service}}", "{{.version}}", "{{.env}}"]
      dry_run: [%q, "{{.service}}", "{{.version}}", "{{.env}}"]
flows:
  - name: deploy
    command: "deploy {service} {version} {env=staging}"
    steps:
      - tool: deploy
        args: {service: "{{.service}}", version: "{{.version}}", env: "{{.env}}"}
policy:
  rules:
    - {match: {tool: deploy}, action: ask, approvers: ["group:sre"]}
approvals:
  ttl: %s
  allow_self_approval: true
`, deploy, deploy, ttl))
}

// pendingDeploy asks for a deploy in thread and returns its run and
// approval ids once it waits.
func (e *env) pendingDeploy(thread, version string) (runID, approvalID string) {
	e.t.Helper()
	run := e.message(thread, "deploy api "+version)
	r := e.waitStatus(run.ID, "waiting_approval")
	return r.ID, r.Steps[0].ApprovalID
}

// bg is an opsgate CLI process running in the background.
type bg struct {
	cmd          *exec.Cmd
	stdout       *bytes.Buffer
	stderr       *testkit.LogBuffer
	done         chan struct{}
	lines        chan string
	stdoutClosed chan struct{}
}

func (e *env) startCLI(args ...string) *bg {
	e.t.Helper()
	cmd := exec.Command(binPath, append(args, "--config", e.cfgPath)...)
	cmd.Dir = e.dir
	cmd.Env = append(os.Environ(), "OPSGATE_TOKEN=", "OPSGATE_SERVER=", "OPSGATE_CONFIG=")
	p := &bg{cmd: cmd, stdout: &bytes.Buffer{}, stderr: &testkit.LogBuffer{}, done: make(chan struct{}), lines: make(chan string, 100),
		stdoutClosed: make(chan struct{})}
	out, err := cmd.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() {
		defer close(p.stdoutClosed)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.stdout.WriteString(sc.Text() + "\n")
			p.lines <- sc.Text()
		}
	}()
	go func() { <-p.stdoutClosed; _ = cmd.Wait(); close(p.done) }()
	e.t.Cleanup(func() { _ = cmd.Process.Kill(); <-p.done })
	return p
}

// exit waits for the process and returns its exit code.
func (p *bg) exit(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(waitBound):
		t.Fatalf("%v still running after %s; stderr %s", p.cmd.Args, waitBound, p.stderr)
	}
	return p.cmd.ProcessState.ExitCode()
}

func (p *bg) line(t *testing.T) string {
	t.Helper()
	select {
	case l := <-p.lines:
		return l
	case <-time.After(waitBound):
		t.Fatalf("%v printed no line within %s; stderr %s", p.cmd.Args, waitBound, p.stderr)
	}
	return ""
}

func TestApprovalsWatchAndWait(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	termConfig(e, "1h")
	e.start()

	t.Run("WatchPrintsEachNewApprovalOnce", func(t *testing.T) {
		_, first := e.pendingDeploy("watch-1", "1.0.0")
		w := e.startCLI("approvals", "watch", "--count", "2")
		// The one pending at start, then the new one; never twice.
		l := w.line(t)
		f := strings.Split(l, "\t")
		if len(f) != 7 || f[0] != first || f[1] != "deploy" || f[2] != "high_impact" || f[3] != "console:admin" ||
			f[4] != "console:watch-1" || f[6] != `{"env":"staging","service":"api","version":"1.0.0"}` {
			t.Fatalf("first line %q", l)
		}
		if _, err := time.Parse(time.RFC3339Nano, f[5]); err != nil {
			t.Fatalf("expires_at %q: %v", f[5], err)
		}
		_, second := e.pendingDeploy("watch-2", "1.0.1")
		if l := w.line(t); !strings.HasPrefix(l, second+"\tdeploy\t") {
			t.Fatalf("second line %q, want approval %s", l, second)
		}
		if code := w.exit(t); code != 0 {
			t.Fatalf("watch --count 2: exit %d, stderr %s", code, w.stderr)
		}
		e.mustCLI("approvals", "reject", first)
		e.mustCLI("approvals", "reject", second)
	})
	t.Run("WatchNewJSON", func(t *testing.T) {
		_, old := e.pendingDeploy("watch-3", "1.0.2")
		w := e.startCLI("approvals", "watch", "--new", "--count", "1", "--json")
		// --new: the one already pending is not printed; the next one is,
		// as the API's JSON. Wait until watch has seen the queue: a new
		// approval asked before it connected would count as old.
		w.waitStderr(t, "1 pending")
		_, fresh := e.pendingDeploy("watch-4", "1.0.3")
		var ap map[string]any
		if err := json.Unmarshal([]byte(w.line(t)), &ap); err != nil || ap["id"] != fresh || ap["status"] != "pending" {
			t.Fatalf("--json line for %s (not %s): %v %v", fresh, old, ap, err)
		}
		if code := w.exit(t); code != 0 {
			t.Fatalf("exit %d", code)
		}
		e.mustCLI("approvals", "reject", old)
		e.mustCLI("approvals", "reject", fresh)
	})

	waitCase := func(t *testing.T, version string, decide func(runID, approvalID string), wantCode int, wantOut string) {
		t.Helper()
		runID, id := e.pendingDeploy("wait-"+version, version)
		w := e.startCLI("approvals", "wait", id[:12])
		decide(runID, id)
		code := w.exit(t)
		if code != wantCode || !strings.HasPrefix(w.stdout.String(), wantOut) {
			t.Fatalf("wait: exit %d, stdout %q, stderr %q; want exit %d and %q", code, w.stdout, w.stderr, wantCode, wantOut)
		}
	}
	t.Run("WaitApprovedExits0", func(t *testing.T) {
		waitCase(t, "2.0.0", func(_, id string) { e.mustCLI("approvals", "approve", id) }, 0, "approved ")
	})
	t.Run("WaitEditedExits0WithTheArgs", func(t *testing.T) {
		waitCase(t, "2.0.1", func(_, id string) {
			e.mustCLI("approvals", "edit", id, "--args", `{"service":"api","version":"2.0.9"}`)
		}, 0, "edited ")
	})
	t.Run("WaitRejectedExits1", func(t *testing.T) {
		waitCase(t, "2.0.2", func(_, id string) { e.mustCLI("approvals", "reject", id, "--reason", "freeze") }, 1, "rejected ")
	})
	t.Run("WaitCancelledExits4", func(t *testing.T) {
		waitCase(t, "2.0.3", func(runID, _ string) { e.mustCLI("runs", "cancel", runID) }, 4, "cancelled ")
	})
	t.Run("WaitAlreadyDecided", func(t *testing.T) {
		_, id := e.pendingDeploy("wait-done", "2.0.4")
		e.mustCLI("approvals", "reject", id)
		out, _, code := e.cli("approvals", "wait", id)
		if code != 1 || !strings.HasPrefix(out, "rejected "+id+" by console:admin") {
			t.Fatalf("exit %d, %q", code, out)
		}
	})
	t.Run("WaitTimeoutExits6", func(t *testing.T) {
		_, id := e.pendingDeploy("wait-timeout", "2.0.5")
		_, errOut, code := e.cli("approvals", "wait", id, "--timeout", "300ms")
		if code != 6 || !strings.Contains(errOut, "still pending after 300ms") {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
		e.mustCLI("approvals", "reject", id)
	})
	t.Run("WaitUnknownExits5", func(t *testing.T) {
		_, errOut, code := e.cli("approvals", "wait", "ffffffff-0000-0000-0000-000000000000")
		if code != 5 || !strings.Contains(errOut, "404") {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
		if _, _, code := e.cli("approvals", "wait"); code != 2 {
			t.Fatalf("wait without an id: exit %d, want 2", code)
		}
	})
}

// waitStderr waits until the process wrote want to stderr.
func (p *bg) waitStderr(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for !strings.Contains(p.stderr.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("%v: stderr %q lacks %q after %s", p.cmd.Args, p.stderr, want, waitBound)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestApprovalsWaitExpiredExits3(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	termConfig(e, "1s")
	e.start()
	// The approval may expire before a poll sees the run waiting on it (a
	// loaded machine can take longer than its 1 s): wait for the approval
	// to exist, whatever its state, and let `approvals wait` judge it.
	run := e.message("wait-expire", "deploy api 3.0.0")
	r := e.waitRun(run.ID, "holding an approval", func(r testRun) bool { return len(r.Steps) > 0 && r.Steps[0].ApprovalID != "" })
	id := r.Steps[0].ApprovalID
	out, errOut, code := e.cli("approvals", "wait", id)
	if code != 3 || !strings.HasPrefix(out, "expired "+id) {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestChatDecidesInPlace: `opsgate chat` over a pipe against a real
// server — a request typed in a local thread runs as the token's actor,
// its card comes back inline, a bad edit is refused next to its field, an
// approval in place lets the run finish, and the result is printed before
// the session ends with its input.
func TestChatDecidesInPlace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	termConfig(e, "1h")
	e.start()
	cmd := exec.Command(binPath, "chat", "--thread", "dev-1", "--config", e.cfgPath)
	cmd.Dir = e.dir
	cmd.Env = append(os.Environ(), "OPSGATE_TOKEN=", "OPSGATE_SERVER=", "OPSGATE_CONFIG=")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &testkit.LogBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 200)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var transcript []string
	until := func(what string, match func(string) bool) string {
		t.Helper()
		deadline := time.After(waitBound)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("chat ended before %s; stderr %s\n%s", what, stderr, strings.Join(transcript, "\n"))
				}
				transcript = append(transcript, l)
				if match(l) {
					return l
				}
			case <-deadline:
				t.Fatalf("no %s after %s:\n%s", what, waitBound, strings.Join(transcript, "\n"))
			}
		}
	}
	until("the banner", func(l string) bool { return strings.HasPrefix(l, "opsgate chat in local:dev-1 at http://127.0.0.1:") })
	fmt.Fprintln(stdin, "deploy api 1.2.3")
	until("the card", func(l string) bool { return strings.HasPrefix(l, "┌ Approval needed: deploy") })
	until("the card's decision line", func(l string) bool { return strings.HasPrefix(l, "└ /approve") })
	fmt.Fprintln(stdin, "/edit version=-1")
	until("the edit's refusal", func(l string) bool { return strings.HasPrefix(l, "✗ edit refused:") && strings.Contains(l, "422") })
	fmt.Fprintln(stdin, "/approve")
	until("the approval", func(l string) bool { return strings.HasSuffix(l, "] approved") })
	until("the card's outcome", func(l string) bool {
		return strings.HasPrefix(l, "✓ [") && strings.Contains(l, "Approved by console:admin")
	})
	until("the result", func(l string) bool { return strings.Contains(l, "deployed api 1.2.3 to staging") })
	stdin.Close()
	for range lines {
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("chat: %v; stderr %s", err, stderr)
	}
	// It ran in the local thread as the token's actor, decided via local.
	var runs struct {
		Items []struct {
			ID, Thread, Requester, Status string
		} `json:"items"`
	}
	e.api("GET", "/api/v1/runs?thread=local:dev-1", nil, &runs)
	if len(runs.Items) != 1 || runs.Items[0].Requester != "console:admin" || runs.Items[0].Status != "succeeded" {
		t.Fatalf("runs %+v", runs.Items)
	}
	r := e.run(runs.Items[0].ID)
	var ap struct {
		Decisions []struct{ Actor, Channel, Action string } `json:"decisions"`
	}
	e.api("GET", "/api/v1/approvals/"+r.Steps[0].ApprovalID, nil, &ap)
	if len(ap.Decisions) != 1 || ap.Decisions[0].Channel != "local" || ap.Decisions[0].Action != "approve" {
		t.Fatalf("decisions %+v", ap.Decisions)
	}
	// Bad usage is exit 2.
	if _, _, code := e.cli("chat", "--thread", "a\nb"); code != 2 {
		t.Fatalf("chat --thread with a line break: exit %d", code)
	}
}

// The terminal surfaces' client against the real server: a run waiting on
// an agent's ask_user lists the question in pending_actions (what opsgate
// tui shows), and the client's answer continues the turn.
func TestTerminalClientAnswersAnAgentQuestion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sc := llmServer().Script(t)
	sc.Push(fakellm.CallTool("ask_user", `{"questions":[{"id":"env","kind":"choice","text":"Which environment?","choices":["staging","prod"]}]}`),
		fakellm.Say("Using staging."))
	e.writeConfig(e.storeYAML(""), fmt.Sprintf(`
engine: {poll_interval: 100ms}
models:
  - {name: default, provider: openai, base_url: %q, model: test-model, timeout: 10s}
agents:
  - {name: ops, model: default, tools: [], default: true}
`, sc.OpenAIURL()))
	e.start()
	run := e.message("tui-agent", "ship it somewhere")
	e.waitStatus(run.ID, "waiting_input")
	c, err := client.New(e.baseURL(), e.token())
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Run(t.Context(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.PendingActions) != 1 || r.PendingActions[0].Kind != "question" || len(r.PendingActions[0].Questions) != 1 ||
		r.PendingActions[0].Questions[0].Text != "Which environment?" || client.Time(r.PendingActions[0].ExpiresAt).IsZero() {
		t.Fatalf("pending actions %+v", r.PendingActions)
	}
	if _, err := c.Answer(t.Context(), run.ID, r.PendingActions[0].ID, []client.QuestionAnswer{{QuestionID: "env", Answer: "staging"}}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(run.ID, "succeeded")
	if reqs := sc.Requests(); len(reqs) != 2 || !strings.Contains(strings.Join(reqs[1].Texts(), "\n"), `"answer":"staging"`) {
		t.Fatalf("the model did not get the answer (%d requests)", len(reqs))
	}
}
