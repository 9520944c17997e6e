package main

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/core/shortid"
)

// TestHelpOnEverySubcommand: --help (and -h, and `opsgate help CMD`) on
// every command and subcommand prints its usage to stdout and exits 0, and
// each subcommand lists its own flags only.
func TestHelpOnEverySubcommand(t *testing.T) {
	cases := []struct {
		args       []string
		want, lack []string
	}{
		{[]string{"serve", "--help"}, []string{"usage: opsgate serve", "-log-format"}, nil},
		{[]string{"migrate", "--help"}, []string{"usage: opsgate migrate", "-config"}, nil},
		{[]string{"config", "--help"}, []string{"usage: opsgate config check"}, nil},
		{[]string{"config", "check", "--help"}, []string{"usage: opsgate config check", "-config", "not\nexecutable"}, nil},
		{[]string{"audit", "--help"}, []string{"usage: opsgate audit <subcommand>", "list", "export", "verify"}, nil},
		{[]string{"audit", "export", "--help"}, []string{"usage: opsgate audit export [flags]", "-format", "-after", "-kind"}, nil},
		{[]string{"audit", "verify", "-h"}, []string{"usage: opsgate audit verify", "-config"}, nil},
		{[]string{"approvals", "--help"}, []string{"usage: opsgate approvals <subcommand>", "list", "show ID", "approve ID", "reject ID", "edit ID"}, nil},
		{[]string{"approvals", "help"}, []string{"subcommands:"}, nil},
		{[]string{"approvals", "list", "--help"}, []string{"usage: opsgate approvals list [flags]", "-status", "-limit", "-json", "-server", "-token"}, []string{"-args", "-scope", "-reason"}},
		{[]string{"approvals", "show", "--help"}, []string{"usage: opsgate approvals show ID [flags]", "unique prefix", "-json"}, []string{"-limit", "-args", "-status"}},
		{[]string{"approvals", "approve", "--help"}, []string{"-reason", "-scope"}, []string{"-args", "-limit"}},
		{[]string{"approvals", "reject", "--help"}, []string{"-reason"}, []string{"-args", "-scope", "-limit"}},
		{[]string{"approvals", "edit", "--help"}, []string{"-args", "-reason", "-scope", "whole new object"}, []string{"-limit", "-status"}},
		{[]string{"approvals", "watch", "--help"}, []string{"usage: opsgate approvals watch [flags]", "-new", "-count", "tab-separated"}, []string{"-args", "-timeout"}},
		{[]string{"approvals", "wait", "--help"}, []string{"usage: opsgate approvals wait ID [flags]", "-timeout", "4  cancelled"}, []string{"-args", "-count"}},
		{[]string{"tui", "--help"}, []string{"usage: opsgate tui", "-plain", "-server", "-token"}, nil},
		{[]string{"chat", "--help"}, []string{"usage: opsgate chat", "-thread", "/approve"}, nil},
		{[]string{"runs", "--help"}, []string{"usage: opsgate runs <subcommand>", "cancel ID"}, nil},
		{[]string{"runs", "list", "--help"}, []string{"-status", "-limit"}, []string{"-args"}},
		{[]string{"runs", "show", "ID", "--help"}, []string{"usage: opsgate runs show ID"}, []string{"-limit", "-status"}},
		{[]string{"runs", "cancel", "--help"}, []string{"usage: opsgate runs cancel ID"}, []string{"-limit"}},
		{[]string{"mcp", "--help"}, []string{"usage: opsgate mcp tools"}, nil},
		{[]string{"mcp", "tools", "--help"}, []string{"usage: opsgate mcp tools", "-json"}, nil},
		{[]string{"healthcheck", "--help"}, []string{"usage: opsgate healthcheck", "-ready"}, nil},
		{[]string{"version", "--help"}, []string{"usage: opsgate version"}, nil},
		{[]string{"help", "runs", "list"}, []string{"usage: opsgate runs list", "-status"}, nil},
		{[]string{"help", "approvals"}, []string{"subcommands:"}, nil},
	}
	for _, c := range cases {
		out, errOut, code := runInProcess(t, c.args...)
		if code != exitOK || errOut != "" {
			t.Errorf("opsgate %q: exit %d, stderr %q; want 0 and nothing on stderr", c.args, code, errOut)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("opsgate %q: output lacks %q:\n%s", c.args, w, out)
			}
		}
		for _, l := range c.lack {
			if strings.Contains(out, l+" ") {
				t.Errorf("opsgate %q: lists %q, which is not its flag:\n%s", c.args, l, out)
			}
		}
	}
	// A subcommand with a bad flag still prints its usage, to stderr, exit 2.
	_, errOut, code := runInProcess(t, "runs", "cancel", "x", "--limit", "3")
	if code != exitUsage || !strings.Contains(errOut, "usage: opsgate runs cancel ID") {
		t.Errorf("runs cancel --limit: exit %d, stderr %q", code, errOut)
	}
}

