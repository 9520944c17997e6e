package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core"
)

func mcpTasks(t *testing.T, s core.Store) (core.MCPTaskStore, core.RunTraceStore) {
	t.Helper()
	ts, ok := s.(core.MCPTaskStore)
	rs, ok2 := s.(core.RunTraceStore)
	if !ok || !ok2 {
		t.Fatalf("%T does not implement core.MCPTaskStore and core.RunTraceStore", s)
	}
	return ts, rs
}

// testMCPTaskRoundTrip: a task handle reads back as stored; an unknown id
// is ErrNotFound; an id is never stored twice.
func testMCPTaskRoundTrip(t *testing.T, s core.Store) {
	ts, _ := mcpTasks(t, s)
	t0 := time.Unix(1700000000, 123000).UTC()
	in := &core.MCPTask{ID: "task-1", Actor: "agent:claude", Endpoint: "/mcp", Tool: "call_agent_tool", RunID: "run-1", CallID: "call-1",
		ClaimID: "claim", ToolCallID: "tc-1", ToolID: "deploy", Input: []byte(`{"service":"api"}`), TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	if err := ts.MCPTaskCreate(ctx(t), in); err != nil {
		t.Fatalf("MCPTaskCreate: %v", err)
	}
	got, err := ts.MCPTaskGet(ctx(t), "task-1")
	if err != nil {
		t.Fatalf("MCPTaskGet: %v", err)
	}
	if got.Actor != in.Actor || got.Endpoint != in.Endpoint || got.Tool != in.Tool || got.RunID != in.RunID || got.CallID != in.CallID ||
		got.ClaimID != in.ClaimID || got.ToolCallID != in.ToolCallID || got.ToolID != in.ToolID || string(got.Input) != string(in.Input) ||
		got.TraceParent != in.TraceParent || !got.CreatedAt.Equal(t0) || !got.ExpiresAt.Equal(in.ExpiresAt) {
		t.Errorf("got %+v, want %+v", got, in)
	}
	if _, err := ts.MCPTaskGet(ctx(t), "nope"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("unknown task: %v", err)
	}
	if err := ts.MCPTaskCreate(ctx(t), in); !errors.Is(err, core.ErrConflict) {
		t.Errorf("the same id twice: %v", err)
	}
}

// testRunTraceFirstStays: a run's trace context is its first one; a run
// without one reads "".
func testRunTraceFirstStays(t *testing.T, s core.Store) {
	_, rs := mcpTasks(t, s)
	if tp, err := rs.RunTraceGet(ctx(t), "run-x"); err != nil || tp != "" {
		t.Fatalf("no trace: %q %v", tp, err)
	}
	for _, tp := range []string{"00-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-bbbbbbbbbbbbbbbb-01", "00-cccccccccccccccccccccccccccccccc-dddddddddddddddd-01"} {
		if err := rs.RunTraceSet(ctx(t), "run-x", tp); err != nil {
			t.Fatal(err)
		}
	}
	if tp, err := rs.RunTraceGet(ctx(t), "run-x"); err != nil || tp != "00-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-bbbbbbbbbbbbbbbb-01" {
		t.Fatalf("trace %q %v", tp, err)
	}
}
