package storetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// overviewOf asserts s is a core.OverviewStore (every backend must be:
// the console's home page reads it) and returns it.
func overviewOf(t *testing.T, s core.Store) core.OverviewStore {
	t.Helper()
	o, ok := s.(core.OverviewStore)
	if !ok {
		t.Fatalf("%T does not implement core.OverviewStore", s)
	}
	return o
}

// suspendedAt is suspended with the approval's creation and expiry set.
func suspendedAt(t *testing.T, s core.Store, th core.Thread, created, expires time.Time) *approvals.Approval {
	t.Helper()
	id := queueRun(t, s, th)
	runs, err := s.RunClaim(ctx(t), core.RunClaimParams{Owner: "engine", Limit: 100, Now: t0, LeaseUntil: t0.Add(time.Hour)})
	if err != nil || !slices.ContainsFunc(runs, func(r *core.Run) bool { return r.ID == id }) {
		t.Fatalf("claim %s: %v, %v", id, runs, err)
	}
	a := approval(id, th, []string{"console:bob"}, 1)
	a.CreatedAt, a.ExpiresAt = created, expires
	if err := s.RunCheckpoint(ctx(t), core.Checkpoint{RunID: id, Owner: "engine", Now: t0, Status: core.RunWaitingApproval,
		Release: true, Approval: a, Step: &core.Step{Index: 0, Tool: "deploy", Status: core.StepWaitingApproval, ApprovalID: a.ID}}); err != nil {
		t.Fatalf("suspend %s: %v", id, err)
	}
	return a
}

// testOverview: the home page's numbers, each from its own rows: pending
// approvals (count, oldest, expiring soon, next expiry), runs created in
// the window by status (an older run is not counted), dead letters, and
// per channel the newest inbound event, the backlog and its dead letters —
// a configured channel with no traffic is listed with zeros.
func testOverview(t *testing.T, s core.Store) {
	ov := overviewOf(t, s)
	empty, err := ov.Overview(ctx(t), core.OverviewParams{Since: t0, SoonBefore: t0, Channels: []string{"console"}})
	if err != nil {
		t.Fatal(err)
	}
	if empty.PendingApprovals != 0 || !empty.OldestPendingAt.IsZero() || len(empty.RunsByStatus) != 0 ||
		len(empty.Channels) != 1 || !empty.Channels[0].LastEventAt.IsZero() {
		t.Fatalf("empty store overview = %+v", empty)
	}

	a1 := suspendedAt(t, s, thread("ov-1"), t0.Add(-30*time.Minute), t0.Add(3*time.Minute))
	suspendedAt(t, s, thread("ov-2"), t0.Add(-10*time.Minute), t0.Add(50*time.Minute))
	decided := suspendedAt(t, s, thread("ov-3"), t0.Add(-50*time.Minute), t0.Add(2*time.Minute))
	if _, err := decideAs(t, s, decided.ID, approve("console:bob")); err != nil {
		t.Fatal(err)
	}
	queueRun(t, s, thread("ov-4")) // queued, created t0
	old := newRun(thread("ov-old"))
	old.CreatedAt = t0.Add(-2 * time.Hour)
	ev := event(thread("ov-old"))
	ev.ReceivedAt = old.CreatedAt
	if _, err := s.InboxRecord(ctx(t), core.InboxRecordParams{Event: ev, Run: old}); err != nil {
		t.Fatal(err)
	}
	slackTh := core.Thread{Channel: "slack", Key: "C1"}
	slackEv := event(slackTh)
	slackEv.ReceivedAt = t0.Add(5 * time.Minute)
	if _, err := s.InboxRecord(ctx(t), core.InboxRecordParams{Event: slackEv, Replies: []core.OutboxMessage{
		{ID: newID("msg"), Thread: slackTh, Kind: core.KindReply, Text: "a", CreatedAt: t0.Add(5 * time.Minute)},
		{ID: newID("msg"), Thread: slackTh, Kind: core.KindReply, Text: "b", CreatedAt: t0.Add(6 * time.Minute)},
	}}); err != nil {
		t.Fatal(err)
	}
	claimed := claimOutbox(t, s, "slack", "o1", t0.Add(10*time.Minute))
	if len(claimed) == 0 {
		t.Fatal("no slack message to claim")
	}
	if err := s.OutboxRetry(ctx(t), core.OutboxRetryParams{ID: claimed[0].ID, Owner: "o1", Error: "403", Dead: true, Now: t0}); err != nil {
		t.Fatal(err)
	}

	got, err := ov.Overview(ctx(t), core.OverviewParams{Since: t0.Add(-time.Hour), SoonBefore: t0.Add(5 * time.Minute),
		Channels: []string{"console", "slack", "telegram"}})
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "pending approvals", got.PendingApprovals, 2)
	mustEqual(t, "oldest pending", got.OldestPendingAt, a1.CreatedAt)
	mustEqual(t, "expiring soon", got.ExpiringSoon, 1)
	mustEqual(t, "next expiry", got.NextExpiryAt, a1.ExpiresAt)
	// Runs since t0-1h: three suspended (two waiting, the decided one
	// requeued) and one queued; the two-hour-old run is outside.
	mustEqual(t, "runs by status", fmt.Sprint(got.RunsByStatus),
		fmt.Sprint(map[core.RunStatus]int{core.RunWaitingApproval: 2, core.RunQueued: 2}))
	mustEqual(t, "dead letters", got.DeadLetters, 1)
	if len(got.Channels) != 3 {
		t.Fatalf("channels = %+v, want console, slack, telegram", got.Channels)
	}
	con, sl, tg := got.Channels[0], got.Channels[1], got.Channels[2]
	mustEqual(t, "console channel", con.Channel, "console")
	mustEqual(t, "console last event", con.LastEventAt, t0)
	mustEqual(t, "slack last event", sl.LastEventAt, t0.Add(5*time.Minute))
	mustEqual(t, "slack backlog", sl.Backlog, 1)
	mustEqual(t, "slack oldest pending", sl.OldestPendingAt, t0.Add(6*time.Minute))
	mustEqual(t, "slack dead", sl.Dead, 1)
	mustEqual(t, "console dead", con.Dead, 0)
	if tg.Channel != "telegram" || !tg.LastEventAt.IsZero() || tg.Backlog != 0 || tg.Dead != 0 {
		t.Errorf("quiet channel = %+v, want zeros", tg)
	}

	known, err := ov.Overview(ctx(t), core.OverviewParams{Since: t0, SoonBefore: t0})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range known.Channels {
		names = append(names, c.Channel)
	}
	mustEqual(t, "channels without a list", fmt.Sprint(names), "[console slack]")
}

