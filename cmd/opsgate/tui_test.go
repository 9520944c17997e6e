package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core/shortid"
)

// tmuxPane is one tmux server of the test's own (-L socket), running one
// 80×24 window, so nothing of the machine's own tmux is touched.
type tmuxPane struct {
	t      *testing.T
	socket string
}

// needTmux finds tmux: without it the test skips, loudly, unless CI is
// set, where .ci/run installs it and a missing tmux is a failure.
func needTmux(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("tmux")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("tmux is not installed (CI is set; .ci/run installs it): %v", err)
		}
		t.Skipf("SKIP: tmux is not installed (apt-get install tmux); the TUI's end-to-end test needs it")
	}
	return p
}

func (e *env) startTmux(tmux string, args ...string) *tmuxPane {
	e.t.Helper()
	p := &tmuxPane{t: e.t, socket: fmt.Sprintf("opsgate-test-%d-%d", os.Getpid(), e.port)}
	// The command runs in a clean opsgate environment, and waits after the
	// TUI exits so the pane can still be read.
	cmdline := "env OPSGATE_TOKEN= OPSGATE_SERVER= OPSGATE_CONFIG= TERM=xterm-256color " + shellQuote(binPath)
	for _, a := range args {
		cmdline += " " + shellQuote(a)
	}
	cmdline += "; echo TUI-EXITED $?; sleep 600"
	// 80×32: a finished run's page (its steps, a timeline that now shows
	// the step's progress lines, and where the time went) fits unscrolled.
	cmd := exec.Command(tmux, "-L", p.socket, "-f", "/dev/null", "new-session", "-d", "-x", "80", "-y", "32", "-c", e.dir, cmdline)
	cmd.Env = append(os.Environ(), "TMUX=")
	if out, err := cmd.CombinedOutput(); err != nil {
		e.t.Fatalf("tmux new-session: %v: %s", err, out)
	}
	e.t.Cleanup(func() { _ = exec.Command(tmux, "-L", p.socket, "kill-server").Run() })
	return p
}

func (p *tmuxPane) tmux(args ...string) string {
	p.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", p.socket}, args...)...).CombinedOutput()
	if err != nil {
		p.t.Fatalf("tmux %v: %v: %s", args, err, out)
	}
	return string(out)
}

// capture is the pane's text as a person sees it.
func (p *tmuxPane) capture() string { return p.tmux("capture-pane", "-p", "-t", "0") }

// keys types into the pane (tmux key names: "Enter", "Tab", or text).
func (p *tmuxPane) keys(keys ...string) { p.tmux(append([]string{"send-keys", "-t", "0"}, keys...)...) }

