package webhook

import (
	"context"
	"errors"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/chunk"
	"github.com/opsgate/opsgate/core/delivery"
)

// Limit is the largest webhook reply chunk: replies are read through the
// API and console, which show anything, but bounded so one reply cannot
// bloat a response.
const Limit = 64 << 10

var _ delivery.Platform = (*Adapter)(nil)

// Channel implements core.Adapter.
func (*Adapter) Channel() string { return Channel }

// Send implements core.Adapter. A webhook sender gets its answer (202) at
// once and has nothing to reply to later, so, as for the console, the
// outbox row is the record: delivering a reply or card marks it sent and
// the reference is the outbox key. Replies, cards and results stay visible
// in GET /api/v1/deliveries and the console, and the thread's runs in
// GET /api/v1/runs?thread=webhook:<name>/<thread>.
func (*Adapter) Send(ctx context.Context, m core.Outbound) (core.MessageRef, error) {
	if err := ctx.Err(); err != nil {
		return core.MessageRef{}, err
	}
	if m.Thread.Channel != Channel {
		return core.MessageRef{}, &core.PermanentError{Err: errors.New("webhook: thread " + m.Thread.String() + " is not a webhook thread")}
	}
	return core.MessageRef{Channel: Channel, ID: m.Key}, nil
}

// Format implements delivery.Platform: text is kept as authored (opsgate's
// Markdown subset), because the console renders it and escapes it there.
func (*Adapter) Format() delivery.Format {
	return delivery.Format{Limit: Limit, Unit: chunk.Bytes, Syntax: chunk.Markdown, Render: func(s string) string { return s }}
}

// Pacing implements delivery.Platform: no platform to protect, no limits.
func (*Adapter) Pacing() delivery.Pacing { return delivery.Pacing{} }

// Buckets implements delivery.Platform.
func (*Adapter) Buckets(t core.Thread) delivery.Buckets {
	return delivery.Buckets{Conversation: t.Key}
}
