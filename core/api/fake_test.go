package api

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/shortid"
)

// memStore is an in-memory Store for the HTTP mapping tests. Lists page by
// offset cursors, like a real store's opaque cursor from a caller's view.
type memStore struct {
	mu         sync.Mutex
	runs       []*core.Run // oldest first
	events     map[string][]core.RunEvent
	seq        int64
	approvals  []*approvals.Approval
	audit      []approvals.AuditEntry
	badSeq     int64
	deliveries []*core.Delivery
	grants     []*approvals.Grant
	subs       map[int]chan struct{}
	nextSub    int
	subsEver   int
}

// ThreadMessages is not exercised by the mapping tests (the real-store
// tests cover it); an empty history keeps the interface satisfied.
func (m *memStore) ThreadMessages(context.Context, core.ThreadMessagesParams) ([]core.ThreadMessage, string, error) {
	return nil, "", nil
}

func newMemStore() *memStore {
	return &memStore{events: map[string][]core.RunEvent{}, subs: map[int]chan struct{}{}}
}

func clone[T any](v *T) *T { c := *v; return &c }

func page[T any](items []T, cursor string, limit int) ([]T, string, error) {
	off := 0
	if cursor != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(cursor, "off:"))
		if err != nil || !strings.HasPrefix(cursor, "off:") || n < 0 {
			return nil, "", fmt.Errorf("memstore: bad cursor %q", cursor)
		}
		off = n
	}
	if off > len(items) {
		off = len(items)
	}
	end := min(off+limit, len(items))
	next := ""
	if end < len(items) {
		next = "off:" + strconv.Itoa(end)
	}
	return items[off:end], next, nil
}

func (m *memStore) addRun(r *core.Run) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.runs = append(m.runs, r)
}

func (m *memStore) setRun(id string, f func(*core.Run)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.runs {
		if r.ID == id {
			f(r)
		}
	}
}

