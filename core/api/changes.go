package api

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/sse"
)

// The bounds of one pass of the change stream: how many pending approvals
// and newest runs it compares, how many runs it keeps following after
// they leave that window, and the shortest gap between two passes (a burst
// of commits is one pass, not one per commit).
const (
	changesApprovals = maxLimit
	changesRuns      = 50
	changesFollowed  = 200
	changesMinGap    = 100 * time.Millisecond
)

// The kinds a change stream carries (?kinds=approvals,runs).
const (
	changeKindApprovals = "approvals"
	changeKindRuns      = "runs"
)

// changeState is what one connection has sent, so each pass sends only
// what changed: an approval's status, decisions or expiry; a run's status
// or update time.
type changeState struct {
	approvals map[string]string // pending (or last seen pending) approval id → version
	runs      map[string]runSeen
	kinds     map[string]bool
	n         int64 // event ids of this connection
}

func approvalVersion(a *approvals.Approval) string {
	return fmt.Sprintf("%s/%d/%d", a.Status, len(a.Decisions), a.ExpiresAt.UnixNano())
}

// runSeen is what a connection last sent of a run.
type runSeen struct {
	version string
	final   bool
}

func runVersion(r *core.Run) string {
	return fmt.Sprintf("%s/%d", r.Status, r.UpdatedAt.UnixNano())
}

// changes is the live feed of an operator's queue (GET /api/v1/events):
// Server-Sent Events of approvals and runs as they change, for clients
// that show a queue (opsgate tui, opsgate approvals watch|wait).
//
//	id: <n>
//	event: approval | run | ready
//	data: <the approval as GET /api/v1/approvals/{id} shows it, the run as
//	      the run list shows it (no steps), or {"approvals":N,"runs":M}>
//
// Every connection starts with the current state: each pending approval
// and the newest runs, then "event: ready"; after that, one event per
// approval or run that changed (an approval that leaves pending is sent
// once more with its final status). A reconnecting client therefore
// replaces what it had rather than resuming; ids number the events of one
// connection only. ?kinds= narrows the feed to approvals or runs. It
// carries what the lists it is made of show the token (core/authority).
//
// It compares snapshots on every store wake-up (and on the polling
// fallback, so a missed NOTIFY across replicas only delays it): two list
// reads per pass, at most one pass per changesMinGap.
func (s *server) changes(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	st := &changeState{approvals: map[string]string{}, runs: map[string]runSeen{}, kinds: map[string]bool{}}
	if k := r.URL.Query().Get("kinds"); k != "" {
		for _, p := range strings.Split(k, ",") {
			switch p = strings.TrimSpace(p); p {
			case changeKindApprovals, changeKindRuns:
				st.kinds[p] = true
			default:
				s.fail(w, r, invalid("kinds", "unknown kind %q: want approvals, runs or both (comma-separated)", p))
				return
			}
		}
	} else {
		st.kinds[changeKindApprovals], st.kinds[changeKindRuns] = true, true
	}
	stream, err := newStream(w)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// Subscribe before the first read so no commit between the read and
	// the wait is missed.
	var wakes []<-chan struct{}
	for _, topic := range []string{core.TopicEvents, core.TopicRuns, core.TopicOutbox} {
		c, cancel := s.o.Store.Subscribe(topic)
		defer cancel()
		wakes = append(wakes, c)
	}
	if stream.Open(2*time.Second) != nil {
		return
	}
	// Coalesce: a run's commits come in bursts.
	wait := stream.Waiter(sse.WaitOptions{Poll: s.o.PollInterval, Ping: s.o.PingInterval, MinGap: changesMinGap}, wakes...)
	defer wait.Stop()
	first := true
	for {
		sent, err := s.changePass(ctx, stream, st)
		if err != nil {
			if ctx.Err() == nil {
				s.log.WarnContext(ctx, "api: change stream", "err", err)
			}
			return
		}
		if first {
			first = false
			st.n++
			if stream.JSON(strconv.FormatInt(st.n, 10), "ready", map[string]int{"approvals": len(st.approvals), "runs": len(st.runs)}) != nil {
				return
			}
			sent++
		}
		if sent > 0 {
			stream.Flush()
		}
		if _, err := wait.Wait(ctx); err != nil {
			return
		}
	}
}

