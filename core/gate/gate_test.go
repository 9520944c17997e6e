package gate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/tools"
)

// The gate with a caller of its own: a record kept in memory. It shows the
// seam a new caller implements (Record) and pins the pipeline's order
// without an engine; TestInvariants (core/engine) runs every rule through
// every real caller on both stores.

type memStore struct {
	mu        sync.Mutex
	approvals map[string]*approvals.Approval
	grants    []*approvals.Grant
}

func (s *memStore) ApprovalGet(_ context.Context, id string) (*approvals.Approval, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.approvals[id]
	if !ok {
		return nil, approvals.ErrNotFound
	}
	return a.Clone(), nil
}

func (s *memStore) GrantList(context.Context, approvals.GrantListParams) ([]*approvals.Grant, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.grants, "", nil
}

// memRecord records what the gate asked it to write, in order.
type memRecord struct {
	writes  []string
	suspend *Suspension
	settled *Outcome
	refuse  error // Start fails with it
	st      *memStore
}

func (r *memRecord) Suspend(_ context.Context, s *Suspension) error {
	r.writes = append(r.writes, "suspend")
	r.suspend = s
	r.st.mu.Lock()
	defer r.st.mu.Unlock()
	for _, q := range s.Asks {
		r.st.approvals[q.Approval.ID] = q.Approval
	}
	return nil
}

func (r *memRecord) Start(_ context.Context, s *Start) error {
	r.writes = append(r.writes, fmt.Sprintf("start %s #%d", s.Key, s.Attempt))
	return r.refuse
}

func (r *memRecord) Settle(_ context.Context, o *Outcome) error {
	r.writes = append(r.writes, "settle "+string(o.Kind))
	r.settled = o
	return nil
}

type deferring struct{ *memRecord }

func (d deferring) DeferStart() bool { return true }

// runner counts calls.
type runner struct {
	mu    sync.Mutex
	calls []tools.Call
}

func (r *runner) Run(_ context.Context, c tools.Call) (tools.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
	return tools.Result{Output: "done"}, nil
}

func (r *runner) Preview(context.Context, tools.Call) (string, error) { return "would do", nil }

