package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/opsgate/opsgate/core/shortid"
	"github.com/opsgate/opsgate/store/pgtest"
)

// backends runs fn once per store backend. The Postgres case gets a fresh
// database from pgtest (which fails it when no Postgres is available,
// unless OPSGATE_SKIP_POSTGRES=1).
func backends(t *testing.T, fn func(t *testing.T, pgDSN string)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, "")
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, pgtest.DSN(t))
	})
}

// deployConfig is a quickstart-like config whose deploy tool is a script
// in the test's directory that appends its idempotency key to keys.log.
func deployConfig(e *env, pgDSN string) {
	deploy := e.script("deploy.sh", fmt.Sprintf(`
if [ "$1" = "--dry-run" ]; then
	echo "dry run: would deploy $2 $3 to $4"
	exit 0
fi
echo "$OPSGATE_IDEMPOTENCY_KEY" >> %q
echo "deployed $1 $2 to $3"
`, e.keyLog))
	e.writeConfig(e.storeYAML(pgDSN), fmt.Sprintf(`
engine:
  poll_interval: 100ms
  lease: 2s
channels:
  console: {enabled: true}
approvers:
  groups:
    sre: ["console:admin"]
tools:
  - name: deploy
    description: Deploy a service
    risk: high_impact
    destructive: true
    input_schema:
      type: object
      required: [service, version]
      properties:
        service: {type: string, pattern: "^[a-z0-9-]+$"}
        version: {type: string}
        env: {type: string, default: staging}
    exec:
      command: [%q, "{{.service}}", "{{.version}}", "{{.env}}"]
      dry_run: [%q, "--dry-run", "{{.service}}", "{{.version}}", "{{.env}}"]
      timeout: 30s
flows:
  - name: deploy
    description: Deploy a version
    command: "deploy {service} {version} {env=staging}"
    steps:
      - tool: deploy
        args: {service: "{{.service}}", version: "{{.version}}", env: "{{.env}}"}
policy:
  rules:
    - {match: {tool: deploy}, action: ask, approvers: ["group:sre"]}
approvals:
  ttl: 1h
  allow_self_approval: true
`, deploy, deploy))
}

// pendingApproval waits for the run to ask and returns the approval id,
// checking that `opsgate approvals list` shows it.
func pendingApproval(t *testing.T, e *env, runID string) string {
	t.Helper()
	r := e.waitRun(runID, "waiting for approval", func(r testRun) bool {
		return r.Status == "waiting_approval" && len(r.Steps) > 0 && r.Steps[0].ApprovalID != ""
	})
	id := r.Steps[0].ApprovalID
	if out := e.mustCLI("approvals", "list"); !strings.Contains(out, shortid.Of(id)) || !strings.Contains(out, "pending") {
		t.Fatalf("approvals list does not show pending %s:\n%s", id, out)
	}
	return id
}

// TestDeployApproveViaCLI is the README walkthrough: a message asks, the
// CLI approves, the run succeeds and `runs show` prints the tool's output.
func TestDeployApproveViaCLI(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, pgDSN string) {
		e := newEnv(t)
		deployConfig(e, pgDSN)
		e.start()

		run := e.message("ops-1", "deploy api 1.2.3")
		id := pendingApproval(t, e, run.ID)
		show := e.mustCLI("approvals", "show", id)
		for _, want := range []string{"pending", "deploy", `"version":"1.2.3"`, "dry run: would deploy api 1.2.3 to staging"} {
			if !strings.Contains(show, want) {
				t.Errorf("approvals show lacks %q:\n%s", want, show)
			}
		}
		if len(e.keys()) != 0 {
			t.Fatalf("tool ran before approval: %v", e.keys())
		}

		out := e.mustCLI("approvals", "approve", id, "--reason", "ship it")
		if !strings.Contains(out, "approved") {
			t.Errorf("approve output: %q", out)
		}
		e.waitStatus(run.ID, "succeeded")
		show = e.mustCLI("runs", "show", run.ID)
		for _, want := range []string{"succeeded", "deployed api 1.2.3 to staging"} {
			if !strings.Contains(show, want) {
				t.Errorf("runs show lacks %q:\n%s", want, show)
			}
		}
		if got, want := e.keys(), []string{run.ID + "/0"}; !equal(got, want) {
			t.Errorf("dispatches = %v, want %v", got, want)
		}

		// The console's card and result reply were delivered (recorded)
		// through the outbox, and none is left pending.
		deadline := time.Now().Add(waitBound)
		for {
			var pending, sent struct {
				Items []struct {
					Kind string `json:"kind"`
				} `json:"items"`
			}
			e.api("GET", "/api/v1/deliveries?status=pending", nil, &pending)
			e.api("GET", "/api/v1/deliveries?status=sent", nil, &sent)
			if len(pending.Items) == 0 && len(sent.Items) >= 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("console deliveries: %d pending, %d sent after %s", len(pending.Items), len(sent.Items), waitBound)
			}
			time.Sleep(20 * time.Millisecond)
		}

		// A second decision loses, and the CLI says to whom, with exit 1.
		_, errOut, code := e.cli("approvals", "reject", id)
		if code != 1 || !strings.Contains(errOut, "409") || !strings.Contains(errOut, "console:admin") {
			t.Errorf("second decision: exit %d, stderr %q; want exit 1 naming the winner", code, errOut)
		}
		// Unknown ids are a clear 404, exit 1.
		_, errOut, code = e.cli("runs", "show", "no-such-run")
		if code != 1 || !strings.Contains(errOut, `no run id matches "no-such-run"`) {
			t.Errorf("unknown run: exit %d, stderr %q", code, errOut)
		}
		e.stop()
	})
}

