package agent

import (
	"context"

	"github.com/opsgate/opsgate/core/telemetry"
)

// Traced wraps m so that every attempt is a span with the GenAI semantic
// conventions (docs/telemetry.md): gen_ai.operation.name chat, the
// provider, gen_ai.request.model and the tokens the provider reported.
// Wrapped inside Retrying, each retry is its own span.
func Traced(m Model, provider, model string) Model {
	return &traced{m: m, provider: provider, model: model}
}

type traced struct {
	m               Model
	provider, model string
}

func (t *traced) Stream(ctx context.Context, req *Request, sink Sink) (*Response, error) {
	ctx, span := telemetry.StartModelCall(ctx, t.provider, t.model)
	resp, err := t.m.Stream(ctx, req, sink)
	var in, out int
	if resp != nil {
		in, out = int(resp.Usage.InputTokens), int(resp.Usage.OutputTokens)
	}
	telemetry.EndModelCall(span, in, out, err)
	return resp, err
}

// TakesImages forwards the wrapped model's ImageInput: a wrapper that hid
// it would keep every image from every traced model.
func (t *traced) TakesImages() bool { return TakesImages(t.m) }
