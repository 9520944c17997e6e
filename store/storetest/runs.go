package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

func testDedupsEventInSameTx(t *testing.T, s core.Store) {
	th := thread("dedup")
	ev := event(th)
	first := newRun(th)
	reply := core.OutboxMessage{ID: newID("msg"), Thread: th, Kind: core.KindReply, Text: "queued"}
	res, err := s.InboxRecord(ctx(t), core.InboxRecordParams{Event: ev, Run: first, Replies: []core.OutboxMessage{reply}})
	if err != nil || res.Duplicate || res.RunID != first.ID {
		t.Fatalf("first InboxRecord = %+v, %v; want new run %s", res, err, first.ID)
	}
	second := newRun(th) // a retry would build a new run: it must not be stored
	reply2 := core.OutboxMessage{ID: newID("msg"), Thread: th, Kind: core.KindReply, Text: "queued again"}
	res, err = s.InboxRecord(ctx(t), core.InboxRecordParams{Event: ev, Run: second, Replies: []core.OutboxMessage{reply2}})
	if err != nil {
		t.Fatalf("duplicate InboxRecord: %v", err)
	}
	if !res.Duplicate || res.RunID != first.ID {
		t.Errorf("duplicate InboxRecord = %+v, want Duplicate with run %s", res, first.ID)
	}
	if _, err := s.RunGet(ctx(t), second.ID); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("RunGet(duplicate's run) err = %v, want ErrNotFound", err)
	}
	runs, _, err := s.RunList(ctx(t), core.RunListParams{})
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "runs", len(runs), 1)
	mustEqual(t, "outbox messages", len(allOutbox(t, s)), 1)
	evs, err := s.RunEventList(ctx(t), first.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "run events", len(evs), 1)

	// An event that starts no run is recorded and deduplicated too.
	bare := event(th)
	if res, err := s.InboxRecord(ctx(t), core.InboxRecordParams{Event: bare}); err != nil || res.Duplicate || res.RunID != "" {
		t.Errorf("bare InboxRecord = %+v, %v", res, err)
	}
	if res, err := s.InboxRecord(ctx(t), core.InboxRecordParams{Event: bare}); err != nil || !res.Duplicate {
		t.Errorf("bare duplicate InboxRecord = %+v, %v; want Duplicate", res, err)
	}
}

func testDedupsConcurrentDuplicates(t *testing.T, s core.Store) {
	th := thread("dup-concurrent")
	ev := event(th)
	const n = 20
	results := make([]core.InboxResult, n)
	errs := make([]error, n)
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := newRun(th)
			ids[i] = r.ID
			results[i], errs[i] = s.InboxRecord(ctx(t), core.InboxRecordParams{Event: ev, Run: r})
		}()
	}
	wg.Wait()
	fresh := 0
	var winner string
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("InboxRecord %d: %v", i, errs[i])
		}
		if !results[i].Duplicate {
			fresh++
			winner = ids[i]
		}
	}
	mustEqual(t, "non-duplicate results", fresh, 1)
	for i := range n {
		mustEqual(t, fmt.Sprintf("result %d run id", i), results[i].RunID, winner)
	}
	runs, _, err := s.RunList(ctx(t), core.RunListParams{})
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "runs", len(runs), 1)
}

