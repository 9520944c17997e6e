package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core/schedule"
	"github.com/opsgate/opsgate/internal/testkit"
	"github.com/opsgate/opsgate/store/pgtest"
)

// scheduleConfig writes a config whose flow "hello" runs a script that
// logs its idempotency key, and whose schedules are extra (YAML list items).
func scheduleConfig(e *env, pgDSN, extra string) {
	hello := e.script("hello.sh", fmt.Sprintf("echo \"$OPSGATE_IDEMPOTENCY_KEY\" >> %q\necho hello\n", e.keyLog))
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
  - {name: hello, risk: read, idempotent: true, exec: {command: [%q], timeout: 1m}}
flows:
  - {name: hello, command: "hello", steps: [{tool: hello}]}
policy:
  rules:
    - {match: {tool: "*"}, action: allow}
schedules:
  - {name: nightly, cron: "@every 24h", thread: "console:nightly", text: hello, missed: run_once}
%s`, hello, extra))
}

// TestSchedulesCLI: `opsgate schedules list|run|pause|resume` against a
// running server, audited; a SIGHUP reload adds a schedule.
func TestSchedulesCLI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	scheduleConfig(e, "", "")
	e.start()

	out := e.mustCLI("schedules", "list")
	if !strings.Contains(out, "nightly") || !strings.Contains(out, "@every 24h") || !strings.Contains(out, "console:nightly") ||
		!strings.Contains(out, "active") {
		t.Fatalf("schedules list:\n%s", out)
	}
	var page struct {
		Items []struct {
			Name   string  `json:"name"`
			NextAt *string `json:"next_at"`
			LastAt *string `json:"last_at"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(e.mustCLI("schedules", "list", "--json")), &page); err != nil || len(page.Items) != 1 ||
		page.Items[0].NextAt == nil || page.Items[0].LastAt != nil {
		t.Fatalf("schedules list --json: %+v, %v", page, err)
	}

	out = e.mustCLI("schedules", "run", "nightly")
	id := ""
	if _, err := fmt.Sscanf(out[strings.Index(out, "run ")+4:], "%s", &id); err != nil || !strings.Contains(out, "fired") {
		t.Fatalf("schedules run: %q", out)
	}
	r := e.waitStatus(id, "succeeded")
	if r.Steps[0].Output != "hello\n" && r.Steps[0].Output != "hello" {
		t.Errorf("output %q", r.Steps[0].Output)
	}
	if out := e.mustCLI("schedules", "pause", "nightly"); !strings.Contains(out, "paused by console:admin") {
		t.Errorf("pause:\n%s", out)
	}
	if out := e.mustCLI("schedules", "resume", "nightly"); !strings.Contains(out, "active") {
		t.Errorf("resume:\n%s", out)
	}
	if _, errOut, code := e.cli("schedules", "run", "nope"); code != 1 || !strings.Contains(errOut, `schedule "nope" not found`) {
		t.Errorf("run of an unknown schedule: exit %d, %s", code, errOut)
	}
	if _, _, code := e.cli("schedules", "run"); code != 2 {
		t.Errorf("run without a name: exit %d, want 2", code)
	}
	var audit struct {
		Items []struct {
			Kind  string `json:"kind"`
			Actor string `json:"actor"`
		} `json:"items"`
	}
	e.api("GET", "/api/v1/audit?actor=console:admin&limit=100", nil, &audit)
	kinds := map[string]int{}
	for _, a := range audit.Items {
		kinds[a.Kind]++
	}
	if kinds["schedule.run"] != 1 || kinds["schedule.paused"] != 1 || kinds["schedule.resumed"] != 1 {
		t.Errorf("audit kinds = %v", kinds)
	}

	// A reload adds a schedule.
	scheduleConfig(e, "", `  - {name: hourly, cron: "@hourly", thread: "console:hourly", text: hello}`)
	if err := e.srv.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(waitBound)
	for !strings.Contains(e.mustCLI("schedules", "list"), "hourly") {
		if time.Now().After(deadline) {
			t.Fatalf("the reloaded schedule is not listed after %s:\n%s", waitBound, e.srv.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestScheduleTickKilledMidTransaction: the real binary, on Postgres, is
// killed while its tick's transaction is open — the tick claimed (the
// schedule's next tick moved) but its event and run not yet written: a
// test transaction holding the tick's event id makes it wait there. What
// it wrote is rolled back with its connection; the restarted binary fires
// the tick again; exactly one run exists for it, dispatched once.
func TestScheduleTickKilledMidTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	e := newEnv(t)
	scheduleConfig(e, dsn, "")
	st, err := testkit.OpenPostgres(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	db := st.DB()
	count := func(q string, args ...any) int {
		t.Helper()
		var n int
		if err := db.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(waitBound)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("not %s after %s", what, waitBound)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// First start stores the schedule's state; then its tick is made due
	// an hour ago, as if no replica had been up since (missed: run_once).
	e.start()
	waitFor("stored", func() bool { return count(`SELECT count(*) FROM schedules WHERE name = 'nightly'`) == 1 })
	e.stop()
	tick := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	if _, err := db.ExecContext(ctx, `UPDATE schedules SET next_at = $1 WHERE name = 'nightly'`, tick.UnixMicro()); err != nil {
		t.Fatal(err)
	}
	eventID := schedule.EventID("nightly", tick)

	// Hold the tick's event id in an open transaction: the binary's tick
	// transaction waits on it, after its guarded update of the schedule.
	blocker, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Rollback() //nolint:errcheck // rolled back below; a second rollback is a no-op
	if _, err := blocker.ExecContext(ctx, `INSERT INTO events (channel, event_id, actor, thread, received_at) VALUES ('console', $1, 'test', 'console:nightly', 0)`,
		eventID); err != nil {
		t.Fatal(err)
	}
	e.start()
	var pid int
	waitFor("waiting inside the tick's transaction", func() bool {
		err := db.QueryRowContext(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock' AND query LIKE 'INSERT INTO events%'`).Scan(&pid)
		return err == nil
	})
	if n := count(`SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
		WHERE l.pid = $1 AND c.relname = 'schedules' AND l.mode = 'RowExclusiveLock'`, pid); n != 1 {
		t.Fatalf("the waiting transaction has not updated the schedule (claimed the tick): %d locks", n)
	}
	e.kill()
	// Its connection goes with it: end the orphaned session as Postgres
	// would on noticing, and wait until it is gone.
	if _, err := db.ExecContext(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	waitFor("gone", func() bool { return count(`SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, pid) == 0 })
	if err := blocker.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n := count(`SELECT count(*) FROM schedule_ticks`) + count(`SELECT count(*) FROM runs`) + count(`SELECT count(*) FROM events`); n != 0 {
		t.Fatalf("the killed transaction left %d rows", n)
	}
	if n := count(`SELECT count(*) FROM schedules WHERE next_at = $1`, tick.UnixMicro()); n != 1 {
		t.Fatal("the killed transaction moved the schedule's next tick")
	}

	e.start()
	var runID string
	waitFor("fired again", func() bool {
		return db.QueryRowContext(ctx, `SELECT id FROM runs WHERE requester = 'schedule:nightly'`).Scan(&runID) == nil
	})
	e.waitStatus(runID, "succeeded")
	e.stop()
	if n := count(`SELECT count(*) FROM runs WHERE requester = 'schedule:nightly'`); n != 1 {
		t.Errorf("%d runs for one tick, want 1", n)
	}
	if n := count(`SELECT count(*) FROM schedule_ticks WHERE schedule = 'nightly' AND tick_at = $1 AND run_id = $2 AND status = 'fired'`,
		tick.UnixMicro(), runID); n != 1 || count(`SELECT count(*) FROM schedule_ticks`) != 1 {
		t.Errorf("tick rows: %d for the tick with its run, %d in all", n, count(`SELECT count(*) FROM schedule_ticks`))
	}
	if n := count(`SELECT count(*) FROM events WHERE channel = 'console' AND event_id = $1 AND run_id = $2`, eventID, runID); n != 1 {
		t.Errorf("the tick's event with its run: %d", n)
	}
	if n := count(`SELECT count(*) FROM schedules WHERE next_at = $1`, tick.Add(24*time.Hour).UnixMicro()); n != 1 {
		t.Error("the schedule's next tick did not move on a day")
	}
	if got, want := e.keys(), []string{runID + "/0"}; !equal(got, want) {
		t.Errorf("dispatches = %v, want exactly %v", got, want)
	}
}
