package gate

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core/telemetry"
)

// Span names of the gate's part of a request's trace (docs/telemetry.md).
const (
	spanPass     = "gate "
	spanWait     = "approval wait"
	spanDispatch = "dispatch "
)

// startPass starts the span of one pass of c through the gate.
func startPass(ctx context.Context, c *Call) (context.Context, trace.Span) {
	return telemetry.Start(ctx, spanPass+c.Tool, trace.WithAttributes(
		attribute.String("opsgate.run.id", c.RunID), attribute.Int("opsgate.step", c.Index),
		attribute.String("opsgate.tool", c.Tool)))
}

// endPass ends a pass's span with its outcome: the verdict's kind and the
// approval it asked for or ran under.
func endPass(span trace.Span, o *Outcome, err error) {
	if o != nil {
		span.SetAttributes(attribute.String("opsgate.gate.outcome", string(o.Kind)))
		if o.Approval != nil {
			span.SetAttributes(attribute.String("opsgate.approval.id", o.Approval.ID))
		}
		if o.Kind == Suspended {
			span.AddEvent("approval requested")
		}
	}
	telemetry.End(span, err)
}

// traceWait records a decided approval's wait as a span from its request
// to its decision, with the decision: the wait may have lasted hours and
// ended on another replica, so it is written when the decided call
// resumes, under the run's stored trace context.
func traceWait(ctx context.Context, a *approvals.Approval) {
	if a.DecidedAt == nil || !telemetry.On() {
		return
	}
	_, span := telemetry.Start(ctx, spanWait, trace.WithTimestamp(a.CreatedAt), trace.WithAttributes(
		attribute.String("opsgate.approval.id", a.ID), attribute.String("opsgate.approval.status", string(a.Status)),
		attribute.Int("opsgate.approval.decisions", len(a.Decisions))))
	span.AddEvent("decision", trace.WithTimestamp(*a.DecidedAt))
	span.End(trace.WithTimestamp(*a.DecidedAt))
}

// startDispatch starts the span of one tool call.
func startDispatch(ctx context.Context, c *Call, toolName string, attempt int) (context.Context, trace.Span) {
	return telemetry.Start(ctx, spanDispatch+toolName, trace.WithAttributes(
		attribute.String("opsgate.tool", toolName), attribute.Int("opsgate.attempt", attempt),
		attribute.String("opsgate.idempotency_key", c.Key)))
}