func (m *memStore) appendEvent(runID, typ string) int64 {
	m.mu.Lock()
	m.seq++
	ev := core.RunEvent{Seq: m.seq, RunID: runID, Type: typ, Data: []byte(`{ "n": ` + strconv.FormatInt(m.seq, 10) + ` }`), At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	m.events[runID] = append(m.events[runID], ev)
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
	return ev.Seq
}

func (m *memStore) RunGet(_ context.Context, id string) (*core.Run, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.runs {
		if r.ID == id {
			c := clone(r)
			c.Steps = slices.Clone(r.Steps)
			return c, nil
		}
	}
	return nil, fmt.Errorf("memstore: run %s: %w", id, core.ErrNotFound)
}

func (m *memStore) RunList(_ context.Context, p core.RunListParams) ([]*core.Run, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*core.Run
	for i := len(m.runs) - 1; i >= 0; i-- {
		r := m.runs[i]
		if (p.Status == "" || r.Status == p.Status) && (p.Thread == "" || r.Thread.String() == p.Thread) &&
			(p.IDPrefix == "" || shortid.Matches(r.ID, p.IDPrefix)) {
			out = append(out, clone(r))
		}
	}
	return page(out, p.Cursor, p.Limit)
}

func (m *memStore) RunEventList(_ context.Context, runID string, after int64, limit int) ([]core.RunEvent, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []core.RunEvent
	for _, ev := range m.events[runID] {
		if ev.Seq > after && len(out) < limit {
			out = append(out, ev)
		}
	}
	return out, nil
}

func (m *memStore) ApprovalGet(_ context.Context, id string) (*approvals.Approval, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, a := range m.approvals {
		if a.ID == id {
			return a.Clone(), nil
		}
	}
	return nil, fmt.Errorf("memstore: approval %s: %w", id, approvals.ErrNotFound)
}

func (m *memStore) ApprovalList(_ context.Context, p approvals.ApprovalListParams) ([]*approvals.Approval, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*approvals.Approval
	for i := len(m.approvals) - 1; i >= 0; i-- {
		a := m.approvals[i]
		if (p.Status == "" || a.Status == p.Status) && (p.RunID == "" || a.RunID == p.RunID) &&
			(p.IDPrefix == "" || shortid.Matches(a.ID, p.IDPrefix)) {
			out = append(out, a.Clone())
		}
	}
	return page(out, p.Cursor, p.Limit)
}

func (m *memStore) AuditList(_ context.Context, p approvals.AuditListParams) ([]approvals.AuditEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []approvals.AuditEntry
	for _, e := range m.audit {
		if e.Seq > p.After && (p.Actor == "" || e.Actor == p.Actor) && (p.Tool == "" || e.Tool == p.Tool) &&
			(p.RunID == "" || e.RunID == p.RunID) && len(out) < p.Limit {
			out = append(out, e)
		}
	}
	return out, nil
}

func (m *memStore) AuditVerify(ctx context.Context) (int64, error) {
	r, err := m.AuditVerifyReport(ctx)
	return r.BadSeq, err
}

func (m *memStore) AuditVerifyReport(context.Context) (approvals.ChainReport, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := approvals.ChainReport{BadSeq: m.badSeq}
	if n := len(m.audit); n > 0 {
		r.HeadSeq, r.HeadHash = m.audit[n-1].Seq, m.audit[n-1].Hash
	}
	return r, nil
}

func (m *memStore) OutboxList(_ context.Context, p core.OutboxListParams) ([]*core.Delivery, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*core.Delivery
	for _, d := range m.deliveries {
		if p.Status == "" || d.Status == p.Status {
			out = append(out, clone(d))
		}
	}
	return page(out, p.Cursor, p.Limit)
}

func (m *memStore) OutboxRequeue(_ context.Context, id string, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, d := range m.deliveries {
		if d.ID == id {
			if d.Status != core.DeliveryDead {
				return fmt.Errorf("memstore: requeue %s: %w", id, core.ErrConflict)
			}
			d.Status, d.NextAttemptAt = core.DeliveryPending, now
			return nil
		}
	}
	return fmt.Errorf("memstore: requeue %s: %w", id, core.ErrNotFound)
}

func (m *memStore) Subscribe(string) (<-chan struct{}, func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := m.nextSub
	m.nextSub++
	m.subsEver++
	c := make(chan struct{}, 1)
	m.subs[id] = c
	return c, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.subs, id)
	}
}

func (m *memStore) activeSubs() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.subs)
}

// fakeEngine records what the API hands it and answers like the engine's
// documented contract: dedup on event id, a run for "deploy …", one winning
// decision by compare-and-set.
type fakeEngine struct {
	st  *memStore
	now func() time.Time

	mu     sync.Mutex
	events []core.ChannelEvent
	seen   map[string]string // event id → run id
	nrun   int
	panic  bool
	// decisions are every Decide call, refused ones included.
	decisions []core.Decision
}

func (e *fakeEngine) HandleEvent(_ context.Context, ev core.ChannelEvent) (core.Receipt, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.panic {
		panic("fake engine exploded")
	}
	if e.seen == nil {
		e.seen = map[string]string{}
	}
	if id, ok := e.seen[ev.Channel+"/"+ev.EventID]; ok {
		return core.Receipt{Duplicate: true, RunID: id}, nil
	}
	e.events = append(e.events, ev)
	id := ""
	if strings.HasPrefix(ev.Text, "deploy") {
		e.nrun++
		id = fmt.Sprintf("run-%d", e.nrun)
		e.st.addRun(&core.Run{ID: id, Flow: "deploy", Thread: ev.Thread, Requester: ev.Actor.ID, Status: core.RunQueued,
			Reason: ev.Text, CreatedAt: ev.ReceivedAt, UpdatedAt: ev.ReceivedAt})
	}
	e.seen[ev.Channel+"/"+ev.EventID] = id
	return core.Receipt{RunID: id}, nil
}

