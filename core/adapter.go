package core

import (
	"context"
	"net/http"
)

// MessageKind says what an outbox message is, so the pipeline can render it.
type MessageKind string

// The kinds of outbound message.
const (
	// KindReply is text authored in opsgate's Markdown subset.
	KindReply MessageKind = "reply"
	// KindCard is a new approval card, rendered from the approval's state
	// at send time.
	KindCard MessageKind = "card"
	// KindCardUpdate edits a card already sent (buttons removed, outcome
	// shown); a platform that cannot edit answers ErrNotSupported
	// and the pipeline sends it as a new message instead.
	KindCardUpdate MessageKind = "card_update"
	// KindQuestionUpdate edits an agent's question already sent, once it
	// is answered or expired (buttons removed, the answer shown); its
	// OutboxMessage.Replaces is the question's outbox id and Outbound.Edit
	// the platform's reference of it. A platform that cannot edit answers
	// ErrNotSupported and the pipeline sends it as a new message instead.
	KindQuestionUpdate MessageKind = "question_update"
	// KindStream is an agent's text while the model writes it (at most one
	// a second per run): the first of a run is sent as a reply, later ones
	// edit that message in place. Only a ReplyEditor gets them; for other
	// platforms the pipeline skips them.
	KindStream MessageKind = "stream"
	// KindStreamEnd is the final answer of a run that streamed: chunked
	// like a reply, its first chunk edits the streamed message.
	KindStreamEnd MessageKind = "stream_end"
	// KindProgress is a run's status message while its tools run long:
	// elapsed time and the newest output lines of the running step, and
	// each step's result line once it ended. The first of a run is sent as
	// a reply, later ones edit that message in place. Only a ReplyEditor
	// gets them; for other platforms the pipeline skips them (the result
	// comes in the run's reply, as always).
	KindProgress MessageKind = "progress"
)

// ReplyEditor is an adapter that edits a sent reply in place when an
// Outbound of KindReply carries Edit.
type ReplyEditor interface {
	EditsReplies() bool
}

// OutboxRefStore is the optional capability of an outbox store that reads
// the platform references an outbox message went out as (both stores have
// it), so a later message can edit it (KindQuestionUpdate).
type OutboxRefStore interface {
	// OutboxRefs returns the references of the chunks of outbox message id
	// sent so far, in order; ErrNotFound for an unknown id.
	OutboxRefs(ctx context.Context, id string) ([]MessageRef, error)
}

// StreamRefStore is the optional capability of an outbox store that finds
// the message a run's streamed text (or its status) went out as, so later
// ones edit it (both stores have it).
type StreamRefStore interface {
	// OutboxStreamRef returns the reference of the first sent message of
	// kind (KindStream, KindProgress) of runID in thread, or ErrNotFound.
	OutboxStreamRef(ctx context.Context, runID string, thread Thread, kind MessageKind) (*MessageRef, error)
}

// MessageRef is a platform's reference to a message it accepted (Slack ts,
// Telegram message_id, Discord message id, email Message-ID), stored so the
// message can be edited later. Opaque to the core.
type MessageRef struct {
	Channel string `json:"channel"`
	ID      string `json:"id"`
}

// Outbound is one unit the delivery pipeline hands an adapter: a chunk of a
// reply already rendered and cut to the platform's limit, or a card.
type Outbound struct {
	// Key is stable across retries of the same chunk (outbox id and chunk
	// index), for platforms that accept an idempotency key.
	Key    string
	Thread Thread
	Kind   MessageKind
	// Text is the native rendering for replies (and the card's fallback).
	Text string
	// Part and Parts number the chunks of one reply, 1-based.
	Part, Parts int
	// Card is set for KindCard and KindCardUpdate.
	Card *Card
	// Question is set on the last chunk of a reply that asks an agent's
	// question, for a QuestionRenderer (buttons); others send the text.
	Question *QuestionCard
	// Edit is the reference of the message to update for KindCardUpdate,
	// when the card was sent on this channel, and for a reply that edits
	// an agent's streamed message (a ReplyEditor only).
	Edit *MessageRef
}

// The optional lifecycle of an adapter. cmd/opsgate discovers each of these
// on the adapter it built, as net/http discovers http.Flusher, so wiring a
// channel is a registration and never a copied if-block (docs/architecture.md,
// "Add a channel").

// HTTPReceiver is an adapter that receives over the server's one listener.
// Routes maps http.ServeMux patterns ("POST /slack/events", "/hooks/") to
// their handlers; empty when the configured mode needs none.
type HTTPReceiver interface {
	Routes() map[string]http.Handler
}

// Runner is an adapter with a long-lived receiver of its own (Socket Mode,
// long polling, the Gateway, IMAP). Run blocks until ctx ends, retrying
// what fails; it returns nil then, or at once when the configured mode has
// nothing to run.
type Runner interface {
	Run(ctx context.Context) error
}

// Drainer is an adapter that starts work after acknowledging a request
// (notices, follow-ups). Drain waits for that work to finish, or for ctx to
// end; it is called on shutdown, after the HTTP server and Run stopped.
type Drainer interface {
	Drain(ctx context.Context) error
}

// Adapter is the seam between the core and one platform for outbound
// messages: the pipeline supplies chunks in order, paced to the platform's
// limits; the adapter only renders and sends. Errors: *RateLimitError for a
// 429, *PermanentError for what will never succeed, anything else is retried
// with backoff.
type Adapter interface {
	// Channel is the name in thread addresses and actor ids ("slack").
	Channel() string
	// Send delivers one Outbound and returns the platform's reference.
	Send(ctx context.Context, m Outbound) (MessageRef, error)
}
