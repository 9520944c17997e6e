package delivery

import (
	"context"
	"errors"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/chunk"
)

// RecordLimit is the largest recorded message: generous, because the
// console and the API show anything, but bounded so one reply cannot bloat
// a page.
const RecordLimit = 64 << 10

var _ Platform = (*Recorder)(nil)

// Recorder is the Platform of a channel whose outbox row is its only
// record: the API and the console read replies and cards from the outbox,
// so delivering a message is marking it sent, and its reference is the
// outbox key. It keeps such a channel on the same durable pipeline (order,
// chunks, card references) as a chat channel. Safe for concurrent use.
type Recorder struct{ channel string }

// NewRecorder returns the record-only Platform of channel; it refuses to
// "deliver" to any other channel's thread.
func NewRecorder(channel string) *Recorder { return &Recorder{channel: channel} }

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

// Format implements Platform: the readers (the console, the API) render
// opsgate's Markdown subset themselves, so the text is kept as authored.
func (*Recorder) Format() Format {
	return Format{Limit: RecordLimit, Unit: chunk.Bytes, Syntax: chunk.Markdown, Render: func(s string) string { return s }}
}

// Pacing implements Platform: nothing to protect, no limits.
func (*Recorder) Pacing() Pacing { return Pacing{} }

// Buckets implements Platform.
func (*Recorder) Buckets(t core.Thread) Buckets {
	return Buckets{Conversation: t.Key}
}