// changePass compares the store with what st says was sent and writes an
// event per difference.
func (s *server) changePass(ctx context.Context, stream *sse.Stream, st *changeState) (int, error) {
	sent := 0
	emit := func(typ string, v any) error {
		st.n++
		if err := stream.JSON(strconv.FormatInt(st.n, 10), typ, v); err != nil {
			return err
		}
		sent++
		return nil
	}
	// Each pass sees what the token may see under the live configuration
	// (a reload can take an approval out of a person's queue).
	view := s.auth.Viewer(authFrom(ctx))
	if st.kinds[changeKindApprovals] {
		pending, _, err := s.o.Store.ApprovalList(ctx, approvals.ApprovalListParams{Status: approvals.StatusPending, Limit: changesApprovals})
		if err == nil {
			pending, err = view.Approvals(ctx, pending)
		}
		if err != nil {
			return sent, fmt.Errorf("list pending approvals: %w", err)
		}
		seen := make(map[string]bool, len(pending))
		var changed []*approvals.Approval
		for _, a := range pending {
			seen[a.ID] = true
			if v := approvalVersion(a); st.approvals[a.ID] != v {
				st.approvals[a.ID] = v
				changed = append(changed, a)
			}
		}
		// Sent as pending, no longer in the pending list: decided, expired,
		// or beyond the page. Read each once to tell.
		for id, v := range st.approvals {
			if seen[id] {
				continue
			}
			a, err := s.o.Store.ApprovalGet(ctx, id)
			if isNotFound(err) {
				delete(st.approvals, id)
				continue
			}
			if err != nil {
				return sent, fmt.Errorf("get approval %s: %w", id, err)
			}
			if ok, err := view.SeesApproval(ctx, a); err != nil || !ok {
				delete(st.approvals, id)
				if err != nil {
					return sent, fmt.Errorf("approval %s: %w", id, err)
				}
				continue
			}
			if a.Status != approvals.StatusPending {
				delete(st.approvals, id)
			} else if approvalVersion(a) == v {
				continue
			} else {
				st.approvals[id] = approvalVersion(a)
			}
			changed = append(changed, a)
		}
		views, err := s.approvalViews(ctx, changed)
		if err != nil {
			return sent, fmt.Errorf("approval views: %w", err)
		}
		// Oldest first, as they were asked.
		for i := len(views) - 1; i >= 0; i-- {
			if err := emit("approval", views[i]); err != nil {
				return sent, err
			}
		}
	}
	if st.kinds[changeKindRuns] {
		runs, _, err := s.o.Store.RunList(ctx, core.RunListParams{Limit: changesRuns, Requester: s.auth.RunFilter(authFrom(ctx))})
		if err == nil {
			runs, err = view.Runs(ctx, runs)
		}
		if err != nil {
			return sent, fmt.Errorf("list runs: %w", err)
		}
		seen := make(map[string]bool, len(runs))
		var changed []*core.Run
		for _, run := range runs {
			seen[run.ID] = true
			if v := runVersion(run); st.runs[run.ID].version != v {
				st.runs[run.ID] = runSeen{version: v, final: run.Status.Final()}
				changed = append(changed, run)
			}
		}
		// Runs that left the window: follow the unfinished ones until they
		// end (a long deploy is still worth watching), forget the rest.
		followed := 0
		for id, v := range st.runs {
			if seen[id] {
				continue
			}
			if followed >= changesFollowed || v.final {
				delete(st.runs, id)
				continue
			}
			run, err := s.o.Store.RunGet(ctx, id)
			if isNotFound(err) {
				delete(st.runs, id)
				continue
			}
			if err != nil {
				return sent, fmt.Errorf("get run %s: %w", id, err)
			}
			if ok, err := view.SeesRun(ctx, run); err != nil || !ok {
				delete(st.runs, id)
				if err != nil {
					return sent, fmt.Errorf("run %s: %w", id, err)
				}
				continue
			}
			followed++
			if run.Status.Final() {
				delete(st.runs, id)
			} else {
				st.runs[id] = runSeen{version: runVersion(run)}
			}
			if runVersion(run) != v.version {
				changed = append(changed, run)
			}
		}
		for i := len(changed) - 1; i >= 0; i-- {
			v := NewRunView(changed[i])
			v.Steps = []StepView{} // as the list shows it; GET /api/v1/runs/{id} has them
			if err := emit("run", v); err != nil {
				return sent, err
			}
		}
	}
	return sent, nil
}