func testInboxRecordsRunRepliesAndEvents(t *testing.T, s core.Store) {
	th := thread("record")
	r := newRun(th)
	r.Args = map[string]any{"service": "api", "replicas": 3.0, "nested": map[string]any{"a": []any{"x", true}}}
	extra := core.RunEvent{Type: core.EventMessageCommitted, Data: json.RawMessage(`{"text":"hi"}`), At: t0}
	reply := core.OutboxMessage{ID: newID("msg"), Thread: th, Kind: core.KindReply, Text: "on it", CreatedAt: t0}
	if _, err := s.InboxRecord(ctx(t), core.InboxRecordParams{Event: event(th), Run: r,
		Replies: []core.OutboxMessage{reply}, Events: []core.RunEvent{extra}}); err != nil {
		t.Fatal(err)
	}
	got := getRun(t, s, r.ID)
	mustEqual(t, "status", got.Status, core.RunQueued)
	mustEqual(t, "flow", got.Flow, r.Flow)
	mustEqual(t, "thread", got.Thread, th)
	mustEqual(t, "requester", got.Requester, r.Requester)
	mustEqual(t, "reason", got.Reason, r.Reason)
	mustEqual(t, "created", got.CreatedAt, t0)
	if !reflect.DeepEqual(got.Args, r.Args) {
		t.Errorf("args = %#v, want %#v", got.Args, r.Args)
	}
	if got.Steps == nil || len(got.Steps) != 0 {
		t.Errorf("steps = %#v, want empty non-nil", got.Steps)
	}
	evs, err := s.RunEventList(ctx(t), r.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range evs {
		types = append(types, e.Type)
	}
	sameIDs(t, "event types", types, core.EventMessageCommitted, core.EventRunQueued)
	if len(evs) > 0 {
		mustEqual(t, "event data", string(evs[0].Data), `{"text":"hi"}`)
		mustEqual(t, "event at", evs[0].At, t0)
	}
	out := allOutbox(t, s)
	if len(out) != 1 {
		t.Fatalf("outbox = %d messages, want 1", len(out))
	}
	m := out[0]
	mustEqual(t, "reply id", m.ID, reply.ID)
	mustEqual(t, "reply thread", m.Thread, th)
	mustEqual(t, "reply text", m.Text, "on it")
	mustEqual(t, "reply status", m.Status, core.DeliveryPending)
	mustEqual(t, "reply due", m.NextAttemptAt, t0)
}

func testInboxNotifies(t *testing.T, s core.Store) {
	runs, cancelRuns := s.Subscribe(core.TopicRuns)
	defer cancelRuns()
	outbox, cancelOutbox := s.Subscribe(core.TopicOutbox)
	defer cancelOutbox()
	events, cancelEvents := s.Subscribe(core.TopicEvents)
	defer cancelEvents()
	th := thread("notify")
	if _, err := s.InboxRecord(ctx(t), core.InboxRecordParams{Event: event(th), Run: newRun(th),
		Replies: []core.OutboxMessage{{ID: newID("msg"), Thread: th, Kind: core.KindReply, Text: "ok"}}}); err != nil {
		t.Fatal(err)
	}
	for name, ch := range map[string]<-chan struct{}{"runs": runs, "outbox": outbox, "events": events} {
		if !waitWake(ch, 5*time.Second) {
			t.Errorf("no %s wake-up after InboxRecord", name)
		}
	}
	// An event without run or replies wakes nobody.
	if _, err := s.InboxRecord(ctx(t), core.InboxRecordParams{Event: event(th)}); err != nil {
		t.Fatal(err)
	}
	if waitWake(runs, 200*time.Millisecond) {
		t.Error("runs woken by an event that queued nothing")
	}
}

func testRunGetNotFound(t *testing.T, s core.Store) {
	if _, err := s.RunGet(ctx(t), "no-such-run"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("RunGet(unknown) err = %v, want core.ErrNotFound", err)
	}
}

func testRunList(t *testing.T, s core.Store) {
	var ids []string
	for i := range 5 {
		ids = append(ids, queueRun(t, s, thread(fmt.Sprintf("list-%d", i%2))))
	}
	page1, next, err := s.RunList(ctx(t), core.RunListParams{Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	page2, next2, err := s.RunList(ctx(t), core.RunListParams{Limit: 3, Cursor: next})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range append(page1, page2...) {
		got = append(got, r.ID)
	}
	sameIDs(t, "runs newest first", got, ids[4], ids[3], ids[2], ids[1], ids[0])
	if next == "" || next2 != "" {
		t.Errorf("cursors = %q, %q; want set, then empty", next, next2)
	}
	byThread, _, err := s.RunList(ctx(t), core.RunListParams{Thread: thread("list-1").String()})
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "runs in thread list-1", len(byThread), 2)
	claim(t, s, "w", 1)
	running, _, err := s.RunList(ctx(t), core.RunListParams{Status: core.RunRunning})
	if err != nil {
		t.Fatal(err)
	}
	if len(running) != 1 || running[0].ID != ids[0] {
		t.Errorf("running runs = %v, want [%s]", running, ids[0])
	}
}

func testClaimOnePerThread(t *testing.T, s core.Store) {
	a1 := queueRun(t, s, thread("A"))
	b1 := queueRun(t, s, thread("B"))
	a2 := queueRun(t, s, thread("A"))
	sameIDs(t, "first claim", claim(t, s, "w1", 10), a1, b1)
	sameIDs(t, "second claim (A busy, B empty)", claim(t, s, "w2", 10))
	finish(t, s, a1, "w1")
	sameIDs(t, "claim after A's first run ended", claim(t, s, "w2", 10), a2)
	got := getRun(t, s, a2)
	mustEqual(t, "lease", got.LeaseUntil, t0.Add(time.Minute))
	done := getRun(t, s, a1)
	if done.Owner != "" || !done.LeaseUntil.IsZero() {
		t.Errorf("released run keeps owner %q lease %v", done.Owner, done.LeaseUntil)
	}
}

func testClaimSkipsWaitingThread(t *testing.T, s core.Store) {
	a1 := queueRun(t, s, thread("W"))
	a2 := queueRun(t, s, thread("W"))
	sameIDs(t, "claim", claim(t, s, "w1", 10), a1)
	if err := s.RunCheckpoint(ctx(t), core.Checkpoint{RunID: a1, Owner: "w1", Now: t0, Status: core.RunWaitingApproval, Release: true}); err != nil {
		t.Fatal(err)
	}
	sameIDs(t, "claim while first run waits for approval", claim(t, s, "w2", 10))
	if err := s.RunCheckpoint(ctx(t), core.Checkpoint{RunID: a1, Now: t0, Status: core.RunWaitingInput,
		ExpectStatus: []core.RunStatus{core.RunWaitingApproval}}); err != nil {
		t.Fatal(err)
	}
	sameIDs(t, "claim while first run waits for input", claim(t, s, "w2", 10))
	if err := s.RunCheckpoint(ctx(t), core.Checkpoint{RunID: a1, Now: t0, Status: core.RunQueued,
		ExpectStatus: []core.RunStatus{core.RunWaitingInput}}); err != nil {
		t.Fatal(err)
	}
	sameIDs(t, "claim after the first run was requeued (older first)", claim(t, s, "w2", 10), a1)
	finish(t, s, a1, "w2")
	sameIDs(t, "claim after the first run ended", claim(t, s, "w2", 10), a2)
}

func testClaimExpiredLease(t *testing.T, s core.Store) {
	id := queueRun(t, s, thread("lease"))
	sameIDs(t, "claim", claim(t, s, "dead-worker", 1), id)
	later := t0.Add(30 * time.Second)
	runs, err := s.RunClaim(ctx(t), core.RunClaimParams{Owner: "w2", Limit: 1, Now: later, LeaseUntil: later.Add(time.Minute)})
	if err != nil || len(runs) != 0 {
		t.Fatalf("claim before expiry = %v, %v; want nothing", runs, err)
	}
	if err := s.RunHeartbeat(ctx(t), core.RunHeartbeatParams{Owner: "dead-worker", RunIDs: []string{id}, LeaseUntil: t0.Add(2 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	afterFirstLease := t0.Add(90 * time.Second)
	runs, err = s.RunClaim(ctx(t), core.RunClaimParams{Owner: "w2", Limit: 1, Now: afterFirstLease, LeaseUntil: afterFirstLease.Add(time.Minute)})
	if err != nil || len(runs) != 0 {
		t.Fatalf("claim after heartbeat = %v, %v; want nothing", runs, err)
	}
	expired := t0.Add(3 * time.Minute)
	runs, err = s.RunClaim(ctx(t), core.RunClaimParams{Owner: "w2", Limit: 1, Now: expired, LeaseUntil: expired.Add(time.Minute)})
	if err != nil || len(runs) != 1 || runs[0].ID != id || runs[0].Owner != "w2" {
		t.Fatalf("claim after expiry = %v, %v; want %s by w2", runs, err, id)
	}
	err = s.RunCheckpoint(ctx(t), core.Checkpoint{RunID: id, Owner: "dead-worker", Now: expired, Status: core.RunSucceeded})
	if !errors.Is(err, core.ErrConflict) {
		t.Errorf("checkpoint by the old owner err = %v, want ErrConflict", err)
	}
}

// testHeartbeatRenewsOnlyListedRuns: a heartbeat extends the leases of the
// runs it names that the owner still holds and that still run; a run the
// owner holds but does not name lapses and is claimed by another.
func testHeartbeatRenewsOnlyListedRuns(t *testing.T, s core.Store) {
	kept := queueRun(t, s, thread("hb-kept"))
	forgotten := queueRun(t, s, thread("hb-forgotten"))
	other := queueRun(t, s, thread("hb-other"))
	sameIDs(t, "claim by w1", claim(t, s, "w1", 2), kept, forgotten)
	sameIDs(t, "claim by w2", claim(t, s, "w2", 1), other)
	// w1 names its own run, w2's run and an unknown id: only its own is renewed.
	if err := s.RunHeartbeat(ctx(t), core.RunHeartbeatParams{Owner: "w1", RunIDs: []string{kept, other, "no-such-run"},
		LeaseUntil: t0.Add(10 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := s.RunHeartbeat(ctx(t), core.RunHeartbeatParams{Owner: "w1", LeaseUntil: t0.Add(time.Hour)}); err != nil {
		t.Fatalf("heartbeat naming no run: %v", err)
	}
	later := t0.Add(5 * time.Minute) // past claim's lease (a minute), before the renewed one
	runs, err := s.RunClaim(ctx(t), core.RunClaimParams{Owner: "w3", Limit: 10, Now: later, LeaseUntil: later.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range runs {
		got = append(got, r.ID)
	}
	sameIDs(t, "claim after the heartbeat", got, forgotten, other)
	for _, id := range []string{kept, forgotten, other} {
		r, err := s.RunGet(ctx(t), id)
		if err != nil {
			t.Fatal(err)
		}
		want := "w3"
		if id == kept {
			want = "w1"
		}
		mustEqual(t, "owner of "+id, r.Owner, want)
	}
	// A released run is not running any more: a heartbeat leaves it released.
	if err := s.RunCheckpoint(ctx(t), core.Checkpoint{RunID: kept, Owner: "w1", Now: later, Status: core.RunWaitingApproval, Release: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.RunHeartbeat(ctx(t), core.RunHeartbeatParams{Owner: "w1", RunIDs: []string{kept}, LeaseUntil: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.RunGet(ctx(t), kept); err != nil || r.Owner != "" || r.Status != core.RunWaitingApproval {
		t.Fatalf("released run after a heartbeat: %+v, %v", r, err)
	}
}

func testConcurrentClaimers(t *testing.T, s core.Store) {
	const threads, perThread, claimers = 25, 4, 8
	var want []string
	for i := range threads * perThread {
		want = append(want, queueRun(t, s, thread(fmt.Sprintf("c%d", i%threads))))
	}
	var mu sync.Mutex
	claimed := map[string]int{}
	active := map[string]string{} // thread -> run
	var violations []string
	var wg sync.WaitGroup
	for w := range claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprintf("w%d", w)
			for range 400 {
				runs, err := s.RunClaim(ctx(t), core.RunClaimParams{Owner: owner, Limit: 3, Now: t0, LeaseUntil: t0.Add(time.Hour)})
				if err != nil {
					t.Errorf("RunClaim: %v", err)
					return
				}
				mu.Lock()
				for _, r := range runs {
					claimed[r.ID]++
					if other, busy := active[r.Thread.Key]; busy {
						violations = append(violations, fmt.Sprintf("%s claimed while %s active in %s", r.ID, other, r.Thread.Key))
					}
					active[r.Thread.Key] = r.ID
				}
				total := len(claimed)
				mu.Unlock()
				for _, r := range runs {
					mu.Lock()
					delete(active, r.Thread.Key) // before commit: the store still holds the thread
					mu.Unlock()
					if err := s.RunCheckpoint(ctx(t), core.Checkpoint{RunID: r.ID, Owner: owner, Now: t0,
						Status: core.RunSucceeded, Release: true}); err != nil {
						t.Errorf("finish %s: %v", r.ID, err)
					}
				}
				if total == len(want) {
					return
				}
				if len(runs) == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	for _, v := range violations {
		t.Error(v)
	}
	for _, id := range want {
		if claimed[id] != 1 {
			t.Errorf("run %s claimed %d times, want 1", id, claimed[id])
		}
	}
}

func testCheckpointGuard(t *testing.T, s core.Store) {
	th := thread("guard")
	id := queueRun(t, s, th)
	claim(t, s, "w1", 1)
	idx := 1
	full := func(owner string, expect []core.RunStatus) core.Checkpoint {
		return core.Checkpoint{RunID: id, Owner: owner, ExpectStatus: expect, Now: t0, Status: core.RunSucceeded,
			Release: true, StepIndex: &idx, ErrorCode: "x", ErrorMessage: "y",
			Step:     &core.Step{Index: 0, Tool: "deploy", Status: core.StepSucceeded},
			Approval: approval(id, th, []string{"console:bob"}, 1),
			Outbox:   []core.OutboxMessage{{ID: newID("msg"), Thread: th, Kind: core.KindReply, Text: "x"}},
			Audit:    []approvals.AuditEntry{{At: t0, Kind: "run.finished", Actor: "system", RunID: id}},
			Events:   []core.RunEvent{{Type: core.EventTurnFinished, Data: json.RawMessage(`{}`)}},
		}
	}
	for name, c := range map[string]core.Checkpoint{
		"wrong owner":  full("w2", nil),
		"wrong status": full("w1", []core.RunStatus{core.RunWaitingApproval}),
	} {
		if err := s.RunCheckpoint(ctx(t), c); !errors.Is(err, core.ErrConflict) {
			t.Errorf("%s: err = %v, want ErrConflict", name, err)
		}
	}
	if err := s.RunCheckpoint(ctx(t), core.Checkpoint{RunID: "no-such-run", Now: t0}); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("unknown run: err = %v, want ErrNotFound", err)
	}
	r := getRun(t, s, id)
	if r.Status != core.RunRunning || r.Owner != "w1" || len(r.Steps) != 0 || r.StepIndex != 0 || r.ErrorCode != "" {
		t.Errorf("run changed by refused checkpoints: %+v", r)
	}
	apps, _, err := s.ApprovalList(ctx(t), approvals.ApprovalListParams{})
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "approvals", len(apps), 0)
	mustEqual(t, "outbox", len(allOutbox(t, s)), 0)
	mustEqual(t, "audit", len(allAudit(t, s)), 0)
	evs, err := s.RunEventList(ctx(t), id, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "run events (run.queued only)", len(evs), 1)
	if err := s.RunCheckpoint(ctx(t), full("w1", []core.RunStatus{core.RunRunning})); err != nil {
		t.Errorf("checkpoint by the holder: %v", err)
	}
}

func testCheckpointWritesAll(t *testing.T, s core.Store) {
	th := thread("suspend")
	id := queueRun(t, s, th)
	claim(t, s, "w1", 1)
	started := t0.Add(time.Second)
	step := core.Step{Index: 0, Tool: "deploy", Status: core.StepWaitingApproval, Args: map[string]any{"env": "prod"},
		IdempotencyKey: id + "/0", Attempts: 0, StartedAt: &started}
	a := approval(id, th, []string{"console:bob"}, 1)
	card := core.OutboxMessage{ID: newID("card"), Thread: th, Kind: core.KindCard, ApprovalID: a.ID, RunID: id, CreatedAt: t0}
	idx := 0
	err := s.RunCheckpoint(ctx(t), core.Checkpoint{RunID: id, Owner: "w1", ExpectStatus: []core.RunStatus{core.RunRunning},
		Now: t0, Status: core.RunWaitingApproval, Release: true, StepIndex: &idx, Step: &step, Approval: a,
		Outbox: []core.OutboxMessage{card},
		Audit:  []approvals.AuditEntry{{At: t0, Kind: "approval.requested", Actor: "console:alice", RunID: id, ApprovalID: a.ID, Tool: "deploy", Detail: json.RawMessage(`{"args": {"env":"prod"}}`)}},
		Events: []core.RunEvent{{Type: core.EventPermissionRequested, Data: json.RawMessage(`{"approval_id":"` + a.ID + `"}`), At: t0}},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := getRun(t, s, id)
	if r.Status != core.RunWaitingApproval || r.Owner != "" || !r.LeaseUntil.IsZero() || len(r.Steps) != 1 {
		t.Fatalf("run after suspend: %+v", r)
	}
	if !reflect.DeepEqual(r.Steps[0], step) {
		t.Errorf("step = %+v, want %+v", r.Steps[0], step)
	}
	got, err := s.ApprovalGet(ctx(t), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, a) {
		t.Errorf("approval round trip:\n got %+v\nwant %+v", got, a)
	}
	out := allOutbox(t, s)
	if len(out) != 1 || out[0].ID != card.ID || out[0].Kind != core.KindCard || out[0].ApprovalID != a.ID || out[0].RunID != id {
		t.Errorf("outbox = %+v, want the card", out)
	}
	audit := allAudit(t, s)
	if len(audit) != 1 || audit[0].Seq != 1 || audit[0].PrevHash != "" || audit[0].Hash == "" ||
		string(audit[0].Detail) != `{"args": {"env":"prod"}}` {
		t.Errorf("audit = %+v", audit)
	}
	if bad := approvals.VerifyChain("", audit); bad != 0 {
		t.Errorf("VerifyChain = %d", bad)
	}
	// The step is upserted by (run, index).
	finished := t0.Add(2 * time.Second)
	step.Status, step.Output, step.Attempts, step.FinishedAt = core.StepSucceeded, "ok", 1, &finished
	if err := s.RunCheckpoint(ctx(t), core.Checkpoint{RunID: id, Now: t0, Step: &step}); err != nil {
		t.Fatal(err)
	}
	r = getRun(t, s, id)
	if len(r.Steps) != 1 || !reflect.DeepEqual(r.Steps[0], step) {
		t.Errorf("steps after upsert = %+v, want [%+v]", r.Steps, step)
	}
}

func testRunEventList(t *testing.T, s core.Store) {
	th := thread("events")
	id := queueRun(t, s, th)
	for i := range 5 {
		if err := s.RunCheckpoint(ctx(t), core.Checkpoint{RunID: id, Now: t0, Events: []core.RunEvent{
			{Type: core.EventToolStarted, Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}}}); err != nil {
			t.Fatal(err)
		}
	}
	queueRun(t, s, th) // another run's events are not listed
	all, err := s.RunEventList(ctx(t), id, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 6 {
		t.Fatalf("events = %d, want 6", len(all))
	}
	for i := 1; i < len(all); i++ {
		if all[i].Seq <= all[i-1].Seq || all[i].RunID != id {
			t.Errorf("event %d: seq %d after %d, run %s", i, all[i].Seq, all[i-1].Seq, all[i].RunID)
		}
	}
	rest, err := s.RunEventList(ctx(t), id, all[2].Seq, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(rest) != 2 || rest[0].Seq != all[3].Seq || string(rest[0].Data) != `{"i":2}` {
		t.Errorf("events after %d = %+v", all[2].Seq, rest)
	}
}

func testInboxRecordsAudit(t *testing.T, s core.Store) {
	th := thread("refused-request")
	ev := event(th)
	ev.Actor = core.Actor{ID: "telegram:666"}
	entry := approvals.AuditEntry{At: t0, Kind: "request.refused", Actor: "telegram:666", Detail: []byte(`{"channel":"console"}`)}
	reply := core.OutboxMessage{ID: newID("reply"), Thread: th, Kind: core.KindReply, Text: "not allowed", CreatedAt: t0}
	res, err := s.InboxRecord(ctx(t), core.InboxRecordParams{Event: ev, Replies: []core.OutboxMessage{reply}, Audit: []approvals.AuditEntry{entry}})
	if err != nil || res.Duplicate || res.RunID != "" {
		t.Fatalf("InboxRecord = %+v, %v", res, err)
	}
	// A redelivery records nothing more.
	if res, err := s.InboxRecord(ctx(t), core.InboxRecordParams{Event: ev, Replies: []core.OutboxMessage{{ID: newID("reply"), Thread: th,
		Kind: core.KindReply, Text: "again"}}, Audit: []approvals.AuditEntry{entry}}); err != nil || !res.Duplicate {
		t.Fatalf("redelivery = %+v, %v", res, err)
	}
	var got []approvals.AuditEntry
	for _, e := range allAudit(t, s) {
		if e.Kind == "request.refused" && e.Actor == "telegram:666" {
			got = append(got, e)
		}
	}
	if len(got) != 1 {
		t.Fatalf("refusal audit entries = %+v, want exactly one", got)
	}
	mustEqual(t, "replies", len(allOutbox(t, s)), 1)
}

// testInboxRefusesWhatItCannotKeep: an event whose thread, event id, actor
// or text holds a NUL or invalid UTF-8 is refused with core.ErrInvalidInput
// by both backends alike (Postgres cannot store it, SQLite would), and
// nothing of it is stored: no event, no run, no reply.
func testInboxRefusesWhatItCannotKeep(t *testing.T, s core.Store) {
	for name, spoil := range map[string]func(*core.ChannelEvent){
		"thread":   func(e *core.ChannelEvent) { e.Thread.Key = "acc\x00bi" },
		"event_id": func(e *core.ChannelEvent) { e.EventID = "e\xff\xfe" },
		"actor":    func(e *core.ChannelEvent) { e.Actor.ID = "console:a\x00" },
		"text":     func(e *core.ChannelEvent) { e.Text = "deploy\x00 api" },
	} {
		ev := event(thread("bad-" + name))
		spoil(&ev)
		run := newRun(ev.Thread)
		_, err := s.InboxRecord(ctx(t), core.InboxRecordParams{Event: ev, Run: run,
			Replies: []core.OutboxMessage{{ID: newID("msg"), Thread: ev.Thread, Kind: core.KindReply, Text: "x"}}})
		if !errors.Is(err, core.ErrInvalidInput) {
			t.Errorf("InboxRecord with a bad %s: err = %v, want ErrInvalidInput", name, err)
		}
		if _, err := s.RunGet(ctx(t), run.ID); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("bad %s: RunGet = %v, want ErrNotFound (nothing stored)", name, err)
		}
	}
	runs, _, err := s.RunList(ctx(t), core.RunListParams{})
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "runs", len(runs), 0)
	mustEqual(t, "outbox messages", len(allOutbox(t, s)), 0)
}
