package web

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core"
)

func TestRelTime(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	for d, want := range map[time.Duration]string{
		10 * time.Second: "just now", -10 * time.Second: "just now", 3 * time.Minute: "3 min ago",
		-12 * time.Minute: "in 12 min", 2 * time.Hour: "2 h ago", 5 * 24 * time.Hour: "5 d ago", 80 * time.Minute: "80 min ago",
	} {
		if got := relTime(now.Add(-d), now); got != want {
			t.Errorf("relTime(-%v) = %q, want %q", d, got, want)
		}
	}
}

func TestArgDiff(t *testing.T) {
	t.Parallel()
	if d := argDiff(map[string]any{"a": 1.0}, map[string]any{"a": 1.0}); d != nil {
		t.Errorf("equal args diff = %v", d)
	}
	d := argDiff(map[string]any{"env": "staging", "v": "1", "gone": true}, map[string]any{"env": "staging", "v": "2", "new": 3.0})
	var got []string
	for _, l := range d {
		got = append(got, l.Op+l.Key+"="+l.Value)
	}
	want := " env=\"staging\",-gone=true,+new=3,-v=\"1\",+v=\"2\""
	if strings.Join(got, ",") != want {
		t.Errorf("diff = %s, want %s", strings.Join(got, ","), want)
	}
}

// TestHomePageCountsWhatNeedsAttention: the home page counts the pending
// approval, the run of the last hour, and lists the console channel.
func TestHomePageCountsWhatNeedsAttention(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	c := newClient(t, b.url)
	c.signIn(adminToken)
	r := c.do("GET", "/", nil, nil)
	if r.status != http.StatusOK || !strings.Contains(r.body, `data-field="pending-count">0<`) || !strings.Contains(r.body, "Nothing waits for a decision") {
		t.Fatalf("empty home: %d\n%s", r.status, r.body)
	}
	b.send(t, "home", "deploy api 1.2.3")
	_, a := b.waitPending(t, "console:home")
	r = c.do("GET", "/", nil, nil)
	for _, want := range []string{`data-field="pending-count">1<`, `data-field="runs-count">1<`, `href="/approvals/` + a.ID + `"`,
		`data-status="waiting_approval">1<`, `id="hc-console"`, `data-field="dead-count">0<`} {
		if !strings.Contains(r.body, want) {
			t.Errorf("home lacks %q:\n%s", want, r.body)
		}
	}
	if !regexp.MustCompile(`oldest <time datetime="[^"]+" title="[^"]+ UTC" data-rel>`).MatchString(r.body) {
		t.Errorf("the oldest pending approval has no relative time with the absolute one as its title")
	}
}

// TestTablesFilterNewestFirst: decided approvals filter by tool, decider
// and channel; runs by channel; the audit log lists newest first.
func TestTablesFilterNewestFirst(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	c := newClient(t, b.url)
	c.signIn(adminToken)
	b.send(t, "tables", "deploy api 1.2.3")
	_, a := b.waitPending(t, "console:tables")
	if _, err := b.eng.Decide(context.Background(), core.Actor{ID: "slack:U1"}, "slack", core.Decision{ApprovalID: a.ID, Action: "approve"}); err != nil {
		t.Fatal(err)
	}
	row := `id="ad-` + a.ID + `"`
	for q, want := range map[string]bool{
		"": true, "&tool=deploy": true, "&tool=xss": false, "&actor=slack:U1": true, "&actor=console:bob": false,
		"&channel=slack": true, "&channel=email": false, "&requester=console:bob": true, "&status=rejected": false,
	} {
		r := c.do("GET", "/approvals?status=decided"+strings.Replace(q, "&status=decided", "", 1), nil, nil)
		if q == "&status=rejected" {
			r = c.do("GET", "/approvals?status=rejected", nil, nil)
		}
		if r.status != 200 || strings.Contains(r.body, row) != want {
			t.Errorf("decided approvals%s: %d, row shown %v, want %v", q, r.status, !want, want)
		}
	}
	r := c.do("GET", "/approvals?status=decided", nil, nil)
	if !strings.Contains(r.body, "slack:U1") || !strings.Contains(r.body, `<td data-label="Via">slack</td>`) {
		t.Errorf("decided table does not say who decided and where:\n%s", r.body)
	}
	// The status filter offers every final status (approvals.Statuses), and
	// not pending, which has its own page.
	for _, st := range []string{"decided", "approved", "rejected", "edited", "expired"} {
		if !strings.Contains(r.body, `<option value="`+st+`"`) {
			t.Errorf("decided page's status filter lacks %q", st)
		}
	}
	if strings.Contains(r.body, `<option value="pending"`) {
		t.Error("decided page's status filter offers pending")
	}
	if r := c.do("GET", "/runs?channel=console", nil, nil); !strings.Contains(r.body, "r-"+a.RunID) {
		t.Errorf("runs?channel=console lacks the run")
	}
	if r := c.do("GET", "/runs?channel=slack", nil, nil); strings.Contains(r.body, "r-"+a.RunID) {
		t.Errorf("runs?channel=slack shows a console run")
	}
	r = c.do("GET", "/audit", nil, nil)
	seqs := regexp.MustCompile(`<tr id="a-(\d+)"`).FindAllStringSubmatch(r.body, -1)
	if len(seqs) < 2 || seqs[0][1] <= seqs[len(seqs)-1][1] && len(seqs[0][1]) == len(seqs[len(seqs)-1][1]) {
		t.Errorf("audit is not newest first: %v", seqs)
	}
	if r := c.do("GET", "/audit?kind=approval.decided", nil, nil); strings.Contains(r.body, "approval.requested</span>") || !strings.Contains(r.body, "approval.decided</span>") {
		t.Errorf("audit kind filter:\n%s", r.body)
	}
	if r := c.do("GET", "/audit?before=x", nil, nil); r.status != http.StatusBadRequest {
		t.Errorf("audit?before=x: %d", r.status)
	}
	// Unknown status filters are refused (core.RunStatus/DeliveryStatus.Valid).
	for _, p := range []string{"/runs?status=bogus", "/runs?status=Queued", "/deliveries?status=lost", "/deliveries?status=Dead"} {
		if r := c.do("GET", p, nil, nil); r.status != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", p, r.status)
		}
	}
	for _, p := range []string{"/runs?status=waiting_input", "/deliveries?status=sent"} {
		if r := c.do("GET", p, nil, nil); r.status != http.StatusOK {
			t.Errorf("%s: %d, want 200", p, r.status)
		}
	}
}
