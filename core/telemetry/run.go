package telemetry

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/opsgate/opsgate/core"
)

// On reports whether Setup turned traces on (the global provider is the
// SDK's). Call sites that would read the store for a trace context ask
// first, so tracing off costs no query.
func On() bool {
	_, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider)
	return ok
}

// StartRun starts the span of one turn of run runID ("run <flow>"): a run
// is driven in turns (until it ends or waits on a person), possibly on
// different replicas hours apart, so every turn's span continues the trace
// stored with the run (an MCP client's traceparent, or the first turn's
// own context, stored then). ts may be nil (a store without trace
// contexts): each turn is then its own trace. A store failure is logged,
// never fatal: traces are not worth a run.
func StartRun(ctx context.Context, ts core.RunTraceStore, runID, flow string, log *slog.Logger) (context.Context, trace.Span) {
	if !On() || ts == nil {
		return Start(ctx, "run "+flow, runAttrs(runID, flow))
	}
	stored, err := ts.RunTraceGet(ctx, runID)
	if err != nil {
		log.Warn("telemetry: read the run's trace context", "run", runID, "err", err)
	}
	ctx, span := Start(WithTraceparent(ctx, stored), "run "+flow, runAttrs(runID, flow))
	if stored == "" {
		RememberRun(ctx, ts, runID, log)
	}
	return ctx, span
}

// RememberRun stores ctx's trace context as run runID's (the first one
// stays), so every later turn of the run continues this trace. It is
// called with the event's span before the run is recorded, so the run's
// first turn, claimed at once by any replica, already finds it. Nothing is
// read or written while tracing is off.
func RememberRun(ctx context.Context, ts core.RunTraceStore, runID string, log *slog.Logger) {
	tp := Traceparent(ctx)
	if !On() || ts == nil || tp == "" {
		return
	}
	if err := ts.RunTraceSet(ctx, runID, tp); err != nil {
		log.Warn("telemetry: store the run's trace context", "run", runID, "err", err)
	}
}

// StartEvent starts the span of one inbound channel event ("event
// <channel>"), the root of a request's trace unless the caller's context
// already carries one (an MCP client's traceparent).
func StartEvent(ctx context.Context, channel string) (context.Context, trace.Span) {
	return Start(ctx, "event "+channel, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("opsgate.channel", channel)))
}

func runAttrs(runID, flow string) trace.SpanStartOption {
	return trace.WithAttributes(attribute.String("opsgate.run.id", runID), attribute.String("opsgate.flow", flow))
}

// StartMCPCall starts the span of one MCP tools/call ("mcp <tool>", kind
// server); ctx carries the client's traceparent from _meta when it sent one
// (WithTraceparent), so the span continues the client's trace.
func StartMCPCall(ctx context.Context, tool string) (context.Context, trace.Span) {
	return Start(ctx, "mcp "+tool, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("opsgate.mcp.tool", tool)))
}
