package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/store/pgtest"
)

// TestPostgresRestartMidRuns restarts Postgres three times under a mixed
// workload — runs dispatching tools, suspending for approval, being
// decided — and then checks what issue 16 asks of a store outage: no run
// left running with nothing executing it, no step left dispatching (this
// process never died, so every outcome is known and no run may end
// interrupted), nothing lost (every acknowledged message has its one run,
// every run its one reply, every decision its effect) and nothing twice
// (one dispatch per step, one card per approval, one end per run), and the
// audit chain verifies. The second outage outlasts the old give-up window
// (about 1.5 s of retries) and the lease (1 s), so leases lapse and the
// engine claims its own runs back.
//
// It stops the server, so it runs on a private cluster, never on the
// shared $OPSGATE_TEST_POSTGRES_DSN.
func TestPostgresRestartMidRuns(t *testing.T) {
	t.Parallel()
	cl := pgtest.StartCluster(t)
	b := backends[1]
	b.newDSN = func(testing.TB) string { return cl.DSN() }
	h := setup(t, b)
	for _, r := range []*recorder{h.fx.status, h.fx.deploy, h.fx.restart} {
		r.mu.Lock()
		r.delay = 40 * time.Millisecond
		r.mu.Unlock()
	}
	ctx := context.Background()
	deadline := time.Now().Add(90 * time.Second)
	retry := func(what string, f func() error) {
		t.Helper()
		for {
			err := f()
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: still failing: %v", what, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// The workload: per thread a sequence of requests, each with the run
	// status it must end in.
	type msg struct {
		thread, text string
		want         core.RunStatus
		ev           core.ChannelEvent
		runID        string
	}
	const threads = 16
	var msgs []*msg
	for i := range threads {
		th := fmt.Sprintf("console:pr-%d", i)
		svc := fmt.Sprintf("svc-%d", i)
		for k, m := range []msg{
			{text: "status " + svc, want: core.RunSucceeded},
			{text: "deploy " + svc + " 1.0", want: core.RunSucceeded},
			{text: "check " + svc, want: core.RunSucceeded},
			{text: "deploy " + svc + " 2.0-reject", want: core.RunRejected},
			{text: "restart " + svc, want: core.RunSucceeded},
		}[i%2:] {
			m.thread = th
			m.ev = h.event("console:req", th, m.text)
			m.ev.EventID = fmt.Sprintf("restart-%d-%d", i, k)
			msgs = append(msgs, &m)
		}
	}
	submit := func(ms []*msg) {
		var wg sync.WaitGroup
		for _, m := range ms {
			wg.Go(func() {
				retry("submit "+m.text, func() error {
					rc, err := h.eng.HandleEvent(ctx, m.ev)
					m.runID = rc.RunID
					return err
				})
			})
		}
		wg.Wait()
	}

	// The decider approves every deploy except the "-reject" ones, through
	// the engine, retrying through outages; a retry that finds its own
	// earlier answer already applied (the answer was lost) is fine.
	var decisions atomic.Int64
	stopDecider := make(chan struct{})
	deciderDone := make(chan struct{})
	go func() {
		defer close(deciderDone)
		for {
			select {
			case <-stopDecider:
				return
			case <-time.After(15 * time.Millisecond):
			}
			pending, _, err := h.store.ApprovalList(ctx, approvals.ApprovalListParams{Status: approvals.StatusPending, Limit: 100})
			if err != nil {
				continue
			}
			for _, a := range pending {
				action := "approve"
				if strings.Contains(fmt.Sprint(a.ProposedArgs["version"]), "reject") {
					action = "reject"
				}
				_, err := h.decide(sre[int(decisions.Load())%3], a.ID, action, func(d *core.Decision) { d.Reason = "restart test" })
				var de *core.DecisionError
				switch {
				case err == nil:
					decisions.Add(1)
				case errors.As(err, &de) && de.Code == core.DecisionAlreadyDecided:
				case errors.As(err, &de):
					t.Errorf("decide %s: refused: %v", a.ID, err)
				}
			}
		}
	}()
	defer func() {
		select {
		case <-stopDecider:
		default:
			close(stopDecider)
		}
		<-deciderDone
	}()

	inflight := func() int {
		n := 0
		for _, r := range []*recorder{h.fx.status, h.fx.deploy, h.fx.restart} {
			r.mu.Lock()
			n += r.inflight
			r.mu.Unlock()
		}
		return n
	}
	restart := func(down time.Duration) {
		t.Helper()
		waitFor(t, "a tool call in flight", func() bool { return inflight() > 0 })
		if err := cl.Stop(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(down) // the outage; nothing is asserted about it
		if err := cl.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}

	third := len(msgs) / 3
	submit(msgs[:third])
	restart(0)
	submit(msgs[third : 2*third])
	restart(2500 * time.Millisecond)
	submit(msgs[2*third:])
	waitFor(t, "decisions under way", func() bool { return decisions.Load() > 4 })
	restart(300 * time.Millisecond)

	// Everything settles: every run final, with the status it must have.
	runs := map[string]*core.Run{}
	for _, m := range msgs {
		var run *core.Run
		retry("run "+m.runID+" final", func() error {
			r, err := h.store.RunGet(ctx, m.runID)
			if err != nil {
				return err
			}
			if !r.Status.Final() {
				return fmt.Errorf("run %s (%s) is %s", r.ID, m.text, r.Status)
			}
			run = r
			return nil
		})
		if run.Status != m.want {
			t.Errorf("%q in %s ended %s (%s: %s), want %s", m.text, m.thread, run.Status, run.ErrorCode, run.ErrorMessage, m.want)
		}
		if runs[run.ID] != nil {
			t.Errorf("two messages share run %s", run.ID)
		}
		runs[run.ID] = run
		for _, st := range run.Steps {
			if st.Status == core.StepDispatching || st.Status == core.StepInterrupted || st.Status == core.StepWaitingApproval {
				t.Errorf("run %s (%s) ended %s with step %d %s", run.ID, m.text, run.Status, st.Index, st.Status)
			}
		}
	}
	close(stopDecider)
	<-deciderDone
	// An execution leaves the engine's set just after its final checkpoint
	// commits, so a run can read final a moment before; none may stay.
	waitFor(t, "no run executing after every run ended", func() bool { return len(h.eng.executing()) == 0 })

	// Nothing lost, nothing twice: one run per message in each thread...
	perThread := map[string]int{}
	for _, m := range msgs {
		perThread[m.thread]++
	}
	for th, n := range perThread {
		items, _, err := h.store.RunList(ctx, core.RunListParams{Thread: th, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(items) != n {
			t.Errorf("thread %s: %d runs for %d messages", th, len(items), n)
		}
	}
	// ...one dispatch per step that ran, with its key...
	recs := map[string]*recorder{"status": h.fx.status, "deploy": h.fx.deploy, "restart": h.fx.restart}
	for id, run := range runs {
		for _, st := range run.Steps {
			calls := 0
			for _, c := range recs[st.Tool].callsFor(id) {
				if c.IdempotencyKey == idempotencyKey(id, st.Index) {
					calls++
				}
			}
			want := 0
			if st.Status == core.StepSucceeded {
				want = 1
			}
			if calls != want || (want == 1 && st.Attempts != 1) {
				t.Errorf("run %s step %d (%s, %s): %d dispatches, %d attempts; want %d", id, st.Index, st.Tool, st.Status, calls, st.Attempts, want)
			}
		}
	}
	// ...one reply per run, one card per approval, one end per run...
	replies, cards := map[string]int{}, map[string]int{}
	for cursor := ""; ; {
		items, next, err := h.store.OutboxList(ctx, core.OutboxListParams{Status: core.DeliveryPending, Limit: 500, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range items {
			switch m.Kind {
			case core.KindReply:
				replies[m.RunID]++
			case core.KindCard:
				cards[m.ApprovalID]++
			}
		}
		if next == "" {
			break
		}
		cursor = next
	}
	for id := range runs {
		if replies[id] != 1 {
			t.Errorf("run %s: %d replies, want 1", id, replies[id])
		}
		if n := h.countEvents(id, core.EventTurnFinished); n != 1 {
			t.Errorf("run %s: %d turn.finished events, want 1", id, n)
		}
	}
	all, _, err := h.store.ApprovalList(ctx, approvals.ApprovalListParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range all {
		if cards[a.ID] != 1 {
			t.Errorf("approval %s: %d cards, want 1", a.ID, cards[a.ID])
		}
		if !a.Status.Final() {
			t.Errorf("approval %s still %s", a.ID, a.Status)
		}
	}
	// ...and the audit chain is whole.
	v, ok := h.store.(interface {
		AuditVerify(ctx context.Context) (int64, error)
	})
	if !ok {
		t.Fatal("the postgres store cannot verify its audit chain")
	}
	if bad, err := v.AuditVerify(ctx); err != nil || bad != 0 {
		t.Fatalf("audit verify: first bad seq %d, %v", bad, err)
	}
	t.Logf("%d runs, %d approvals, %d decisions over three restarts", len(runs), len(all), decisions.Load())
}
