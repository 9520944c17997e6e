package telemetry_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/telemetry"
	"github.com/opsgate/opsgate/core/telemetry/telemetrytest"
	"github.com/opsgate/opsgate/store/sqlite"
)

func noEnv(string) string { return "" }

// countingStore is a RunTraceStore that counts every call: with traces off
// nothing may reach it.
type countingStore struct{ calls int }

func (c *countingStore) RunTraceSet(context.Context, string, string) error {
	c.calls++
	return errors.New("unexpected")
}
func (c *countingStore) RunTraceGet(context.Context, string) (string, error) {
	c.calls++
	return "", errors.New("unexpected")
}

var _ core.RunTraceStore = (*countingStore)(nil)

// TestTelemetryOffByDefault: with neither telemetry.otlp_endpoint nor
// OTEL_EXPORTER_OTLP_ENDPOINT, Setup builds no exporter, spans record
// nothing, nothing is exported and the store is never asked for a trace
// context.
func TestTelemetryOffByDefault(t *testing.T) {
	rcv := telemetrytest.New()
	defer rcv.Close()
	shutdown, on, err := telemetry.Setup(context.Background(), telemetry.Config{Getenv: noEnv})
	if err != nil || on {
		t.Fatalf("Setup with nothing set: on=%v err=%v, want off", on, err)
	}
	if telemetry.On() {
		t.Fatal("On() is true with traces off")
	}
	st := &countingStore{}
	ctx, ev := telemetry.StartEvent(context.Background(), "console")
	telemetry.RememberRun(ctx, st, "run-1", slog.Default())
	rctx, run := telemetry.StartRun(context.Background(), st, "run-1", "deploy", slog.Default())
	_, m := telemetry.StartModelCall(rctx, "openai", "gpt-x")
	for _, s := range []interface{ IsRecording() bool }{ev, run, m} {
		if s.IsRecording() {
			t.Fatal("a span records with traces off")
		}
	}
	telemetry.EndModelCall(m, 1, 2, nil)
	run.End()
	ev.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st.calls != 0 {
		t.Fatalf("the store was asked %d times for a trace context with traces off", st.calls)
	}
	if n := rcv.Requests(); n != 0 {
		t.Fatalf("%d export requests with traces off", n)
	}
}

// TestTelemetryRefusesBadEndpoint: an endpoint that is not an http(s) URL
// is an error and turns nothing on.
func TestTelemetryRefusesBadEndpoint(t *testing.T) {
	for _, ep := range []string{"ftp://127.0.0.1:4318", "127.0.0.1:4318", "http://"} {
		if _, on, err := telemetry.Setup(context.Background(), telemetry.Config{Endpoint: ep, Getenv: noEnv}); err == nil || on {
			t.Errorf("Setup(%q): on=%v err=%v, want an error", ep, on, err)
		}
		if telemetry.On() {
			t.Fatalf("Setup(%q) turned traces on", ep)
		}
	}
	if _, _, err := telemetry.Setup(context.Background(), telemetry.Config{Endpoint: "http://127.0.0.1:1"}); err == nil {
		t.Error("Setup without Getenv: want an error")
	}
}

// TestTelemetryTraceAcrossTurns exports to an in-process OTLP/HTTP
// receiver: an event's span stores its context with the run; a later turn
// of the run (another replica, another process context) continues the same
// trace; a model call carries the GenAI attributes; a malformed client
// traceparent is ignored and a valid one is continued.
func TestTelemetryTraceAcrossTurns(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, "file:"+filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	rcv := telemetrytest.New()
	defer rcv.Close()
	shutdown, on, err := telemetry.Setup(ctx, telemetry.Config{Endpoint: rcv.URL, ServiceName: "opsgate-test", Getenv: noEnv})
	if err != nil || !on {
		t.Fatalf("Setup: on=%v err=%v", on, err)
	}
	if !telemetry.On() {
		t.Fatal("On() is false after Setup with an endpoint")
	}

	// The client's trace: a valid traceparent is continued, a malformed one ignored.
	const client = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if tp := telemetry.Traceparent(telemetry.WithTraceparent(ctx, "00-zz-00f067aa0ba902b7-01")); tp != "" {
		t.Fatalf("a malformed traceparent was continued: %q", tp)
	}
	mctx, mcp := telemetry.StartMCPCall(telemetry.WithTraceparent(ctx, client), "flow")
	ectx, ev := telemetry.StartEvent(mctx, "mcp")
	telemetry.RememberRun(ectx, st, "run-1", slog.Default())
	ev.End()
	mcp.End()

	// Turn 1 and, "hours later on another replica", turn 2: fresh contexts.
	for range 2 {
		rctx, run := telemetry.StartRun(context.Background(), st, "run-1", "deploy", slog.Default())
		_, m := telemetry.StartModelCall(rctx, "openai", "gpt-test")
		telemetry.EndModelCall(m, 120, 7, nil)
		run.End()
	}
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if telemetry.On() {
		t.Fatal("On() is still true after shutdown")
	}
	spans, _ := rcv.Spans()
	byName := func(n string) []telemetrytest.Span {
		s := telemetrytest.Named(spans, n)
		if len(s) == 0 {
			t.Fatalf("no span %q among %+v", n, spans)
		}
		return s
	}
	mcpS, evS, runs, models := byName("mcp flow")[0], byName("event mcp")[0], byName("run deploy"), byName("chat gpt-test")
	if mcpS.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || mcpS.ParentID != "00f067aa0ba902b7" {
		t.Fatalf("the MCP span does not continue the client's trace: %+v", mcpS)
	}
	if evS.ParentID != mcpS.SpanID {
		t.Fatalf("event span's parent %s, want the MCP span %s", evS.ParentID, mcpS.SpanID)
	}
	if len(runs) != 2 || len(models) != 2 {
		t.Fatalf("%d run spans and %d model spans, want 2 each", len(runs), len(models))
	}
	for _, r := range runs {
		if r.TraceID != mcpS.TraceID || r.ParentID != evS.SpanID {
			t.Fatalf("run turn %+v does not continue the event's trace (%s, parent %s)", r, mcpS.TraceID, evS.SpanID)
		}
		if r.Attrs["opsgate.run.id"] != "run-1" || r.Service != "opsgate-test" {
			t.Fatalf("run span attributes %+v service %q", r.Attrs, r.Service)
		}
	}
	for _, m := range models {
		if m.ParentID != runs[0].SpanID && m.ParentID != runs[1].SpanID {
			t.Fatalf("model span %+v is not a child of a run turn", m)
		}
		want := map[string]any{"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-test", "gen_ai.provider.name": "openai",
			"gen_ai.usage.input_tokens": int64(120), "gen_ai.usage.output_tokens": int64(7)}
		for k, v := range want {
			if m.Attrs[k] != v {
				t.Errorf("model span %s = %v, want %v", k, m.Attrs[k], v)
			}
		}
	}
	if tp, err := st.RunTraceGet(ctx, "run-1"); err != nil || tp != "00-4bf92f3577b34da6a3ce929d0e0e4736-"+evS.SpanID+"-01" {
		t.Fatalf("stored trace context %q (%v), want the event span's", tp, err)
	}
}