// TestRestartWhileWaitingDispatchesOnce kills the server with SIGKILL while
// a run waits for approval; after a restart the approval still works and
// the tool runs exactly once.
func TestRestartWhileWaitingDispatchesOnce(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, pgDSN string) {
		e := newEnv(t)
		deployConfig(e, pgDSN)
		e.start()
		run := e.message("ops-2", "deploy web 2.0.0 prod")
		id := pendingApproval(t, e, run.ID)

		e.kill()
		e.start()

		if r := e.run(run.ID); r.Status != "waiting_approval" {
			t.Fatalf("after restart run is %s, want waiting_approval", r.Status)
		}
		e.mustCLI("approvals", "approve", id)
		r := e.waitStatus(run.ID, "succeeded")
		if !strings.Contains(r.Steps[0].Output, "deployed web 2.0.0 to prod") {
			t.Errorf("output = %q", r.Steps[0].Output)
		}
		// Once the server has stopped (draining every step in flight),
		// no repeated dispatch can still show up: count then.
		e.stop()
		if got, want := e.keys(), []string{run.ID + "/0"}; !equal(got, want) {
			t.Errorf("dispatches = %v, want exactly %v", got, want)
		}
	})
}

// TestKilledMidDispatch kills the server while two tools run: the
// non-idempotent one makes its run interrupted, the idempotent one is
// dispatched again with the same key. On both backends.
func TestKilledMidDispatch(t *testing.T) {
	t.Parallel()
	backends(t, killedMidDispatch)
}

func killedMidDispatch(t *testing.T, pgDSN string) {
	e := newEnv(t)
	// Each tool logs "<name> <key>", then sleeps on its first call only,
	// long enough to be killed in the middle. Its process group id is kept
	// so the orphan can be reaped after the test.
	slow := func(name string) string {
		return e.script(name+".sh", fmt.Sprintf(`
echo "%[1]s:$OPSGATE_IDEMPOTENCY_KEY" >> %[2]q
if [ ! -e %[3]q ]; then
	echo $$ > %[3]q
	sleep 20
fi
echo "%[1]s finished"
`, name, e.keyLog, filepath.Join(e.dir, name+".started")))
	}
	once, idem := slow("once"), slow("idem")
	t.Cleanup(func() {
		for _, n := range []string{"once", "idem"} {
			if b, err := os.ReadFile(filepath.Join(e.dir, n+".started")); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
					_ = syscall.Kill(-pid, syscall.SIGKILL)
				}
			}
		}
	})
	e.writeConfig(e.storeYAML(pgDSN), fmt.Sprintf(`
engine:
  poll_interval: 100ms
  lease: 1s
tools:
  - {name: once, risk: read, idempotent: false, exec: {command: [%q], timeout: 1m}}
  - {name: idem, risk: read, idempotent: true, exec: {command: [%q], timeout: 1m}}
flows:
  - {name: once, command: "once", steps: [{tool: once}]}
  - {name: idem, command: "idem", steps: [{tool: idem}]}
policy:
  rules:
    - {match: {tool: "*"}, action: allow}
`, once, idem))
	e.start()
	runOnce := e.message("t-once", "once")
	runIdem := e.message("t-idem", "idem")
	e.waitFile(filepath.Join(e.dir, "once.started"))
	e.waitFile(filepath.Join(e.dir, "idem.started"))
	e.kill()
	e.start()

	r := e.waitStatus(runOnce.ID, "interrupted")
	if r.Steps[0].Status != "interrupted" {
		t.Errorf("non-idempotent step status = %s, want interrupted", r.Steps[0].Status)
	}
	r = e.waitStatus(runIdem.ID, "succeeded")
	if !strings.Contains(r.Steps[0].Output, "idem finished") {
		t.Errorf("idempotent output = %q", r.Steps[0].Output)
	}
	var onceKeys, idemKeys []string
	for _, k := range e.keys() {
		name, key, _ := strings.Cut(k, ":")
		switch name {
		case "once":
			onceKeys = append(onceKeys, key)
		case "idem":
			idemKeys = append(idemKeys, key)
		}
	}
	if want := []string{runOnce.ID + "/0"}; !equal(onceKeys, want) {
		t.Errorf("non-idempotent dispatches = %v, want exactly %v", onceKeys, want)
	}
	if want := []string{runIdem.ID + "/0", runIdem.ID + "/0"}; !equal(idemKeys, want) {
		t.Errorf("idempotent dispatches = %v, want the same key twice %v", idemKeys, want)
	}
	e.stop()
}

