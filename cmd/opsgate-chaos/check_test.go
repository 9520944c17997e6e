package main

import (
	"strings"
	"testing"
)

// world0 is a run where everything held: one request of each kind, each
// with its one run, its calls and its delivered reply.
func world0() observed {
	return observed{
		Requests: []*request{
			{N: 0, Flow: "deploy", Decision: "approve", Text: "/ops deploy a 1", Acked: true},
			{N: 1, Flow: "deploy", Decision: "reject", Text: "/ops deploy b 1", Acked: true},
			{N: 2, Flow: "restart", Text: "/ops restart c", Acked: true},
			{N: 3, Flow: "status", Text: "/ops status d", Acked: false}, // never acknowledged: no run is fine
		},
		Runs: map[int][]apiRun{
			0: {{ID: "r0", Flow: "deploy", Status: "succeeded", Steps: []apiStep{{Index: 0, Tool: "deploy", Status: "succeeded"}}}},
			1: {{ID: "r1", Flow: "deploy", Status: "rejected", Steps: []apiStep{{Index: 0, Tool: "deploy", Status: "rejected"}}}},
			2: {{ID: "r2", Flow: "restart", Status: "succeeded", Steps: []apiStep{{Index: 0, Tool: "restart", Status: "succeeded"}}}},
		},
		Approvals: []apiApproval{{ID: "a0", RunID: "r0", Status: "approved"}, {ID: "a1", RunID: "r1", Status: "rejected"}},
		Deliveries: []apiDelivery{
			{ID: "d0", Kind: "reply", RunID: "r0", Status: "sent", Refs: []apiRef{{Channel: "telegram", ID: "700000/2"}}},
			{ID: "d1", Kind: "card", RunID: "r1", Status: "sent", Refs: []apiRef{{Channel: "telegram", ID: "700001/2#decided"}}},
			{ID: "d2", Kind: "reply", RunID: "r2", Status: "dead"},
		},
		Messages: map[string]sentMessage{"700000/2": {Chat: 700000, ID: 2, Text: "ok"}, "700001/2": {Chat: 700001, ID: 2, Text: "card"}},
		Calls: []dispatchCall{
			{Tool: "deploy", Key: "r0/0", RunID: "r0"},
			{Tool: "restart", Key: "r2/0", RunID: "r2"}, {Tool: "restart", Key: "r2/0", RunID: "r2"}, // idempotent: allowed
		},
		AuditOK: true,
	}
}

func TestCheckPassesAConsistentRun(t *testing.T) {
	bad, s := check(world0())
	if len(bad) != 0 {
		t.Fatalf("violations in a consistent run: %q", bad)
	}
	if s.Runs["succeeded"] != 2 || s.Runs["rejected"] != 1 || s.Redispatched != 1 || s.Sent != 2 || s.Dead != 1 {
		t.Fatalf("summary %+v", s)
	}
}

// Each case breaks one invariant and must be reported.
func TestCheckFindsEachViolation(t *testing.T) {
	for _, c := range []struct {
		name    string
		breakIt func(o *observed)
		want    string
	}{
		{"AckedWithoutRun", func(o *observed) { delete(o.Runs, 2) }, "acknowledged, but no run"},
		{"TwoRunsForOneMessage", func(o *observed) {
			o.Runs[2] = append(o.Runs[2], apiRun{ID: "r2b", Flow: "restart", Status: "succeeded"})
		}, "2 runs for one message"},
		{"RunLeftRunning", func(o *observed) { o.Runs[0][0].Status = "running" }, "left running"},
		{"StepLeftDispatching", func(o *observed) {
			o.Runs[0][0].Status, o.Runs[0][0].Steps[0].Status = "interrupted", "dispatching"
		}, "still dispatching"},
		{"NonIdempotentDispatchedTwice", func(o *observed) {
			o.Calls = append(o.Calls, dispatchCall{Tool: "deploy", Key: "r0/0", RunID: "r0"})
		}, "deploy dispatched 2 times"},
		{"RejectedButCalled", func(o *observed) {
			o.Calls = append(o.Calls, dispatchCall{Tool: "deploy", Key: "r1/0", RunID: "r1"})
		}, "rejected but its tool was called"},
		{"SucceededWithoutCall", func(o *observed) { o.Calls = o.Calls[1:] }, "succeeded but its tool was never called"},
		{"WrongOutcome", func(o *observed) { o.Runs[1][0].Status = "succeeded" }, "want one of [rejected]"},
		{"IdempotentInterrupted", func(o *observed) { o.Runs[2][0].Status = "interrupted" }, "want one of [succeeded]"},
		{"StrayDispatch", func(o *observed) {
			o.Calls = append(o.Calls, dispatchCall{Tool: "status", Key: "zz/0", RunID: "zz"})
		}, "belongs to no run"},
		{"ApprovalPending", func(o *observed) { o.Approvals[0].Status = "pending" }, "still pending"},
		{"DeliveryPending", func(o *observed) { o.Deliveries[2].Status = "pending" }, "delivery d2 (reply of run r2) still pending"},
		{"SentButNeverReceived", func(o *observed) { delete(o.Messages, "700000/2") }, "which the platform never got"},
		{"SentWithoutRef", func(o *observed) { o.Deliveries[0].Refs = nil }, "sent without a message ref"},
		{"AuditBroken", func(o *observed) { o.AuditOK, o.AuditBad = false, 7 }, "first bad entry 7"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := world0()
			c.breakIt(&o)
			bad, _ := check(o)
			if len(bad) == 0 || !strings.Contains(strings.Join(bad, "\n"), c.want) {
				t.Fatalf("violations %q, want one saying %q", bad, c.want)
			}
		})
	}
}

func TestParseFlagsRefusesBadValues(t *testing.T) {
	t.Setenv("OPSGATE_TEST_POSTGRES_DSN", "")
	for _, args := range [][]string{
		{"--store", "mysql"}, {"--store", "postgres"}, {"--requests", "0"}, {"--kills", "-1"}, {"--timeout", "0s"},
	} {
		if _, err := parseFlags(args, &strings.Builder{}); err == nil {
			t.Errorf("parseFlags(%q) accepted it", args)
		}
	}
	o, err := parseFlags(nil, &strings.Builder{})
	if err != nil || o.store != "sqlite" || o.seed == 0 {
		t.Fatalf("defaults: %+v, %v", o, err)
	}
}
