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
// SQLite under ./data, the console, the demo tools from ./configs/demo —
// in a directory that holds only a copy of configs/demo: ready, an admin
// token written, and `deploy api 1.2.3` asks for approval.
func TestServeWithoutConfig(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.cfgPath = "" // start runs plain `opsgate serve`; OPSGATE_LISTEN moves it to e.port
	copyDir(t, filepath.Join("..", "..", "configs", "demo"), filepath.Join(e.dir, "configs", "demo"))
	e.start()

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
	e.stop()
}

// copyDir copies the regular files of src into dst, keeping their modes.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range ents {
		if !ent.Type().IsRegular() {
			continue
		}
		info, err := ent.Info()
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(src, ent.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, ent.Name()), b, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
}
