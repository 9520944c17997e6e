package api

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/agent"
)

// memSessions is an in-memory core.AgentSessionStore.
type memSessions struct {
	mu    sync.Mutex
	items []*core.AgentSession // oldest first
}

func (m *memSessions) AgentSessionCreate(_ context.Context, s *core.AgentSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, x := range m.items {
		if x.ID == s.ID {
			return core.ErrConflict
		}
	}
	m.items = append(m.items, clone(s))
	return nil
}

func (m *memSessions) AgentSessionGet(_ context.Context, id string) (*core.AgentSession, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, x := range m.items {
		if x.ID == id {
			return clone(x), nil
		}
	}
	return nil, fmt.Errorf("memsessions: %s: %w", id, core.ErrNotFound)
}

func (m *memSessions) AgentSessionList(_ context.Context, p core.AgentSessionListParams) ([]*core.AgentSession, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*core.AgentSession
	for i := len(m.items) - 1; i >= 0; i-- {
		if p.Token == "" || m.items[i].Token == p.Token {
			out = append(out, clone(m.items[i]))
		}
	}
	return page(out, p.Cursor, max(p.Limit, 1))
}

// commit appends one event to run and (when status is not "") sets the
// run's status in the same step, as the engine commits them together.
func (m *memStore) commit(runID string, status core.RunStatus, typ string, data any) {
	raw, _ := json.Marshal(data)
	m.mu.Lock()
	if status != "" {
		for _, r := range m.runs {
			if r.ID == runID {
				r.Status = status
				if status == core.RunInterrupted {
					r.ErrorCode = "RUN_INTERRUPTED"
				}
			}
		}
	}
	m.seq++
	m.events[runID] = append(m.events[runID], core.RunEvent{Seq: m.seq, RunID: runID, Type: typ, Data: raw, At: testNow})
	subs := make([]chan struct{}, 0, len(m.subs))
	for _, c := range m.subs {
		subs = append(subs, c)
	}
	m.mu.Unlock()
	for _, c := range subs {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// fakeAgent plays the engine's part of agent turns, scripted by the turn's
// text:
//
//	"hello …"  answers at once
//	"block …"  runs until release(turn) is called
//	"deploy …" calls a gated tool: waits for a decision when attended,
//	           else is denied at once (nobody could approve)
//	"ask …"    stops at a question; the answer continues it
//	"crash …"  ends interrupted (a tool's outcome unknown)
type fakeAgent struct {
	st         *memStore
	attendance *Attendance

	mu         sync.Mutex
	started    []AgentTurn
	answers    map[string]chan json.RawMessage
	released   map[string]chan struct{}
	unattended int
	releases   []string // AgentRelease calls
	late       int      // results that arrived after a cancel, refused
	nturn      int
}

func newFakeAgent(st *memStore, att *Attendance) *fakeAgent {
	return &fakeAgent{st: st, attendance: att, answers: map[string]chan json.RawMessage{}, released: map[string]chan struct{}{}}
}

func (f *fakeAgent) AgentTurnStart(_ context.Context, t AgentTurn) (string, error) {
	f.mu.Lock()
	f.nturn++
	id := fmt.Sprintf("turn-%d", f.nturn)
	f.mu.Unlock()
	run := &core.Run{ID: id, Flow: core.AgentFlow(t.Session.Agent), Thread: t.Session.Thread, Requester: t.Actor.ID, Status: core.RunQueued,
		Reason: t.Text, CreatedAt: time.Now(), UpdatedAt: time.Now()}
	f.st.addRun(run)
	f.mu.Lock()
	f.started = append(f.started, t)
	f.answers[id] = make(chan json.RawMessage, 1)
	f.released[id] = make(chan struct{})
	f.mu.Unlock()
	go f.play(id, t)
	return id, nil
}

func (f *fakeAgent) release(turnID string) {
	f.mu.Lock()
	ch := f.released[turnID]
	f.mu.Unlock()
	close(ch)
}

func (f *fakeAgent) status(id string) core.RunStatus {
	r, err := f.st.RunGet(context.Background(), id)
	if err != nil {
		return ""
	}
	return r.Status
}

// live reports whether the turn may still write; after a cancel a result
// is refused (counted as late).
func (f *fakeAgent) live(id string) bool {
	if f.status(id) == core.RunCancelled {
		f.mu.Lock()
		f.late++
		f.mu.Unlock()
		return false
	}
	return true
}

func (f *fakeAgent) play(id string, t AgentTurn) {
	model := t.Model
	if model == "" {
		model = "default"
	}
	f.st.commit(id, core.RunRunning, core.EventTurnStarted, map[string]any{"model": model})
	word, _, _ := strings.Cut(t.Text, " ")
	switch word {
	case "block":
		f.mu.Lock()
		ch := f.released[id]
		f.mu.Unlock()
		<-ch
		if !f.live(id) {
			return
		}
		f.st.commit(id, "", core.EventMessageCommitted, map[string]any{"text": "unblocked"})
	case "deploy":
		f.st.commit(id, "", core.EventToolStarted, map[string]any{"tool": "deploy", "tool_call_id": "call-1"})
		ok := false
		if f.attendance.Attended(t.Session.Thread) {
			aid := "ap-" + id
			f.st.mu.Lock()
			f.st.approvals = append(f.st.approvals, &approvals.Approval{ID: aid, RunID: id, Thread: t.Session.Thread.String(),
				Requester: t.Actor.ID, Tool: "deploy", Reason: "you asked for 1.2.3", ProposedArgs: map[string]any{"service": "api"},
				Status: approvals.StatusPending, Eligible: []string{"console:alice", "console:bob"}, Quorum: 1,
				CreatedAt: testNow, ExpiresAt: testNow.Add(time.Hour)})
			f.st.mu.Unlock()
			f.st.commit(id, core.RunWaitingApproval, core.EventPermissionRequested, map[string]any{"approval_id": aid})
			for {
				a, _ := f.st.ApprovalGet(context.Background(), aid)
				if a.Status != approvals.StatusPending || f.status(id) == core.RunCancelled {
					ok = a.Status == approvals.StatusApproved
					break
				}
				time.Sleep(2 * time.Millisecond)
			}
			if !f.live(id) {
				return
			}
			f.st.commit(id, core.RunRunning, core.EventPermissionDecided, map[string]any{"approval_id": aid, "status": "decided"})
		} else {
			f.mu.Lock()
			f.unattended++
			f.mu.Unlock()
		}
		f.st.commit(id, "", core.EventToolFinished, map[string]any{"tool_call_id": "call-1", "ok": ok})
		if ok {
			f.st.commit(id, "", core.EventMessageCommitted, map[string]any{"text": "Deployed api."})
		} else {
			f.st.commit(id, "", core.EventMessageCommitted, map[string]any{"text": "I could not deploy: " + string(agent.OutcomeNoApprover)})
		}
	case "ask":
		f.st.commit(id, core.RunWaitingInput, core.EventQuestionRequested, map[string]any{"action_id": "q1",
			"questions": []map[string]any{{"id": "env", "kind": "choice", "text": "Which environment?", "choices": []string{"staging", "prod"}}}})
		f.mu.Lock()
		ch := f.answers[id]
		f.mu.Unlock()
		ans := <-ch
		var got []map[string]any
		_ = json.Unmarshal(ans, &got)
		if !f.live(id) {
			return
		}
		f.st.commit(id, core.RunRunning, core.EventMessageCommitted, map[string]any{"text": fmt.Sprintf("You chose %v.", got[0]["answer"])})
	case "crash":
		f.st.commit(id, core.RunInterrupted, core.EventTurnFinished, map[string]any{"status": "interrupted", "error_code": "RUN_INTERRUPTED"})
		return
	default:
		f.st.commit(id, "", core.EventMessageCommitted, map[string]any{"text": "hi there"})
	}
	if !f.live(id) {
		return
	}
	f.st.commit(id, core.RunSucceeded, core.EventTurnFinished, map[string]any{"status": "succeeded"})
}

func (f *fakeAgent) AgentAnswer(_ context.Context, a AgentAnswer) error {
	runID, requestID, answers := a.RunID, a.RequestID, a.Answers
	if f.status(runID) != core.RunWaitingInput || requestID != "q1" {
		return fmt.Errorf("fake: answer %s/%s: %w", runID, requestID, core.ErrConflict)
	}
	var arr []map[string]any
	if err := json.Unmarshal(answers, &arr); err != nil {
		return fmt.Errorf("fake: %w", agent.ErrMalformedAnswer)
	}
	if len(arr) != 1 || (arr[0]["answer"] != "staging" && arr[0]["answer"] != "prod") {
		return fmt.Errorf("fake: env must be staging or prod: %w", agent.ErrInvalidAnswer)
	}
	f.st.setRun(runID, func(r *core.Run) { r.Status = core.RunRunning })
	f.mu.Lock()
	ch := f.answers[runID]
	f.mu.Unlock()
	ch <- answers
	return nil
}

func (f *fakeAgent) AgentRelease(_ context.Context, runID, why string) error {
	f.mu.Lock()
	f.releases = append(f.releases, runID)
	f.mu.Unlock()
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	for _, a := range f.st.approvals {
		if a.RunID == runID && a.Status == approvals.StatusPending {
			a.Status = approvals.StatusRejected
			now := testNow
			a.DecidedAt = &now
		}
	}
	return nil
}
