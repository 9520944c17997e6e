// Package console is the web console's channel. It has no platform to call:
// the outbox row itself is the console's conversation record, which the API
// and the console UI read. Sending only marks a message delivered, through
// the same durable pipeline every other channel uses, so console threads get
// the same ordering, chunk bookkeeping and card references as chat threads.
package console

import (
	"context"
	"errors"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/chunk"
	"github.com/opsgate/opsgate/core/delivery"
)

// Channel is the console's name in thread addresses and actor ids.
const Channel = "console"

// Limit is the largest console message: generous, because a browser shows
// anything, but bounded so one reply cannot bloat a page.
const Limit = 64 << 10

var _ delivery.Platform = (*Adapter)(nil)

// Adapter is the console channel's Platform.
type Adapter struct{}

// New returns the console Platform.
func New() *Adapter { return &Adapter{} }

// Channel implements core.Adapter.
func (*Adapter) Channel() string { return Channel }

// Send implements core.Adapter. The message is already stored in the
// outbox, so delivering it is recording it: the reference is the outbox
// key, which the console uses to find the message again.
func (*Adapter) Send(ctx context.Context, m core.Outbound) (core.MessageRef, error) {
	if err := ctx.Err(); err != nil {
		return core.MessageRef{}, err
	}
	if m.Thread.Channel != Channel {
		return core.MessageRef{}, &core.PermanentError{Err: errors.New("console: thread " + m.Thread.String() + " is not a console thread")}
	}
	return core.MessageRef{Channel: Channel, ID: m.Key}, nil
}

// Format implements delivery.Platform: the console renders opsgate's
// Markdown subset itself (escaping it as HTML), so the text is kept as
// authored.
func (*Adapter) Format() delivery.Format {
	return delivery.Format{Limit: Limit, Unit: chunk.Bytes, Syntax: chunk.Markdown, Render: func(s string) string { return s }}
}

// Pacing implements delivery.Platform: nothing to protect, no limits.
func (*Adapter) Pacing() delivery.Pacing { return delivery.Pacing{} }

// Buckets implements delivery.Platform.
func (*Adapter) Buckets(t core.Thread) delivery.Buckets {
	return delivery.Buckets{Conversation: t.Key}
}