// TestConfigCheckReportsEveryProblem: one run of `config check` lists all
// problems as file:line: path: message and exits 1.
func TestConfigCheckReportsEveryProblem(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	bad := filepath.Join(e.dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(`server:
  listen: 127.0.0.1:8080
  lisen: typo
store:
  driver: mysql
tools:
  - name: deploy
    risk: extreme
    exec:
      command: ["./deploy.sh"]
      timeout: forever
flows:
  - name: deploy
    command: "deploy {service}"
    steps:
      - tool: missing
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := []string{"config", "check", "--config", bad}
	out, _, code := runBin(t, e.dir, cmd...)
	if code != 1 {
		t.Fatalf("exit %d, want 1; output:\n%s", code, out)
	}
	for _, re := range []string{
		`(?m)^` + regexp.QuoteMeta(bad) + `:3: server\.lisen: .*unknown key`,
		`(?m)^` + regexp.QuoteMeta(bad) + `:5: store\.driver: .*mysql`,
		`(?m)^` + regexp.QuoteMeta(bad) + `:8: tools\[0\]\.risk: .*extreme`,
		`(?m)^` + regexp.QuoteMeta(bad) + `:11: tools\[0\]\.exec\.timeout: .*forever`,
		`(?m)^` + regexp.QuoteMeta(bad) + `:16: flows\[0\]\.steps\[0\]\.tool: .*missing`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("output lacks a line matching %s:\n%s", re, out)
		}
	}

	deployConfig(e, "")
	out, _, code = runBin(t, e.dir, "config", "check", "--config", e.cfgPath)
	if code != 0 || !strings.Contains(out, "OK") {
		t.Errorf("valid config: exit %d, output %q", code, out)
	}
	_, errOut, code := runBin(t, e.dir, "config", "check", "--config", filepath.Join(e.dir, "missing.yaml"))
	if code != 1 || !strings.Contains(errOut, "missing.yaml") {
		t.Errorf("missing file: exit %d, stderr %q", code, errOut)
	}
}

// TestAuditVerifyDetectsAlteredRow alters one audit row with raw SQL in
// the SQLite file; `audit verify` must name it and exit 1.
func TestAuditVerifyDetectsAlteredRow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	deployConfig(e, "")
	e.start()
	run := e.message("ops-3", "deploy api 3.0.0")
	id := pendingApproval(t, e, run.ID)
	e.mustCLI("approvals", "approve", id)
	e.waitStatus(run.ID, "succeeded")
	e.stop()

	db, err := sql.Open("sqlite", filepath.Join(e.dir, "data", "opsgate.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	head := func() (seq int64, hash string) {
		t.Helper()
		if err := db.QueryRow(`SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1`).Scan(&seq, &hash); err != nil {
			t.Fatal(err)
		}
		return seq, hash
	}
	var n int64
	if err := db.QueryRow(`SELECT COUNT(*) FROM audit`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n < 2 {
		t.Fatalf("want at least 2 audit entries (request, decision), have %d", n)
	}
	target, hash := head()
	// The head is printed, for operators to record.
	if out := e.mustCLI("audit", "verify"); !strings.Contains(out, "OK") || !strings.Contains(out, fmt.Sprintf("head: seq %d, hash %s", target, hash)) {
		t.Fatalf("intact chain (head %d %s): %q", target, hash, out)
	}
	// Removing the newest entry leaves an intact chain: only the head
	// moving back shows it.
	if _, err := db.Exec(`DELETE FROM audit WHERE seq = ?`, target); err != nil {
		t.Fatal(err)
	}
	target, hash = head()
	if out := e.mustCLI("audit", "verify"); !strings.Contains(out, "OK") || !strings.Contains(out, fmt.Sprintf("head: seq %d, hash %s", target, hash)) {
		t.Fatalf("chain without its newest entry (head now %d): %q", target, out)
	}
	// Alter the last entry: nothing after it can hide the change.
	if _, err := db.Exec(`UPDATE audit SET actor = 'mallory' WHERE seq = ?`, target); err != nil {
		t.Fatal(err)
	}
	out, _, code := e.cli("audit", "verify")
	want := fmt.Sprintf("entry %d does not link to the entry before it: it was altered, or an entry before it was removed", target)
	if code != 1 || !strings.Contains(out, "ALTERED") || !strings.Contains(out, want) || !strings.Contains(out, fmt.Sprintf("head: seq %d,", target)) {
		t.Errorf("altered seq %d: exit %d, output %q", target, code, out)
	}
}

// runBin runs the binary with exactly args (no --config added).
func runBin(t *testing.T, dir string, args ...string) (string, string, int) {
	t.Helper()
	return runOpsgate(t, dir, args)
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestGracefulShutdownLetsTheStepFinish: SIGTERM while a tool runs lets it
// finish and record its result (the engine drains) before the process
// exits 0; nothing is left for crash recovery.
func TestGracefulShutdownLetsTheStepFinish(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	started := filepath.Join(e.dir, "started")
	tool := e.script("slow.sh", fmt.Sprintf(`
echo "$OPSGATE_IDEMPOTENCY_KEY" >> %q
touch %q
sleep 1
echo "slow finished"
`, e.keyLog, started))
	e.writeConfig(e.storeYAML(""), fmt.Sprintf(`
engine: {poll_interval: 100ms, lease: 10s}
tools:
  - {name: slow, risk: read, exec: {command: [%q], timeout: 1m}}
flows:
  - {name: slow, command: "slow", steps: [{tool: slow}]}
`, tool))
	e.start()
	run := e.message("t-slow", "slow")
	e.waitFile(started)
	e.stop() // SIGTERM; fails the test unless the exit code is 0

	e.start()
	r := e.run(run.ID)
	if r.Status != "succeeded" || !strings.Contains(r.Steps[0].Output, "slow finished") {
		t.Errorf("after a graceful restart run is %s (output %q), want succeeded", r.Status, r.Steps[0].Output)
	}
	if got := e.keys(); len(got) != 1 {
		t.Errorf("dispatches = %v, want one", got)
	}
	e.stop()
}

// dashboardApprovalSeries lists the series the shipped Grafana dashboard's
// approvals panels read (deploy/grafana), histogram buckets by name.
func dashboardApprovalSeries(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "grafana", "opsgate-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	seen := map[string]bool{}
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			for _, m := range regexp.MustCompile(`opsgate_approvals?_[a-z_]+`).FindAllString(tg.Expr, -1) {
				if !seen[m] && !strings.HasPrefix(m, "opsgate_approval_decision_to_dispatch") {
					seen[m] = true
					out = append(out, m)
				}
			}
		}
	}
	if len(out) < 4 {
		t.Fatalf("the dashboard reads %v: no approvals row", out)
	}
	return out
}

// TestOperationalEndpoints: health, readiness and metrics answer without a
// token; a second server on the same port fails at once with a clear error.
func TestOperationalEndpoints(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	deployConfig(e, "")
	e.start()
	for path, want := range map[string]string{
		"/healthz": "ok",
		"/readyz":  "ready",
		"/metrics": "process_resident_memory_bytes",
	} {
		resp, err := http.Get(e.baseURL() + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %d, body lacks %q", path, resp.StatusCode, want)
		}
		if path == "/metrics" {
			for _, m := range []string{"go_goroutines", "opsgate_", `opsgate_approvals_pending{risk="high_impact"} 0`,
				"opsgate_approval_oldest_pending_seconds 0", `opsgate_approval_escalations_total{step="remind"} 0`,
				"opsgate_approval_decision_seconds_count 0"} {
				if !strings.Contains(string(body), m) {
					t.Errorf("/metrics lacks %s", m)
				}
			}
			for _, m := range dashboardApprovalSeries(t) {
				if !strings.Contains(string(body), "\n"+m) {
					t.Errorf("the dashboard's approvals row reads %s, which /metrics lacks from startup", m)
				}
			}
		}
	}
	if code := e.api("GET", "/api/v1/runs", nil, nil); code != 200 {
		t.Errorf("API with the generated token: %d", code)
	}
	_, errOut, code := runOpsgate(t, e.dir, []string{"serve", "--config", e.cfgPath})
	if code != 1 || !strings.Contains(errOut, "listen") || !strings.Contains(errOut, strconv.Itoa(e.port)) {
		t.Errorf("second server on a busy port: exit %d, stderr %q", code, errOut)
	}
	e.stop()
}