func TestVersionPrintsCommitAndDate(t *testing.T) {
	out, _, code := runInProcess(t, "version")
	if code != 0 || !strings.Contains(out, "commit: ") || !strings.Contains(out, "built: ") || !strings.Contains(out, "go: ") {
		t.Fatalf("version: exit %d\n%s", code, out)
	}
}

// TestEditWithoutArgsShowsArgsThatValidate: the hint of a missing --args
// is the approval's own arguments, ready to paste.
func TestEditWithoutArgsShowsArgsThatValidate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	deployConfig(e, "")
	e.start()
	run := e.message("edit-hint", "deploy api 1.2.3")
	id := pendingApproval(t, e, run.ID)
	_, errOut, code := e.cli("approvals", "edit", id)
	want := "opsgate approvals edit " + id + ` --args '{"env":"staging","service":"api","version":"1.2.3"}'`
	if code != exitUsage || !strings.Contains(errOut, want) {
		t.Fatalf("edit without --args: exit %d, stderr %q; want the hint %q", code, errOut, want)
	}
	// The hint, changed, is accepted as it is.
	out := e.mustCLI("approvals", "edit", id, "--args", `{"env":"staging","service":"api","version":"1.2.4"}`)
	if !strings.Contains(out, "edited") {
		t.Fatalf("edit with the hinted args: %s", out)
	}
	e.waitStatus(run.ID, "succeeded")
}

// TestShortIDs: a unique prefix works for show, approve and runs; a shared
// prefix is an error naming the candidates; no match says so.
func TestShortIDs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	deployConfig(e, "")
	e.start()
	r1 := e.message("short-1", "deploy api 1.2.3")
	r2 := e.message("short-2", "deploy web 2.0.0")
	a1, a2 := pendingApproval(t, e, r1.ID), pendingApproval(t, e, r2.ID)
	i := 0
	for i < len(a1) && i < len(a2) && a1[i] == a2[i] {
		i++
	}
	if i == 0 || i == len(a1) {
		t.Fatalf("ids %s and %s share no prefix or are equal", a1, a2)
	}
	out := e.mustCLI("approvals", "show", a1[:i+1])
	if !strings.Contains(out, a1) || strings.Contains(out, a2) {
		t.Fatalf("show %s: %s", a1[:i+1], out)
	}
	_, errOut, code := e.cli("approvals", "approve", a1[:i])
	if code != exitFail || !strings.Contains(errOut, "ambiguous") || !strings.Contains(errOut, a1) || !strings.Contains(errOut, a2) {
		t.Fatalf("ambiguous prefix %s: exit %d, stderr %q", a1[:i], code, errOut)
	}
	if st := e.run(r1.ID); st.Status != "waiting_approval" {
		t.Fatalf("an ambiguous approve changed run 1: %s", st.Status)
	}
	_, errOut, code = e.cli("approvals", "show", "ffffffff")
	if code != exitFail || !strings.Contains(errOut, `no approval id matches "ffffffff"`) {
		t.Fatalf("no match: exit %d, stderr %q", code, errOut)
	}
	// The short ids the list shows (a prefix of each id's random part)
	// are what every command takes.
	list := e.mustCLI("approvals", "list")
	s1 := shortid.Shortest(a1, a2)[a1]
	if !strings.Contains(list, s1+" ") || strings.Contains(list, a1) {
		t.Fatalf("approvals list does not show %s as %s:\n%s", a1, s1, list)
	}
	if out := e.mustCLI("approvals", "show", s1); !strings.Contains(out, a1) {
		t.Fatalf("show %s: %s", s1, out)
	}
	if out := e.mustCLI("approvals", "list", "-o", "wide"); !strings.Contains(out, a1) || !strings.Contains(out, "APPROVERS") {
		t.Fatalf("-o wide: %s", out)
	}
	// A run's short id where an approval's is meant says what it is.
	_, errOut, code = e.cli("approvals", "show", shortid.Of(r1.ID))
	if code != exitFail || !strings.Contains(errOut, "names no approval; it is run "+r1.ID) {
		t.Fatalf("a run's id: exit %d, stderr %q", code, errOut)
	}
	out = e.mustCLI("approvals", "approve", a2[:i+1])
	if !strings.Contains(out, a2) || !strings.Contains(out, "approved") {
		t.Fatalf("approve by prefix: %s", out)
	}
	e.waitStatus(r2.ID, "succeeded")
	j := 0
	for j < len(r1.ID) && r1.ID[j] == r2.ID[j] {
		j++
	}
	if out := e.mustCLI("runs", "show", r2.ID[:j+1]); !strings.Contains(out, r2.ID) || !strings.Contains(out, "succeeded") {
		t.Fatalf("runs show by prefix: %s", out)
	}
}

