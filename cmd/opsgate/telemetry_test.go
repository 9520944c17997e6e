package main

import (
	"os"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/core/telemetry/telemetrytest"
)

// TestTraceAcrossApprovalAndRestart runs the real binary with
// telemetry.otlp_endpoint at an in-process OTLP/HTTP receiver: a deploy
// asks, the server stops (flushing its spans) and another process decides
// and dispatches. Every span of the request is one trace: the event, the
// run's first turn, the gate's pass that suspended, then — in the second
// process — the run's next turn continuing the stored context, the
// approval wait (request to decision), the gate's pass that ran, the
// dispatch.
func TestTraceAcrossApprovalAndRestart(t *testing.T) {
	t.Parallel()
	rcv := telemetrytest.New()
	defer rcv.Close()
	e := newEnv(t)
	deployConfig(e, "")
	f, err := os.OpenFile(e.cfgPath, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("telemetry:\n  otlp_endpoint: " + rcv.URL + "\n  service_name: opsgate-e2e\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()

	e.start()
	run := e.message("ops-trace", "deploy web 2.0.0 prod")
	id := pendingApproval(t, e, run.ID)
	e.stop() // flushes the first process's spans
	first, _ := rcv.Spans()

	e.start()
	e.mustCLI("approvals", "approve", id)
	e.waitStatus(run.ID, "succeeded")
	e.stop()
	spans, _ := rcv.Spans()

	var events []telemetrytest.Span
	for _, s := range first {
		if strings.HasPrefix(s.Name, "event ") {
			events = append(events, s)
		}
	}
	if len(events) != 1 {
		t.Fatalf("first process: %d event spans, want 1: %+v", len(events), first)
	}
	ev := events[0]
	trace := ev.TraceID
	inTrace := func(name string) []telemetrytest.Span {
		var out []telemetrytest.Span
		for _, s := range telemetrytest.Named(spans, name) {
			if s.TraceID == trace {
				out = append(out, s)
			}
		}
		return out
	}
	runs, gates, waits, dispatches := inTrace("run deploy"), inTrace("gate deploy"), inTrace("approval wait"), inTrace("dispatch deploy")
	if len(runs) < 2 || len(gates) != 2 || len(waits) != 1 || len(dispatches) != 1 {
		t.Fatalf("in trace %s: %d run turns, %d gate passes, %d approval waits, %d dispatches; want ≥2, 2, 1, 1; spans: %+v",
			trace, len(runs), len(gates), len(waits), len(dispatches), spans)
	}
	byID := map[string]telemetrytest.Span{}
	for _, s := range spans {
		byID[s.SpanID] = s
	}
	for _, r := range runs {
		if r.ParentID != ev.SpanID || r.Attrs["opsgate.run.id"] != run.ID || r.Service != "opsgate-e2e" {
			t.Errorf("run turn %+v: want a child of the event span %s for run %s", r, ev.SpanID, run.ID)
		}
	}
	outcomes := map[string]telemetrytest.Span{}
	for _, g := range gates {
		if p, ok := byID[g.ParentID]; !ok || p.Name != "run deploy" {
			t.Errorf("gate pass %+v is not a child of a run turn", g)
		}
		outcomes[g.Attrs["opsgate.gate.outcome"].(string)] = g
	}
	suspended, ran := outcomes["suspended"], outcomes["ran"]
	if suspended.SpanID == "" || ran.SpanID == "" || suspended.Attrs["opsgate.approval.id"] != id || ran.Attrs["opsgate.approval.id"] != id {
		t.Fatalf("gate outcomes %+v: want one suspended and one ran under approval %s", outcomes, id)
	}
	if suspended.ParentID == ran.ParentID {
		t.Errorf("the suspending and the running pass share a run turn: %s", ran.ParentID)
	}
	if w := waits[0]; w.ParentID != ran.SpanID || w.Attrs["opsgate.approval.id"] != id || w.Attrs["opsgate.approval.status"] != "approved" || w.EndNanos < w.StartNanos {
		t.Errorf("approval wait %+v: want a child of the running pass, approved", w)
	}
	if d := dispatches[0]; d.ParentID != ran.SpanID {
		t.Errorf("dispatch %+v: want a child of the running pass %s", d, ran.SpanID)
	}
}
