package main

import (
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMigrateFreshSQLite: `opsgate migrate` on a SQLite path that does not
// exist yet creates the schema and exits 0; run again, it changes nothing
// and still exits 0.
func TestMigrateFreshSQLite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	db := filepath.Join(e.dir, "fresh.db")
	e.writeConfig(fmt.Sprintf("store:\n  driver: sqlite\n  dsn: %s\n", db), "")
	if _, err := os.Stat(db); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s exists before migrate (err %v)", db, err)
	}
	want := []string{"schema_migrations", "events", "runs", "steps", "run_events", "approvals", "grants", "audit", "outbox", "leases"}
	var versions int
	for i := range 2 {
		out, errOut, code := e.cli("migrate")
		if code != 0 || !strings.Contains(out, "sqlite store migrated") {
			t.Fatalf("migrate #%d: exit %d, stdout %q, stderr %q", i+1, code, out, errOut)
		}
		tables, n := sqliteSchema(t, db)
		for _, name := range want {
			if !tables[name] {
				t.Errorf("migrate #%d: table %s missing (have %v)", i+1, name, tables)
			}
		}
		if n == 0 || (i == 1 && n != versions) {
			t.Errorf("migrate #%d: %d recorded migrations, want the same non-zero count as the first run (%d)", i+1, n, versions)
		}
		versions = n
	}
	if m := mode(t, db); m != 0o600 {
		t.Errorf("migrate created %s mode %v, want 0600", db, m)
	}
}