// TestCLIWorksWithoutTheServersSecrets: the CLI on a production host
// reads server.listen and data_dir only, so a secret the config names but
// the operator's shell lacks does not stop `approvals list`.
func TestCLIWorksWithoutTheServersSecrets(t *testing.T) {
	e := newEnv(t)
	deployConfig(e, "")
	cfg, err := os.ReadFile(e.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg = append(cfg, "  # the server's shell has it, the operator's does not\n"...)
	cfg = []byte(strings.Replace(string(cfg), "channels:\n", "channels:\n  webhooks:\n    - {name: ci, secret: \"${CI_WEBHOOK_SECRET}\"}\n", 1))
	if err := os.WriteFile(e.cfgPath, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CI_WEBHOOK_SECRET", "s3cret")
	e.start()
	os.Unsetenv("CI_WEBHOOK_SECRET") // t.Setenv restores it after the test
	if out := e.mustCLI("approvals", "list"); !strings.Contains(out, "STATUS") {
		t.Fatalf("approvals list: %s", out)
	}
	// config check still judges the whole file, and says what is missing.
	out, _, code := e.cli("config", "check")
	if code != exitFail || !strings.Contains(out, "CI_WEBHOOK_SECRET is not set") {
		t.Fatalf("config check without the secret: exit %d\n%s", code, out)
	}
}

// TestAuditListAndExport: `opsgate audit list` prints the newest entries
// as sentences (-o wide adds columns, -o json the API's entries) and
// `opsgate audit export` writes the whole log as CSV or JSON Lines.
func TestAuditListAndExport(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	deployConfig(e, "")
	e.start()
	r := e.message("audit-1", "deploy api 1.2.3")
	id := pendingApproval(t, e, r.ID)
	e.mustCLI("approvals", "reject", shortid.Of(id), "--reason", "roll back up to left")
	sentence := "console:admin (api) rejected deploy env=staging service=api version=1.2.3: roll back up to left"

	out := e.mustCLI("audit", "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if !strings.HasPrefix(lines[0], "SEQ") || !strings.Contains(lines[1], sentence) {
		t.Fatalf("audit list (newest first):\n%s", out)
	}
	if !strings.Contains(out, "console:admin asked to run deploy env=staging service=api version=1.2.3; group:sre to decide") {
		t.Fatalf("audit list lacks the request:\n%s", out)
	}
	if wide := e.mustCLI("audit", "list", "-o", "wide", "--kind", "approval.decided"); !strings.Contains(wide, "approval.decided") ||
		!strings.Contains(wide, id) || strings.Contains(wide, "approval.requested") {
		t.Fatalf("audit list -o wide --kind:\n%s", wide)
	}
	var page struct {
		Items []struct{ Seq int64 } `json:"items"`
	}
	if err := json.Unmarshal([]byte(e.mustCLI("audit", "list", "-o", "json")), &page); err != nil || len(page.Items) < 2 {
		t.Fatalf("audit list -o json: %v %+v", err, page)
	}

	csvOut := e.mustCLI("audit", "export", "--format", "csv")
	rows, err := csv.NewReader(strings.NewReader(csvOut)).ReadAll()
	if err != nil || len(rows) < 3 || rows[0][7] != "sentence" {
		t.Fatalf("export csv: %v\n%s", err, csvOut)
	}
	found := false
	for _, row := range rows[1:] {
		found = found || row[7] == sentence
	}
	if !found {
		t.Fatalf("export csv lacks the decision:\n%s", csvOut)
	}
	jl := e.mustCLI("audit", "export", "--format", "jsonl", "--after", "1")
	for _, l := range strings.Split(strings.TrimSpace(jl), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil || m["seq"].(float64) <= 1 || m["sentence"] == "" {
			t.Fatalf("export jsonl line %q: %v", l, err)
		}
	}
	if _, _, code := e.cli("audit", "export", "--format", "xlsx"); code != exitUsage {
		t.Fatalf("--format xlsx: exit %d", code)
	}
}
