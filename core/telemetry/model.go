package telemetry

import (
	"context"

	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// StartModelCall starts the span of one model call with the GenAI semantic
// conventions: named "chat <model>", kind client, gen_ai.operation.name
// chat, gen_ai.provider.name and gen_ai.request.model. The caller ends it
// with EndModelCall.
func StartModelCall(ctx context.Context, provider, model string) (context.Context, trace.Span) {
	return Start(ctx, "chat "+model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		semconv.GenAIOperationNameChat,
		semconv.GenAIProviderNameKey.String(provider),
		semconv.GenAIRequestModel(model),
	))
}

// EndModelCall records the tokens the model reported
// (gen_ai.usage.input_tokens, gen_ai.usage.output_tokens) and err, and ends
// span.
func EndModelCall(span trace.Span, inputTokens, outputTokens int, err error) {
	if err == nil {
		span.SetAttributes(semconv.GenAIUsageInputTokens(inputTokens), semconv.GenAIUsageOutputTokens(outputTokens))
	}
	End(span, err)
}