func (e *fakeEngine) Decide(_ context.Context, actor core.Actor, channel string, d core.Decision) (*approvals.Approval, error) {
	e.st.mu.Lock()
	defer e.st.mu.Unlock()
	var a *approvals.Approval
	for _, x := range e.st.approvals {
		if x.ID == d.ApprovalID {
			a = x
		}
	}
	now := e.now()
	e.decisions = append(e.decisions, d)
	switch {
	case d.Unverified != "":
		return nil, &core.DecisionError{Code: core.DecisionUnverified, Message: d.Unverified}
	case a == nil:
		return nil, &core.DecisionError{Code: core.DecisionNotFound, Message: "approval not found"}
	case a.Status.Final():
		w := a.Winners()
		return nil, &core.DecisionError{Code: core.DecisionAlreadyDecided, Message: "already " + string(a.Status),
			By: strings.Join(w, ", "), At: *a.DecidedAt}
	case !now.Before(a.ExpiresAt):
		return nil, &core.DecisionError{Code: core.DecisionExpired, Message: "approval expired"}
	case !slices.Contains(a.Eligible, actor.ID):
		return nil, &core.DecisionError{Code: core.DecisionNotApprover, Message: actor.ID + " is not an approver"}
	case d.Action == "edit" && d.Args["service"] == nil:
		return nil, &core.DecisionError{Code: core.DecisionInvalidArgs, Message: "service is required", Field: "service"}
	case d.Action == "edit" && d.Args["service"] == "forbidden":
		return nil, &core.DecisionError{Code: core.DecisionDenied, Message: "denied by rule 3"}
	}
	a.Decisions = append(a.Decisions, approvals.Decision{Actor: actor.ID, Channel: channel, Action: approvals.Action(d.Action),
		Args: d.Args, Reason: d.Reason, Scope: approvals.Scope(d.Scope), At: now})
	a.DecidedAt = &now
	switch d.Action {
	case "approve":
		a.Status, a.ApprovedArgs = approvals.StatusApproved, a.ProposedArgs
	case "reject":
		a.Status = approvals.StatusRejected
	case "edit":
		a.Status, a.ApprovedArgs = approvals.StatusEdited, d.Args
	}
	return a.Clone(), nil
}

func (e *fakeEngine) Cancel(_ context.Context, runID string, actor core.Actor) (*core.Run, error) {
	r, err := e.st.RunGet(context.Background(), runID)
	if err != nil {
		return nil, err
	}
	if r.Status.Final() {
		return nil, fmt.Errorf("fake: cancel %s: %w", runID, core.ErrConflict)
	}
	e.st.setRun(runID, func(r *core.Run) { r.Status = core.RunCancelled; r.ErrorMessage = "cancelled by " + actor.ID })
	return e.st.RunGet(context.Background(), runID)
}

func nowFunc() time.Time { return testNow }

// CancelAllowed lets the run's requester cancel it; anyone else is
// forbidden (admin tokens never ask).
func (e *fakeEngine) CancelAllowed(ctx context.Context, runID string, actor core.Actor) error {
	r, err := e.st.RunGet(ctx, runID)
	if err != nil {
		return err
	}
	if r.Requester != actor.ID {
		return fmt.Errorf("fake: %w", core.ErrForbidden)
	}
	return nil
}

func (e *fakeEngine) RevokeGrant(_ context.Context, id string, actor core.Actor) (*approvals.Grant, error) {
	e.st.mu.Lock()
	defer e.st.mu.Unlock()
	for _, g := range e.st.grants {
		if g.ID != id {
			continue
		}
		if g.RevokedAt != nil {
			return clone(g), approvals.ErrGrantRevoked
		}
		now := e.now()
		g.RevokedAt, g.RevokedBy = &now, actor.ID
		return clone(g), nil
	}
	return nil, fmt.Errorf("fake: grant %s: %w", id, core.ErrNotFound)
}

func (m *memStore) GrantList(_ context.Context, p approvals.GrantListParams) ([]*approvals.Grant, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*approvals.Grant
	for i := len(m.grants) - 1; i >= 0; i-- {
		g := m.grants[i]
		if (p.Tool == "" || g.Tool == p.Tool) && (p.ActiveAt.IsZero() || g.Active(p.ActiveAt)) {
			out = append(out, clone(g))
		}
	}
	return page(out, p.Cursor, max(p.Limit, 1))
}