// sqliteSchema lists the tables in the SQLite file and counts the applied
// migrations.
func sqliteSchema(t *testing.T, path string) (map[string]bool, int) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	tables := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables[name] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM schema_migrations`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return tables, n
}

// TestServeWithoutConfig: `opsgate serve` with no --config, no
// $OPSGATE_CONFIG and no ./opsgate.yaml runs the built-in quickstart —
// SQLite under ./data, the console, the demo tools the binary installs
// under ./data/demo — in an empty directory: ready, an admin token
// written, `deploy api 1.2.3` asks for approval, and once approved the
// demo script runs.
func TestServeWithoutConfig(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.cfgPath = "" // start runs plain `opsgate serve`; OPSGATE_LISTEN moves it to e.port
	if out, _, code := runOpsgate(t, e.dir, []string{"config", "check"}); code != 0 || !strings.Contains(out, "OK") {
		t.Fatalf("config check of the built-in quickstart before the first start: exit %d\n%s", code, out)
	}
	e.start()
	// The start-up log says where the console is and where the token is,
	// never the token.
	// /healthz may answer a moment before the line is written.
	want := fmt.Sprintf("console at http://127.0.0.1:%d/, sign in with the admin token in data/admin.token", e.port)
	deadline := time.Now().Add(waitBound)
	for !strings.Contains(e.srv.logs.String(), want) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	logs := e.srv.logs.String()
	if !strings.Contains(logs, want) {
		t.Errorf("start-up log lacks %q:\n%s", want, logs)
	}
	if strings.Contains(logs, e.token()) {
		t.Errorf("the start-up log holds the admin token")
	}
	for _, name := range []string{"status.sh", "deploy.sh"} {
		info, err := os.Stat(filepath.Join(e.dir, "data", "demo", name))
		if err != nil || info.Mode().Perm()&0o100 == 0 {
			t.Fatalf("demo tool %s: %v %v; want an executable file", name, info, err)
		}
	}

	resp, err := http.Get(e.baseURL() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/readyz: %d %s", resp.StatusCode, body)
	}
	if tok := e.token(); len(tok) < 20 {
		t.Fatalf("data/admin.token holds %q, want a generated token", tok)
	}
	if _, err := os.Stat(filepath.Join(e.dir, "data", "opsgate.db")); err != nil {
		t.Errorf("the quickstart's SQLite file: %v", err)
	}
	run := e.message("quickstart", "deploy api 1.2.3")
	r := e.waitRun(run.ID, "waiting for approval", func(r testRun) bool {
		return r.Status == "waiting_approval" && len(r.Steps) > 0 && r.Steps[0].ApprovalID != ""
	})
	var appr struct {
		Status string `json:"status"`
		Tool   string `json:"tool"`
	}
	if code := e.api("GET", "/api/v1/approvals/"+r.Steps[0].ApprovalID, nil, &appr); code != 200 {
		t.Fatalf("GET approval: HTTP %d", code)
	}
	if appr.Status != "pending" || appr.Tool != "deploy" {
		t.Errorf("approval = %+v, want a pending deploy", appr)
	}
	if code := e.api("POST", "/api/v1/approvals/"+r.Steps[0].ApprovalID+"/decision", map[string]string{"action": "approve"}, nil); code != 200 {
		t.Fatalf("approve: HTTP %d", code)
	}
	done := e.waitStatus(run.ID, "succeeded")
	if !strings.Contains(done.Steps[0].Output, "deployed api 1.2.3 to staging") {
		t.Errorf("output %q", done.Steps[0].Output)
	}
	// A demo script changed by hand is put back at the next start: serve
	// owns them.
	p := filepath.Join(e.dir, "data", "demo", "status.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho tampered\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	e.stop()
	e.start()
	if b, err := os.ReadFile(p); err != nil || strings.Contains(string(b), "tampered") {
		t.Errorf("status.sh after a restart: %q %v", b, err)
	}
	e.stop()
}

// TestConfigCheckReportsMissingCommands: exec commands that do not exist,
// are not executable or are not on $PATH are problems with their YAML
// path and line; a production-like config with no demo tool gets no demo
// directory.
func TestConfigCheckReportsMissingCommands(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.script("ok.sh", "echo ok\n")
	if err := os.WriteFile(filepath.Join(e.dir, "noexec.sh"), []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tool := func(name, cmd string) string {
		return fmt.Sprintf("  - name: %s\n    risk: read\n    exec:\n      command: [%q]\n", name, cmd)
	}
	e.writeConfig(e.storeYAML(""), "tools:\n"+tool("good", "./ok.sh")+tool("bare", "sh")+tool("templated", "{{.x}}")+
		tool("missing", "./nope.sh")+tool("noexec", "./noexec.sh")+tool("notonpath", "no-such-binary-opsgate")+
		tool("dir", "./data")+tool("demo", "./data/demo/status.sh"))
	if err := os.MkdirAll(filepath.Join(e.dir, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	out, _, code := e.cli("config", "check")
	if code != exitFail {
		t.Fatalf("config check: exit %d, want 1\n%s", code, out)
	}
	for _, want := range []string{
		":23: tools[3].exec.command[0]: command " + filepath.Join(e.dir, "nope.sh") + " does not exist (resolved against " + e.dir + ")",
		"tools[4].exec.command[0]: command " + filepath.Join(e.dir, "noexec.sh") + " is not executable",
		`tools[5].exec.command[0]: command "no-such-binary-opsgate" is not found in $PATH`,
		"tools[6].exec.command[0]: command " + filepath.Join(e.dir, "data") + " is a directory",
		"4 problem(s)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("config check lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "tools[0]") || strings.Contains(out, "tools[1]") || strings.Contains(out, "tools[2]") {
		t.Errorf("a good, a bare or a templated command is reported:\n%s", out)
	}
	// The demo path outside the data dir's demo folder is not special: it
	// is reported as missing only when it is not where serve installs.
	if strings.Contains(out, "tools[7]") {
		t.Errorf("./data/demo/status.sh under this config's data_dir is installed by serve, not missing:\n%s", out)
	}
}

// TestProductionConfigGetsNoDemoDir: serve writes the demo scripts only
// when a tool runs one.
func TestProductionConfigGetsNoDemoDir(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	deployConfig(e, "")
	e.start()
	e.stop()
	if _, err := os.Stat(filepath.Join(e.dir, "data", "demo")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("data/demo exists for a config without demo tools: %v", err)
	}
}