type fixture struct {
	g     *Gate
	st    *memStore
	run   *runner
	trust *Trust
	now   time.Time
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{st: &memStore{approvals: map[string]*approvals.Approval{}}, run: &runner{}, now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	pol := &approvals.Policy{Rules: []approvals.Rule{
		{Tool: "act", Effect: approvals.EffectAsk, Approvers: []string{"group:ops"}},
		{Tool: "act", Args: map[string]string{"target": "no*"}, Effect: approvals.EffectDeny},
	}}
	f.trust = &Trust{Policy: pol, PolicyVersion: pol.Version(),
		Dir: approvals.NewDirectory(map[string][]string{"alice": {"console:alice", "slack:UA"}}, map[string][]string{"ops": {"person:alice", "console:bob"}})}
	n := 0
	g, err := New(Options{
		Store: f.st, Trust: func() Trust { return *f.trust }, Now: func() time.Time { return f.now },
		NewID: func() string { n++; return fmt.Sprintf("id-%d", n) },
		Tools: tools.Static{
			"act":  {Name: "act", Risk: approvals.RiskExternal, Runner: f.run},
			"read": {Name: "read", Risk: approvals.RiskRead, Idempotent: true, Runner: f.run},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	f.g = g
	return f
}

func (f *fixture) call(tool string, args map[string]any) Call {
	return Call{Tool: tool, RunID: "r1", Key: "r1/0", Thread: core.Thread{Channel: "console", Key: "t"}, Requester: "console:req",
		Args: args, Reason: "because"}
}

func TestPassOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("DenyWritesNothingButTheOutcome", func(t *testing.T) {
		f := newFixture(t)
		rec := &memRecord{st: f.st}
		o, err := f.g.Pass(ctx, f.call("act", map[string]any{"target": "nope"}), rec)
		if err != nil || o.Kind != Denied || strings.Join(rec.writes, ",") != "settle denied" || len(f.run.calls) != 0 {
			t.Fatalf("outcome %v, writes %v, calls %d, %v", o.Kind, rec.writes, len(f.run.calls), err)
		}
	})
	t.Run("AskSuspendsThenResumeDispatchesOnce", func(t *testing.T) {
		f := newFixture(t)
		rec := &memRecord{st: f.st}
		o, err := f.g.Pass(ctx, f.call("act", map[string]any{"target": "x"}), rec)
		if err != nil || o.Kind != Suspended || len(rec.suspend.Asks) != 1 || rec.suspend.Card.Kind != core.KindCard {
			t.Fatalf("ask: %v %v", o, err)
		}
		a := rec.suspend.Asks[0].Approval
		if a.Digest != approvals.Digest("act", map[string]any{"target": "x"}, a.RuleKey, f.trust.PolicyVersion) || a.RuleKey == "" {
			t.Fatalf("approval digest %s rule %s", a.Digest, a.RuleKey)
		}
		// Decided by alice.
		out := approvals.Decide(a, approvals.Request{Actor: "slack:UA", Action: approvals.ActionApprove, At: f.now},
			approvals.Env{People: f.trust.Dir, Recheck: func(args map[string]any) (approvals.Verdict, []string) {
				v := f.trust.Policy.Evaluate(approvals.ToolInfo{Name: "act", Risk: approvals.RiskExternal}, args, approvals.Subject{})
				return v, f.trust.Dir.Expand(v.Approvers)
			}})
		if out.Err != nil {
			t.Fatal(out.Err)
		}
		f.st.approvals[a.ID] = out.Approval
		rec = &memRecord{st: f.st}
		c := f.call("act", nil)
		c.Waiting = a.ID
		o, err = f.g.Pass(ctx, c, rec)
		if err != nil || o.Kind != Ran || strings.Join(rec.writes, ",") != "start r1/0 #1,settle ran" || len(f.run.calls) != 1 {
			t.Fatalf("resume: %v writes %v calls %d %v", o.Kind, rec.writes, len(f.run.calls), err)
		}
	})
	t.Run("RefusedStartNeverCalls", func(t *testing.T) {
		f := newFixture(t)
		rec := &memRecord{st: f.st, refuse: errors.New("run cancelled")}
		_, err := f.g.Pass(ctx, f.call("read", nil), rec)
		if err == nil || len(f.run.calls) != 0 || strings.Join(rec.writes, ",") != "start r1/0 #1,settle start_refused" {
			t.Fatalf("writes %v calls %d err %v", rec.writes, len(f.run.calls), err)
		}
	})
	t.Run("QuickIdempotentCallDefersItsStart", func(t *testing.T) {
		f := newFixture(t)
		rec := &memRecord{st: f.st}
		o, err := f.g.Pass(ctx, f.call("read", nil), deferring{rec})
		if err != nil || o.Kind != Ran || strings.Join(rec.writes, ",") != "settle ran" || len(o.Events) != 2 {
			t.Fatalf("writes %v events %d %v", rec.writes, len(o.Events), err)
		}
	})
	t.Run("CrashedNonIdempotentIsInterrupted", func(t *testing.T) {
		f := newFixture(t)
		rec := &memRecord{st: f.st}
		c := f.call("act", map[string]any{"target": "x"})
		c.Dispatching = &Dispatching{Attempts: 1}
		o, err := f.g.Pass(ctx, c, rec)
		if err != nil || o.Kind != Interrupted || len(f.run.calls) != 0 {
			t.Fatalf("%v calls %d %v", o.Kind, len(f.run.calls), err)
		}
		c.Tool, c.Dispatching = "read", &Dispatching{Attempts: 1}
		o, err = f.g.Pass(ctx, c, &memRecord{st: f.st})
		if err != nil || o.Kind != Ran || o.Start.Attempt != 2 || f.run.calls[0].IdempotencyKey != "r1/0" {
			t.Fatalf("idempotent re-dispatch: %v %+v %v", o.Kind, o.Start, err)
		}
	})
}

func TestStale(t *testing.T) {
	t.Parallel()
	dir := approvals.NewDirectory(map[string][]string{"alice": {"console:alice", "slack:UA"}, "req": {"console:req", "slack:UR"}}, nil)
	a := &approvals.Approval{Requester: "console:req", Decisions: []approvals.Decision{
		{Actor: "console:alice", Action: approvals.ActionApprove},
		{Actor: "slack:UA", Action: approvals.ActionApprove},
		{Actor: "console:bob", Action: approvals.ActionApprove, Superseded: true},
		{Actor: "slack:UR", Action: approvals.ActionApprove},
		{Actor: "agent:x", Action: approvals.ActionApprove},
		{Actor: "schedule:x", Action: approvals.ActionApprove},
		// Eligible only through a group the console's identity provider
		// vouched for at sign-in.
		{Actor: "console:carol@example.com", Action: approvals.ActionApprove, Via: "sre"},
	}}
	for name, tc := range map[string]struct {
		v     approvals.Verdict
		stale bool
	}{
		"StillEligible":        {approvals.Verdict{Approvers: []string{"person:alice"}, Quorum: 1}, false},
		"OnePersonTwoIDs":      {approvals.Verdict{Approvers: []string{"person:alice"}, Quorum: 2}, true},
		"RequesterNotCounted":  {approvals.Verdict{Approvers: []string{"person:alice", "person:req"}, Quorum: 2}, true},
		"SelfAllowed":          {approvals.Verdict{Approvers: []string{"person:alice", "person:req"}, Quorum: 2, AllowSelfApproval: true}, false},
		"SupersededNotCounted": {approvals.Verdict{Approvers: []string{"console:bob"}, Quorum: 1}, true},
		"AgentsNeverCount":     {approvals.Verdict{Approvers: []string{"agent:x"}, Quorum: 1}, true},
		"SchedulesNeverCount":  {approvals.Verdict{Approvers: []string{"schedule:x"}, Quorum: 1}, true},
		"RemovedByReload":      {approvals.Verdict{Approvers: []string{"console:carol"}, Quorum: 1}, true},
		"VouchedGroupStill":    {approvals.Verdict{Approvers: []string{"group:sre"}, Quorum: 1}, false},
		"VouchedGroupDropped":  {approvals.Verdict{Approvers: []string{"group:leads"}, Quorum: 1}, true},
	} {
		if got := stale(a, tc.v, nil, dir) != ""; got != tc.stale {
			t.Errorf("%s: stale = %v, want %v (%s)", name, got, tc.stale, stale(a, tc.v, nil, dir))
		}
	}
}
