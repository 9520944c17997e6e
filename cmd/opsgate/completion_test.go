package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestCompletionTreeMatchesTheCommands: every command and subcommand the
// completion offers exists (its --help succeeds) and is in the usage, and
// every command of the usage is offered.
func TestCompletionTreeMatchesTheCommands(t *testing.T) {
	t.Parallel()
	offered := map[string]bool{}
	for _, c := range commandTree {
		offered[c.name] = true
		if _, errOut, code := runInProcess(t, c.name, "--help"); code != 0 {
			t.Errorf("opsgate %s --help: exit %d: %s", c.name, code, errOut)
		}
		for _, s := range c.subs {
			if _, errOut, code := runInProcess(t, c.name, s, "--help"); code != 0 {
				t.Errorf("opsgate %s %s --help: exit %d: %s", c.name, s, code, errOut)
			}
			if !strings.Contains(usageText, "opsgate "+c.name+" ") || (c.name != "completion" && !regexp.MustCompile(`opsgate `+c.name+` (\S+\|)*`+s+`\b`).MatchString(usageText)) {
				t.Errorf("the usage does not show opsgate %s %s", c.name, s)
			}
		}
	}
	for _, m := range regexp.MustCompile(`(?m)^  opsgate (\S+)`).FindAllStringSubmatch(usageText, -1) {
		if !offered[m[1]] {
			t.Errorf("the completion does not offer %q", m[1])
		}
	}
	sp := buildSpec()
	names := func(key string) string {
		var out []string
		for _, f := range sp.flags[key] {
			out = append(out, f.name)
		}
		return strings.Join(out, " ")
	}
	for key, want := range map[string]string{"approvals list": "status", "approvals approve": "scope", "audit export": "format",
		"serve": "log-format", "chat": "thread", "tui": "plain", "runs list": "output"} {
		if !strings.Contains(" "+names(key)+" ", " "+want+" ") {
			t.Errorf("%s: flags %q lack %s", key, names(key), want)
		}
	}
	if _, _, code := runInProcess(t, "completion", "powershell"); code != exitUsage {
		t.Errorf("completion powershell: exit %d", code)
	}
}

// needShell finds a shell: missing, the test skips loudly, unless CI is
// set, where .ci/run installs bash, zsh and fish.
func needShell(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed (CI is set; .ci/run installs it): %v", name, err)
		}
		t.Skipf("SKIP: %s is not installed (apt-get install %s); its completion test needs it", name, name)
	}
	return p
}

// TestCompletionInRealShells: the script each shell loads completes
// commands, subcommands, flags and flag values when Tab is pressed in an
// interactive shell (under tmux, as a person types).
func TestCompletionInRealShells(t *testing.T) {
	tmux := needTmux(t)
	bin := t.TempDir()
	if err := os.Symlink(binPath, filepath.Join(bin, "opsgate")); err != nil {
		t.Fatal(err)
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		t.Run(shell, func(t *testing.T) {
			sh := needShell(t, shell)
			home := t.TempDir()
			script, err := exec.Command(binPath, "completion", shell).Output()
			if err != nil {
				t.Fatal(err)
			}
			scriptPath := filepath.Join(home, "opsgate."+shell)
			if err := os.WriteFile(scriptPath, script, 0o644); err != nil {
				t.Fatal(err)
			}
			var argv []string
			switch shell {
			case "bash":
				rc := filepath.Join(home, ".bashrc")
				writeFile(t, rc, "PS1='READY> '\nsource "+scriptPath+"\n")
				argv = []string{sh, "--noprofile", "--rcfile", rc, "-i"}
			case "zsh":
				writeFile(t, filepath.Join(home, ".zshrc"), "PROMPT='READY> '\nautoload -U compinit && compinit -u\nsource "+scriptPath+"\n")
				argv = []string{sh, "-i"}
			case "fish":
				writeFile(t, filepath.Join(home, ".config", "fish", "config.fish"), "function fish_prompt; echo -n 'READY> '; end\n"+
					"set -g fish_greeting ''\nsource "+scriptPath+"\n")
				argv = []string{sh, "-i"}
			}
			p := &tmuxPane{t: t, socket: fmt.Sprintf("opsgate-compl-%d-%s", os.Getpid(), shell)}
			cmdline := fmt.Sprintf("env -i HOME=%s ZDOTDIR=%s XDG_CONFIG_HOME=%s PATH=%s:/usr/bin:/bin TERM=xterm-256color %s",
				shellQuote(home), shellQuote(home), shellQuote(filepath.Join(home, ".config")), shellQuote(bin), strings.Join(quoteAll(argv), " "))
			cmd := exec.Command(tmux, "-L", p.socket, "-f", "/dev/null", "new-session", "-d", "-x", "120", "-y", "20", cmdline)
			cmd.Env = append(os.Environ(), "TMUX=")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("tmux: %v: %s", err, out)
			}
			t.Cleanup(func() { _ = exec.Command(tmux, "-L", p.socket, "kill-server").Run() })
			p.waitLine("READY>")
			// Each step types a partial word and Tab; the line then holds
			// the completed word.
			p.keys("opsgate appro", "Tab")
			p.waitLine("READY> opsgate approvals")
			p.keys("li", "Tab")
			p.waitLine("READY> opsgate approvals list")
			p.typeHex("--sta")
			p.keys("Tab")
			p.waitLine("READY> opsgate approvals list --status")
			p.keys("C-u")
			p.waitLine("READY>")
			p.keys("opsgate audit export --format js", "Tab")
			p.waitLine("READY> opsgate audit export --format jsonl")
		})
	}
}

// typeHex types text as bytes (send-keys -H), for text tmux would read as
// its own flags ("--sta").
func (p *tmuxPane) typeHex(text string) {
	args := []string{"send-keys", "-t", "0", "-H"}
	for _, b := range []byte(text) {
		args = append(args, fmt.Sprintf("%02x", b))
	}
	p.tmux(args...)
}

// waitLine waits until the pane's last non-empty line, trailing spaces
// dropped, is want: what the shell's command line holds now.
func (p *tmuxPane) waitLine(want string) {
	p.t.Helper()
	deadline := time.Now().Add(waitBound)
	for {
		last := ""
		for _, l := range strings.Split(p.capture(), "\n") {
			if l = strings.TrimRight(l, " "); l != "" {
				last = l
			}
		}
		if last == want {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("the command line is %q after %s, want %q:\n%s", last, waitBound, want, p.capture())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func quoteAll(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = shellQuote(a)
	}
	return out
}
