package web

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/schedule"
)

// TestSchedulesPage: the page lists each schedule with its next fire
// time; an admin runs, pauses and resumes it (audited); a token without
// admin sees no buttons and is refused; nothing runs without the CSRF
// token.
func TestSchedulesPage(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{
		tokens: []Token{{Name: "reader", Token: readOnlyToken, Actor: "console:reader", Scopes: []core.Scope{core.ScopeRead, core.ScopeRequest}}},
		schedules: []schedule.Schedule{{Name: "nightly-deploy", Cron: "0 3 * * *", Timezone: "Europe/Berlin",
			Thread: "console:nightly", Text: "deploy api 1.2.3"}},
	})
	admin := newClient(t, b.url)
	csrf := admin.signIn(adminToken)
	r := admin.do("GET", "/schedules", nil, nil)
	if r.status != 200 || !strings.Contains(r.body, "nightly-deploy") || !strings.Contains(r.body, "0 3 * * *") ||
		!strings.Contains(r.body, "Europe/Berlin") || !strings.Contains(r.body, `<a href="/chat?thread=nightly">console:nightly</a>`) ||
		!strings.Contains(r.body, `<time datetime="`) || !strings.Contains(r.body, "Run now") || !strings.Contains(r.body, "never") {
		t.Fatalf("schedules page: %d %s", r.status, r.body)
	}

	reader := newClient(t, b.url)
	rcsrf := reader.signIn(readOnlyToken)
	if r := reader.do("GET", "/schedules", nil, nil); r.status != 200 || strings.Contains(r.body, "Run now") {
		t.Fatalf("reader's page: %d, offers run: %v", r.status, strings.Contains(r.body, "Run now"))
	}
	for _, op := range []string{"run", "pause", "resume"} {
		if r := reader.do("POST", "/schedules/nightly-deploy/"+op, url.Values{csrfField: {rcsrf}}, nil); r.status != http.StatusForbidden {
			t.Errorf("reader %s: %d", op, r.status)
		}
	}
	if r := admin.do("POST", "/schedules/nightly-deploy/run", url.Values{}, nil); r.status != http.StatusForbidden {
		t.Errorf("run without the CSRF token: %d", r.status)
	}
	if runs, _, _ := b.store.RunList(context.Background(), core.RunListParams{Requester: "schedule:nightly-deploy"}); len(runs) != 0 {
		t.Fatalf("refused requests started %d runs", len(runs))
	}

	r = admin.do("POST", "/schedules/nightly-deploy/run", url.Values{csrfField: {csrf}}, nil)
	if r.status != http.StatusSeeOther || !strings.Contains(r.header.Get("Location"), "what=fired") {
		t.Fatalf("run now: %d %v", r.status, r.header.Get("Location"))
	}
	run, a := b.waitPending(t, "console:nightly")
	if run.Requester != "schedule:nightly-deploy" || a.Requester != "schedule:nightly-deploy" {
		t.Fatalf("run requester %s, approval requester %s", run.Requester, a.Requester)
	}
	// Its approval is answered in the console like any other.
	r = admin.do("POST", "/approvals/"+a.ID+"/decision", url.Values{csrfField: {csrf}, "action": {"approve"}}, nil)
	if r.status != http.StatusSeeOther {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	b.waitRun(t, run.ID, core.RunSucceeded)
	// Overlap is gone; a second run while none waits works, a pause shows.
	if r := admin.do("POST", "/schedules/nightly-deploy/pause", url.Values{csrfField: {csrf}}, nil); r.status != http.StatusSeeOther {
		t.Fatalf("pause: %d", r.status)
	}
	if r := admin.do("GET", "/schedules", nil, nil); !strings.Contains(r.body, "paused by console:admin") || !strings.Contains(r.body, "Resume") {
		t.Fatalf("paused page: %s", r.body)
	}
	if r := admin.do("POST", "/schedules/nightly-deploy/resume", url.Values{csrfField: {csrf}}, nil); r.status != http.StatusSeeOther {
		t.Fatalf("resume: %d", r.status)
	}
	if r := admin.do("POST", "/schedules/nope/pause", url.Values{csrfField: {csrf}}, nil); r.status != http.StatusNotFound {
		t.Errorf("pause of an unknown schedule: %d", r.status)
	}
	if r := admin.do("POST", "/schedules/nightly-deploy/explode", url.Values{csrfField: {csrf}}, nil); r.status != http.StatusNotFound {
		t.Errorf("unknown action: %d", r.status)
	}
	es, err := b.store.AuditList(context.Background(), approvals.AuditListParams{Actor: "console:admin", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[approvals.AuditKind]int{}
	for _, e := range es {
		kinds[e.Kind]++
	}
	if kinds[approvals.AuditScheduleRun] != 1 || kinds[approvals.AuditSchedulePaused] != 1 || kinds[approvals.AuditScheduleResumed] != 1 {
		t.Errorf("audited %v", kinds)
	}
}

// TestSchedulesPageWithoutSchedules says there are none.
func TestSchedulesPageWithoutSchedules(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	c := newClient(t, b.url)
	csrf := c.signIn(adminToken)
	if r := c.do("GET", "/schedules", nil, nil); r.status != 200 || !strings.Contains(r.body, "No schedules are configured") {
		t.Fatalf("page: %d", r.status)
	}
	if r := c.do("POST", "/schedules/x/run", url.Values{csrfField: {csrf}}, nil); r.status != http.StatusNotFound {
		t.Errorf("run: %d", r.status)
	}
}