// waitFor waits until the pane shows every one of subs.
func (p *tmuxPane) waitFor(subs ...string) string {
	p.t.Helper()
	deadline := time.Now().Add(waitBound)
	for {
		s := p.capture()
		ok := true
		for _, sub := range subs {
			ok = ok && strings.Contains(s, sub)
		}
		if ok {
			return s
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("pane does not show %q after %s:\n%s", subs, waitBound, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTUIUnderTmux: a real server and the real binary in an 80×24 tmux
// pane. A pending deploy shows up in the queue live; "a" asks and only
// Enter approves it (one key never decides), recorded with channel tui;
// the run succeeds and the runs view shows it; a reject reason typed in
// one chunk keeps every word ("up", "left").
// OPSGATE_UPDATE_SCREENSHOTS=1 writes the captures to artifacts/terminal/.
func TestTUIUnderTmux(t *testing.T) {
	t.Parallel()
	tmux := needTmux(t)
	e := newEnv(t)
	termConfig(e, "1h")
	e.start()
	captures := map[string]string{}

	p := e.startTmux(tmux, "tui", "--config", e.cfgPath)
	p.waitFor("WAITING FOR A HUMAN (0)", "● live", "console:admin")
	captures["tui-empty.txt"] = p.capture()

	// Asked after the TUI started: it arrives over the change feed.
	runID, approvalID := e.pendingDeploy("ops-1", "1.2.3")
	captures["tui-queue.txt"] = p.waitFor("WAITING FOR A HUMAN (1)", "deploy env=staging service=api version=1.2.3", "high_impact", "59m")

	p.keys("Enter")
	captures["tui-detail.txt"] = p.waitFor("APPROVAL "+approvalID, "who decides group:sre", "dry run", "you (console:admin) may decide")
	p.keys("e")
	captures["tui-edit.txt"] = p.waitFor("EDIT deploy", "service*", "one of staging, prod")
	p.keys("Escape")
	p.waitFor("APPROVAL " + approvalID)

	// One key never decides: "a" asks, Enter approves.
	p.keys("a")
	captures["tui-confirm.txt"] = p.waitFor("approve deploy env=staging service=api version=1.2.3 (high_impact)?", "enter approves · esc cancels")
	if r := e.run(runID); r.Status != "waiting_approval" {
		t.Fatalf("one key moved the run to %s", r.Status)
	}
	p.keys("Enter")
	p.waitFor("approved "+shortid.Of(approvalID), "WAITING FOR A HUMAN (0)")
	r := e.waitStatus(runID, "succeeded")
	if !strings.Contains(r.Steps[0].Output, "deployed api 1.2.3 to staging") {
		t.Fatalf("run output %q", r.Steps[0].Output)
	}
	var ap struct {
		Decisions []struct {
			Actor   string `json:"actor"`
			Channel string `json:"channel"`
			Action  string `json:"action"`
		} `json:"decisions"`
	}
	e.api("GET", "/api/v1/approvals/"+approvalID, nil, &ap)
	if len(ap.Decisions) != 1 || ap.Decisions[0].Actor != "console:admin" || ap.Decisions[0].Channel != "tui" || ap.Decisions[0].Action != "approve" {
		t.Fatalf("decisions %+v", ap.Decisions)
	}

	p.keys("Tab")
	captures["tui-runs.txt"] = p.waitFor("[2 Runs]", shortid.Of(runID), "succeeded")
	p.keys("Enter")
	captures["tui-run.txt"] = p.waitFor("RUN "+runID, "deployed api 1.2.3 to staging", "timeline", "approved by console:admin", "time: ")

	// Reject with a reason, from the queue.
	p.keys("Tab")
	_, second := e.pendingDeploy("ops-2", "1.2.4")
	p.waitFor("version=1.2.4")
	p.keys("r")
	captures["tui-reject.txt"] = p.waitFor("REJECT deploy", "reason:")
	// tmux send-keys writes the text in one chunk, as a fast paste does.
	p.keys("roll back up to left", "Enter")
	p.waitFor("rejected " + shortid.Of(second))
	var rj struct {
		Decisions []struct{ Channel, Action, Reason string } `json:"decisions"`
	}
	e.api("GET", "/api/v1/approvals/"+second, nil, &rj)
	if len(rj.Decisions) != 1 || rj.Decisions[0].Reason != "roll back up to left" || rj.Decisions[0].Channel != "tui" {
		t.Fatalf("reject decisions %+v", rj.Decisions)
	}

	p.keys("q")
	p.waitFor("TUI-EXITED 0")

	// Not on a terminal: the same queue as plain text.
	e.pendingDeploy("ops-3", "1.2.5")
	out := e.mustCLI("tui")
	for _, want := range []string{"PENDING APPROVALS (1)", "version=1.2.5", "RUNS (newest 3)", "succeeded", "rejected"} {
		if !strings.Contains(out, want) {
			t.Fatalf("plain tui output lacks %q:\n%s", want, out)
		}
	}
	captures["tui-plain.txt"] = out

	if os.Getenv("OPSGATE_UPDATE_SCREENSHOTS") == "1" {
		dir := filepath.Join("..", "..", "artifacts", "terminal")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, s := range captures {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.TrimRight(s, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestChatUnderTmux: `opsgate chat` on a terminal (a tmux pane) sends
// text that arrives in one chunk exactly as typed: "what is up" keeps
// its "up" (it was sent as "what is").
func TestChatUnderTmux(t *testing.T) {
	tmux := needTmux(t)
	e := newEnv(t)
	termConfig(e, "1h")
	e.start()
	p := e.startTmux(tmux, "chat", "--thread", "tmux-1", "--config", e.cfgPath)
	p.waitFor("opsgate chat in local:tmux-1")
	for _, text := range []string{"what is up", "roll back up to left"} {
		p.keys(text, "Enter")
		p.waitFor("you › " + text)
	}
	var msgs struct {
		Items []struct{ Direction, Text string } `json:"items"`
	}
	deadline := time.Now().Add(waitBound)
	for {
		e.api("GET", "/api/v1/messages?thread=local:tmux-1", nil, &msgs)
		var in []string
		for _, m := range msgs.Items {
			if m.Direction == "in" {
				in = append(in, m.Text)
			}
		}
		got := strings.Join(in, "|")
		if strings.Contains(got, "what is up") && strings.Contains(got, "roll back up to left") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the thread's messages are %q, want \"what is up\" and \"roll back up to left\"", in)
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.keys("C-d")
	p.waitFor("TUI-EXITED 0")
}
