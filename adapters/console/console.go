// Package console is the web console's channel. It has no platform to call:
// the outbox row itself is the console's conversation record, which the API
// and the console UI read. Sending only marks a message delivered, through
// the same durable pipeline every other channel uses, so console threads get
// the same ordering, chunk bookkeeping and card references as chat threads.
//
// Recorder, that record-only Platform, is exported for every channel that
// likewise has nobody to answer on the platform side (the webhook channel).
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

// Limit is the largest recorded message: generous, because the console and
// the API show anything, but bounded so one reply cannot bloat a page.
const Limit = 64 << 10

var _ delivery.Platform = (*Recorder)(nil)

// Recorder is the Platform of a channel whose outbox row is its only
// record: the API and the console read replies and cards from the outbox,
// so delivering a message is marking it sent, and its reference is the
// outbox key. It keeps such a channel on the same durable pipeline (order,
// chunks, card references) as a chat channel. Safe for concurrent use.
type Recorder struct{ channel string }

// NewRecorder returns the record-only Platform of channel; it refuses to
// "deliver" to any other channel's thread.
func NewRecorder(channel string) *Recorder { return &Recorder{channel: channel} }

// New returns the console's Platform.
func New() *Recorder { return NewRecorder(Channel) }

// Channel implements core.Adapter.
func (r *Recorder) Channel() string { return r.channel }

// Send implements core.Adapter. The message is already stored in the
// outbox, so delivering it is recording it: the reference is the outbox
// key, which the console uses to find the message again. A thread of
// another channel is a permanent error: retrying cannot make it ours.
func (r *Recorder) Send(ctx context.Context, m core.Outbound) (core.MessageRef, error) {
	if err := ctx.Err(); err != nil {
		return core.MessageRef{}, err
	}
	if m.Thread.Channel != r.channel {
		return core.MessageRef{}, &core.PermanentError{Err: errors.New(r.channel + ": thread " + m.Thread.String() + " is not a " + r.channel + " thread")}
	}
	return core.MessageRef{Channel: r.channel, ID: m.Key}, nil
}

// Format implements delivery.Platform: the console renders opsgate's
// Markdown subset itself (escaping it as HTML), so the text is kept as
// authored.
func (*Recorder) Format() delivery.Format {
	return delivery.Format{Limit: Limit, Unit: chunk.Bytes, Syntax: chunk.Markdown, Render: func(s string) string { return s }}
}

// Pacing implements delivery.Platform: nothing to protect, no limits.
func (*Recorder) Pacing() delivery.Pacing { return delivery.Pacing{} }

// Buckets implements delivery.Platform.
func (*Recorder) Buckets(t core.Thread) delivery.Buckets {
	return delivery.Buckets{Conversation: t.Key}
}
