package core

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/opsgate/opsgate/approvals"
)

// Actor is a person or system acting through a channel. ID is the identity
// used everywhere policy is decided: "<channel>:<platform user id>" (email
// uses the address), so the same human on two platforms is two actors unless
// a group lists both.
type Actor struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
}

// Thread is where a conversation lives and where every reply, card and
// result for it goes. It is data, not a callback, because replies must
// survive a restart. Key is opaque to the core: each adapter packs what it
// needs to answer in place (Slack: team/channel/thread_ts; Telegram:
// chat/topic/message).
type Thread struct {
	Channel string `json:"channel"`
	Key     string `json:"key"`
}

// String renders the thread as the API writes it: "<channel>:<key>".
func (t Thread) String() string { return t.Channel + ":" + t.Key }

// IsZero reports whether the thread is unset.
func (t Thread) IsZero() bool { return t.Channel == "" && t.Key == "" }

// ParseThread is the inverse of Thread.String. The key may itself contain
// colons; only the first one separates the channel.
func ParseThread(s string) (Thread, error) {
	ch, key, ok := strings.Cut(s, ":")
	if !ok || ch == "" || key == "" {
		return Thread{}, fmt.Errorf("thread %q: want <channel>:<key>", s)
	}
	return Thread{Channel: ch, Key: key}, nil
}

// MarshalText lets a Thread travel as its string form in JSON and SQL.
func (t Thread) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText parses the string form written by MarshalText.
func (t *Thread) UnmarshalText(b []byte) error {
	p, err := ParseThread(string(b))
	if err != nil {
		return err
	}
	*t = p
	return nil
}

// ChannelEvent is what every adapter makes of what arrives, whatever the
// platform. EventID is the platform's own deduplication key (Slack event_id,
// Telegram update_id, Discord interaction id, email Message-ID): the inbox
// records (Channel, EventID) in the same transaction that creates the run, so
// a platform's retry never starts a second run.
type ChannelEvent struct {
	Channel string `json:"channel"`
	EventID string `json:"event_id"`
	Actor   Actor  `json:"actor"`
	Thread  Thread `json:"thread"`
	// Text is the normalized request with the platform's addressing habit
	// already removed ("/ops ", "@bot", "/deploy@bot" → "deploy ...").
	Text string `json:"text"`
	// Decision is set when the event answers an approval (a button, a modal,
	// an email reply) instead of asking for work.
	Decision *Decision `json:"decision,omitempty"`
	// Answer is set when the event answers an agent's question (a button
	// of a question message).
	Answer *AnswerEvent `json:"answer,omitempty"`
	// ReplyTo is the message of opsgate's this one replies to, as the
	// platform names it (the MessageRef the adapter's Send returned: a
	// Telegram reply_to_message, an email's In-Reply-To, a Matrix
	// m.in_reply_to, a Discord message_reference). The engine continues
	// the conversation of the thread that message went to, so a reply to
	// the bot is the next turn of its session and an answer to its
	// question (docs/agents.md, "Conversations").
	ReplyTo *MessageRef `json:"reply_to,omitempty"`
	// Attachments are the files that came with the message (core.Attachment);
	// a message of only files still starts a run.
	Attachments []Attachment    `json:"attachments,omitempty"`
	Raw         json.RawMessage `json:"raw,omitempty"`
	ReceivedAt  time.Time       `json:"received_at"`
}

// Decision is an approver's answer as an adapter parsed it. Which approval it
// answers comes from a verified reference (button payload with an HMAC tag,
// per-approval email reply token), never from trusted client state.
type Decision struct {
	ApprovalID string           `json:"approval_id"`
	Action     approvals.Action `json:"action"` // approve | reject | edit
	Args       map[string]any   `json:"args,omitempty"`
	Reason     string           `json:"reason,omitempty"`
	Scope      approvals.Scope  `json:"scope,omitempty"` // call (default) | task | session | forever
	// For bounds a session or forever grant ("for": "2h"); 0 leaves the
	// default (approvals.session_ttl for a session, no end for forever).
	For time.Duration `json:"for,omitempty"`
	// Pattern, with scope forever, saves the grant as per-argument globs
	// instead of the exact arguments (it must name every argument).
	Pattern map[string]string `json:"pattern,omitempty"`
	// Unverified, when set, says why the surface could not authenticate
	// the decider (an email reply without its token, a failed DMARC
	// check). The core then refuses the decision without judging it and
	// audits the attempt with this reason.
	Unverified string `json:"unverified,omitempty"`
	// Groups are approver groups the surface vouches the decider belongs
	// to beyond the configuration: the web console's OpenID Connect
	// sign-in passes the identity provider's groups that name configured
	// approver groups (approvals.Request.Groups). Never read from JSON, so
	// no request body can claim a group.
	Groups []string `json:"-"`
}

// Sink is where adapters hand what they received. HandleEvent returns only
// after the event is durably recorded (or recognised as a duplicate), so an
// adapter may acknowledge the platform as soon as it returns nil.
type Sink interface {
	HandleEvent(ctx context.Context, ev ChannelEvent) (Receipt, error)
}

// CardSource lets an adapter fetch the current card of an approval: to
// pre-fill an edit modal, to answer a stale button, to re-render a card.
// The engine implements it; ErrNotFound for an unknown id.
type CardSource interface {
	CardByApproval(ctx context.Context, approvalID string) (Card, error)
}

// Receipt tells an adapter what became of an event, so it can answer the
// platform in its own way (an ephemeral refusal, a modal error, a reply).
type Receipt struct {
	// Duplicate is true when the event was seen before; nothing new happened.
	Duplicate bool
	// RunID is the run the event started, or the run it belonged to.
	RunID string
	// Run is the run as recorded, when this event created it (nil for a
	// duplicate or a decision), so a caller that shows it needs no read.
	Run *Run
	// ApprovalStatus is the approval's status after a decision event.
	ApprovalStatus string
	// Refused is true when the sender may not start runs on this channel
	// (channels.<name>.requesters): the event was recorded and answered
	// politely, and started nothing.
	Refused bool
}