// testRunListFilters: IDPrefix (exact, case-sensitive, no wildcards),
// Channel, Flow and Requester each narrow the list and combine.
func testRunListFilters(t *testing.T, s core.Store) {
	mk := func(th core.Thread, flow, requester string) string {
		r := newRun(th)
		r.Flow, r.Requester = flow, requester
		ev := event(th)
		if _, err := s.InboxRecord(ctx(t), core.InboxRecordParams{Event: ev, Run: r}); err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	a := mk(thread("rf-1"), "deploy", "console:alice")
	b := mk(core.Thread{Channel: "slack", Key: "C1"}, "status", "slack:U1")
	c := mk(core.Thread{Channel: "slackish", Key: "C1"}, "deploy", "slack:U1")
	ids := func(p core.RunListParams) []string {
		t.Helper()
		runs, _, err := s.RunList(ctx(t), p)
		if err != nil {
			t.Fatalf("RunList(%+v): %v", p, err)
		}
		var out []string
		for _, r := range runs {
			out = append(out, r.ID)
		}
		return out
	}
	sameIDs(t, "by id prefix (whole id)", ids(core.RunListParams{IDPrefix: a}), a)
	sameIDs(t, "by id prefix", ids(core.RunListParams{IDPrefix: "run-"}), c, b, a)
	sameIDs(t, "by id prefix, other case", ids(core.RunListParams{IDPrefix: "RUN-"}))
	sameIDs(t, "by id prefix, LIKE wildcard", ids(core.RunListParams{IDPrefix: "run_"}))
	sameIDs(t, "by id prefix, LIKE percent", ids(core.RunListParams{IDPrefix: "%"}))
	sameIDs(t, "by channel", ids(core.RunListParams{Channel: "slack"}), b)
	sameIDs(t, "by flow", ids(core.RunListParams{Flow: "deploy"}), c, a)
	sameIDs(t, "by requester", ids(core.RunListParams{Requester: "slack:U1"}), c, b)
	sameIDs(t, "by flow and requester", ids(core.RunListParams{Flow: "deploy", Requester: "slack:U1"}), c)
}

// testApprovalListMoreFilters: IDPrefix, Tool and Decided.
func testApprovalListMoreFilters(t *testing.T, s core.Store) {
	a := suspended(t, s, thread("af-1"), []string{"console:bob"}, 1)
	b := suspended(t, s, thread("af-2"), []string{"console:bob"}, 1)
	if _, err := decideAs(t, s, b.ID, approve("console:bob")); err != nil {
		t.Fatal(err)
	}
	ids := func(p approvals.ApprovalListParams) []string {
		t.Helper()
		as, _, err := s.ApprovalList(ctx(t), p)
		if err != nil {
			t.Fatalf("ApprovalList(%+v): %v", p, err)
		}
		var out []string
		for _, x := range as {
			out = append(out, x.ID)
		}
		return out
	}
	sameIDs(t, "by id prefix (whole id)", ids(approvals.ApprovalListParams{IDPrefix: a.ID}), a.ID)
	sameIDs(t, "by id prefix", ids(approvals.ApprovalListParams{IDPrefix: "ap-"}), b.ID, a.ID)
	sameIDs(t, "by id prefix, wildcard", ids(approvals.ApprovalListParams{IDPrefix: "ap_"}))
	sameIDs(t, "by tool", ids(approvals.ApprovalListParams{Tool: "deploy"}), b.ID, a.ID)
	sameIDs(t, "by other tool", ids(approvals.ApprovalListParams{Tool: "restart"}))
	sameIDs(t, "decided", ids(approvals.ApprovalListParams{Decided: true}), b.ID)
}

// testAuditListNewest: Newest lists newest first, Before pages backwards,
// filters (Kind among them) still apply.
func testAuditListNewest(t *testing.T, s core.Store) {
	id := queueRun(t, s, thread("audit-newest"))
	var entries []approvals.AuditEntry
	for i := range 5 {
		kind := approvals.AuditKind("decision")
		if i%2 == 1 {
			kind = "refusal"
		}
		entries = append(entries, approvals.AuditEntry{At: t0, Kind: kind, Actor: "console:bob", RunID: id, Tool: "deploy"})
	}
	if err := s.RunCheckpoint(ctx(t), core.Checkpoint{RunID: id, Now: t0, Audit: entries}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p    approvals.AuditListParams
		want []int64
	}{
		{approvals.AuditListParams{Newest: true}, []int64{5, 4, 3, 2, 1}},
		{approvals.AuditListParams{Newest: true, Limit: 2}, []int64{5, 4}},
		{approvals.AuditListParams{Newest: true, Before: 4, Limit: 2}, []int64{3, 2}},
		{approvals.AuditListParams{Newest: true, After: 4}, []int64{5, 4, 3, 2, 1}},
		{approvals.AuditListParams{Newest: true, Kind: "refusal"}, []int64{4, 2}},
		{approvals.AuditListParams{Kind: "refusal"}, []int64{2, 4}},
	} {
		got, err := s.AuditList(ctx(t), c.p)
		if err != nil {
			t.Fatal(err)
		}
		var seqs []int64
		for _, e := range got {
			seqs = append(seqs, e.Seq)
		}
		if fmt.Sprint(seqs) != fmt.Sprint(c.want) {
			t.Errorf("AuditList(%+v) seqs = %v, want %v", c.p, seqs, c.want)
		}
	}
}

// testListByShortID: IDPrefix also names a UUID by a prefix of its random
// last group (core/shortid), for runs and approvals alike, while a prefix
// of the whole id still works and a shared timestamp prefix names every
// id that has it.
func testListByShortID(t *testing.T, s core.Store) {
	ts := newUUIDPrefix(t) // one millisecond's timestamp, shared by all
	mk := func(tail string) *approvals.Approval {
		return suspendedWith(t, s, thread("short-"+tail), []string{"console:bob"}, 1, func(a *approvals.Approval) { a.ID = ts + tail })
	}
	// Runs and approvals with chosen random parts: ids are set by the
	// caller, so rewrite them before they are stored.
	runID := func(tail string) string {
		r := newRun(thread("short-run-" + tail))
		r.ID = ts + tail
		if _, err := s.InboxRecord(ctx(t), core.InboxRecordParams{Event: event(r.Thread), Run: r}); err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	ra, rb := runID("3f9a2c000001"), runID("3f9b00000002")
	runs := func(typed string) []string {
		t.Helper()
		rs, _, err := s.RunList(ctx(t), core.RunListParams{IDPrefix: typed})
		if err != nil {
			t.Fatalf("RunList(%q): %v", typed, err)
		}
		var out []string
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	sameIDs(t, "runs by short id", runs("3f9a2c0"), ra)
	sameIDs(t, "runs by four characters", runs("3f9b"), rb)
	sameIDs(t, "runs by a shared short prefix", runs("3f9"))              // three characters: the id's start only
	sameIDs(t, "runs by the shared timestamp", runs(ts[:13]), rb, ra)     // the old prefix names both
	sameIDs(t, "runs by the whole id", runs(ra), ra)                      // exact
	sameIDs(t, "runs by a tail of the wrong case", runs("3F9A2C0"))       // ids are lower case
	sameIDs(t, "runs by a tail with a wildcard", runs("3f9_"))            // no LIKE
	sameIDs(t, "runs by a middle group", runs(strings.Split(ra, "-")[1])) // only the last group counts

	aa, ab := mk("3f9a2c000003"), mk("77aa00000004")
	aps := func(typed string) []string {
		t.Helper()
		as, _, err := s.ApprovalList(ctx(t), approvals.ApprovalListParams{IDPrefix: typed})
		if err != nil {
			t.Fatalf("ApprovalList(%q): %v", typed, err)
		}
		var out []string
		for _, x := range as {
			out = append(out, x.ID)
		}
		return out
	}
	sameIDs(t, "approvals by short id", aps("3f9a2c0"), aa.ID)
	sameIDs(t, "approvals by four characters", aps("77aa"), ab.ID)
	sameIDs(t, "approvals by the shared timestamp", aps(ts[:13]), ab.ID, aa.ID)
	sameIDs(t, "approvals by the whole id", aps(ab.ID), ab.ID)
}

// newUUIDPrefix is the first four groups of a fresh UUIDv7 ("01a2504f-
// 1111-7000-8000-"): ids made from it share a timestamp, as a run and its
// approval do.
func newUUIDPrefix(t *testing.T) string {
	t.Helper()
	u, err := uuid.NewV7()
	if err != nil {
		t.Fatal(err)
	}
	return u.String()[:24]
}
