package api

import (
	"context"
	"testing"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/engine"
	"github.com/opsgate/opsgate/core/schedule"
)

// The real scheduler satisfies the seam.
var _ Schedules = (*schedule.Scheduler)(nil)

// operatorToken may read, request and decide, but not administer.
const operatorToken = "operator-token"

// setupSchedules is the real API, engine, store and scheduler with two
// schedules: "status" (its text runs at once) and "deploy" (its run asks).
func setupSchedules(t *testing.T) *realBundle {
	t.Helper()
	return setupReal(t, withTokens(Token{Name: "operator", Token: operatorToken, Actor: "console:operator",
		Scopes: []core.Scope{core.ScopeRead, core.ScopeRequest, core.ScopeDecide}}), func(o *Options) {
		sc, err := schedule.New(schedule.Options{Store: o.Store.(schedule.Store), Inbox: o.Engine.(*engine.Engine), Owner: "test"},
			[]schedule.Schedule{
				{Name: "status", Cron: "0 3 * * *", Timezone: "Europe/Berlin", Thread: "console:nightly", Text: "status api"},
				{Name: "deploy", Cron: "@hourly", Thread: "console:deploys", Text: "deploy api 1.2.3"},
			})
		if err != nil {
			t.Fatal(err)
		}
		o.Schedules = sc
	})
}

func scheduleItems(t *testing.T, r resp) map[string]map[string]any {
	t.Helper()
	items, _ := r.body["items"].([]any)
	out := map[string]map[string]any{}
	for _, it := range items {
		m := it.(map[string]any)
		out[m["name"].(string)] = m
	}
	return out
}

func TestSchedulesEndpoints(t *testing.T) {
	t.Parallel()
	b := setupSchedules(t)
	r := b.do(t, "GET", "/api/v1/schedules", operatorToken, nil)
	want(t, r, 200, "")
	items := scheduleItems(t, r)
	st := items["status"]
	if len(items) != 2 || st["cron"] != "0 3 * * *" || st["timezone"] != "Europe/Berlin" || st["thread"] != "console:nightly" ||
		st["paused"] != false || st["last_at"] != nil || st["next_at"] == nil {
		t.Fatalf("list = %s", r.raw)
	}

	// An operator may list but not run, pause or resume: nothing happens.
	for _, op := range []string{"run", "pause", "resume"} {
		want(t, b.do(t, "POST", "/api/v1/schedules/status/"+op, operatorToken, nil), 403, "missing_scope")
	}
	if runs, _, _ := b.store.RunList(context.Background(), core.RunListParams{Requester: "schedule:status"}); len(runs) != 0 {
		t.Fatalf("a refused run started %d runs", len(runs))
	}

	// An admin runs it now: a run of the schedule's text, as the schedule.
	r = b.do(t, "POST", "/api/v1/schedules/status/run", reqToken, nil)
	want(t, r, 200, "")
	run, _ := r.body["run"].(map[string]any)
	if r.body["status"] != "fired" || run == nil || run["requester"] != "schedule:status" || run["flow"] != "status" ||
		run["thread"] != "console:nightly" {
		t.Fatalf("run now = %s", r.raw)
	}
	b.waitRun(t, run["id"].(string), core.RunSucceeded)
	tickAt := r.body["tick_at"]
	r = b.do(t, "GET", "/api/v1/schedules", reqToken, nil)
	if st := scheduleItems(t, r)["status"]; st["last_at"] != tickAt || st["last_run_id"] != run["id"] {
		t.Errorf("after run now: %s", r.raw)
	}

	// Pause and resume, as the schedule view says.
	r = b.do(t, "POST", "/api/v1/schedules/status/pause", reqToken, nil)
	want(t, r, 200, "")
	if r.body["paused"] != true || r.body["next_at"] != nil || r.body["paused_by"] != "console:req" {
		t.Fatalf("pause = %s", r.raw)
	}
	if st := scheduleItems(t, b.do(t, "GET", "/api/v1/schedules", operatorToken, nil))["status"]; st["paused"] != true {
		t.Errorf("list after pause: %v", st)
	}
	r = b.do(t, "POST", "/api/v1/schedules/status/resume", reqToken, nil)
	want(t, r, 200, "")
	if r.body["paused"] != false || r.body["next_at"] == nil {
		t.Fatalf("resume = %s", r.raw)
	}
	entries, err := b.store.AuditList(context.Background(), approvals.AuditListParams{Actor: "console:req", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[approvals.AuditKind]int{}
	for _, e := range entries {
		kinds[e.Kind]++
	}
	if kinds[approvals.AuditScheduleRun] != 1 || kinds[approvals.AuditSchedulePaused] != 1 || kinds[approvals.AuditScheduleResumed] != 1 {
		t.Errorf("audited %v", kinds)
	}

	// Unknown names are 404 on every operation.
	for _, op := range []string{"run", "pause", "resume"} {
		want(t, b.do(t, "POST", "/api/v1/schedules/nope/"+op, reqToken, nil), 404, "not_found")
	}
	want(t, b.do(t, "GET", "/api/v1/schedules/status/run", reqToken, nil), 405, "method_not_allowed")
}

// TestScheduleRunOverlapIs409: a manual run while the schedule's run waits
// on an approval is refused under overlap: skip, and starts nothing.
func TestScheduleRunOverlapIs409(t *testing.T) {
	t.Parallel()
	b := setupSchedules(t)
	r := b.do(t, "POST", "/api/v1/schedules/deploy/run", reqToken, nil)
	want(t, r, 200, "")
	id := r.body["run"].(map[string]any)["id"].(string)
	b.waitRun(t, id, core.RunWaitingApproval)
	r = b.do(t, "POST", "/api/v1/schedules/deploy/run", reqToken, nil)
	want(t, r, 409, "overlap")
	if runs, _, _ := b.store.RunList(context.Background(), core.RunListParams{Requester: "schedule:deploy"}); len(runs) != 1 {
		t.Errorf("%d runs after a refused overlap, want 1", len(runs))
	}
}

// TestSchedulesUnconfigured: without a scheduler the list is empty and
// every name is unknown.
func TestSchedulesUnconfigured(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, "GET", "/api/v1/schedules", adminToken, nil)
	want(t, r, 200, "")
	if items, ok := r.body["items"].([]any); !ok || len(items) != 0 {
		t.Errorf("list = %s", r.raw)
	}
	want(t, b.do(t, "POST", "/api/v1/schedules/x/run", adminToken, nil), 404, "not_found")
}
