package web

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// The home page answers an on-call engineer's first questions: does
// anything wait for me, did anything fail, is every channel alive. Every
// number links to the page that lists it.
const (
	homeWindow     = time.Hour        // runs counted by status
	homeSoon       = 10 * time.Minute // an approval expiring within this is "soon"
	homeFailures   = 8                // failed and interrupted runs listed
	homeNextToDo   = 5                // pending approvals listed, soonest expiry first
	homeStaleAfter = 24 * time.Hour   // a channel quiet this long is marked quiet
)

type statusCount struct {
	Status string
	Count  int
}

type channelRow struct {
	Channel, LastEventAt, OldestPendingAt string
	Backlog, Dead                         int
	Quiet, Stuck                          bool
}

func (s *server) homePage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	now := s.o.Now().UTC()
	actor := infoFrom(ctx).auth
	view := s.auth.Viewer(actor)
	// The counts are of every run: only a token that reads every run sees
	// them; a confined one sees its own approvals and failures.
	ov := &core.Overview{RunsByStatus: map[core.RunStatus]int{}}
	if actor.ReadsAll() {
		var err error
		ov, err = s.o.Store.Overview(ctx, core.OverviewParams{Since: now.Add(-homeWindow), SoonBefore: now.Add(homeSoon),
			Channels: s.o.Channels})
		if err != nil {
			s.fail(w, r, fmt.Errorf("web: home overview: %w", err))
			return
		}
	}
	pending, _, err := s.o.Store.ApprovalList(ctx, approvals.ApprovalListParams{Status: approvals.StatusPending, Limit: 200})
	if err == nil {
		pending, err = view.Approvals(ctx, pending)
	}
	if err != nil {
		s.fail(w, r, fmt.Errorf("web: home approvals: %w", err))
		return
	}
	if !actor.ReadsAll() {
		ov.PendingApprovals = len(pending)
	}
	slices.SortStableFunc(pending, func(a, b *approvals.Approval) int { return a.ExpiresAt.Compare(b.ExpiresAt) })
	cards, err := s.cards(ctx, pending[:min(len(pending), homeNextToDo)])
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var failed []runRow
	for _, st := range []core.RunStatus{core.RunFailed, core.RunInterrupted} {
		runs, _, err := s.o.Store.RunList(ctx, core.RunListParams{Status: st, Limit: homeFailures, Requester: s.auth.RunFilter(actor)})
		if err == nil {
			runs, err = view.Runs(ctx, runs)
		}
		if err != nil {
			s.fail(w, r, fmt.Errorf("web: home %s runs: %w", st, err))
			return
		}
		for _, run := range runs {
			failed = append(failed, runRow{ID: run.ID, Flow: run.Flow, Thread: run.Thread.String(), Requester: run.Requester,
				Status: string(run.Status), Reason: run.ErrorCode + ": " + run.ErrorMessage, UpdatedAt: ts(run.UpdatedAt)})
		}
	}
	slices.SortStableFunc(failed, func(a, b runRow) int { return -compareStr(a.UpdatedAt, b.UpdatedAt) })
	failed = failed[:min(len(failed), homeFailures)]

	var byStatus []statusCount
	total := 0
	for _, st := range core.RunStatuses {
		if n := ov.RunsByStatus[st]; n > 0 {
			byStatus = append(byStatus, statusCount{Status: string(st), Count: n})
			total += n
		}
	}
	var chans []channelRow
	for _, c := range ov.Channels {
		row := channelRow{Channel: c.Channel, LastEventAt: ts(c.LastEventAt), OldestPendingAt: ts(c.OldestPendingAt),
			Backlog: c.Backlog, Dead: c.Dead}
		row.Quiet = c.LastEventAt.IsZero() || now.Sub(c.LastEventAt) > homeStaleAfter
		row.Stuck = c.Backlog > 0 && now.Sub(c.OldestPendingAt) > 5*time.Minute
		chans = append(chans, row)
	}
	s.render(w, r, http.StatusOK, "home", map[string]any{"Title": "Home", "Ov": ov, "Oldest": ts(ov.OldestPendingAt),
		"NextExpiry": ts(ov.NextExpiryAt), "Next": cards, "Failed": failed, "ByStatus": byStatus, "RunsTotal": total,
		"Channels": chans, "Window": "hour", "Soon": int(homeSoon / time.Minute),
		"Version": fmt.Sprintf("%d/%d/%d/%d", ov.PendingApprovals, total, ov.DeadLetters, len(failed))})
}

func compareStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
