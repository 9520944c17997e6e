package matrix

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/chunk"
	"github.com/opsgate/opsgate/core/delivery"
)

// Format implements delivery.Platform: Matrix HTML, cut at MaxBody bytes.
func (a *Adapter) Format() delivery.Format {
	return delivery.Format{Limit: MaxBody, Unit: chunk.Bytes, Syntax: chunk.HTML, Markers: true, Render: renderHTML}
}

// Pacing implements delivery.Platform. Homeservers limit per user (Synapse
// defaults to bursts of 10 and a slow refill, and usually exempts bots);
// opsgate sends at most 2 messages a second per room and 5 per account,
// and honours every M_LIMIT_EXCEEDED on top. channels.matrix.rate_limits
// changes both.
func (a *Adapter) Pacing() delivery.Pacing {
	return delivery.Pacing{
		Conversation: delivery.Rate{Every: 500 * time.Millisecond, Burst: 3},
		Account:      delivery.Rate{Every: 200 * time.Millisecond, Burst: 5},
	}
}

// Buckets implements delivery.Platform: one bucket per room.
func (a *Adapter) Buckets(t core.Thread) delivery.Buckets {
	k, err := parseThreadKey(t.Key)
	if err != nil {
		return delivery.Buckets{Conversation: t.Key}
	}
	return delivery.Buckets{Conversation: string(k.Room)}
}

// Send implements core.Adapter: a reply chunk or a card goes into the
// thread's room, in its thread; a card update edits the card (m.replace)
// or, when it was never sent here, posts the card anew.
func (a *Adapter) Send(ctx context.Context, m core.Outbound) (core.MessageRef, error) {
	k, err := parseThreadKey(m.Thread.Key)
	if err != nil {
		return core.MessageRef{}, &core.PermanentError{Err: err}
	}
	threads := *a.cfg.Threads
	switch m.Kind {
	case core.KindReply:
		c := map[string]any{"msgtype": "m.notice", "body": inertPlain(plainBody(m.Text)),
			"format": "org.matrix.custom.html", "formatted_body": formattedBody(m.Text), "m.mentions": map[string]any{}}
		if m.Edit != nil && m.Edit.Channel == ChannelName {
			return a.editReply(ctx, m, c)
		}
		addRelation(c, k, threads)
		return a.sendRef(ctx, k.Room, c, txnID(m.Key, "reply"))
	case core.KindQuestionUpdate:
		// An answered question: its message is edited to show the answer,
		// or, when it was not sent here, the answer follows.
		c := map[string]any{"msgtype": "m.notice", "body": inertPlain(plainBody(m.Text)),
			"format": "org.matrix.custom.html", "formatted_body": formattedBody(m.Text), "m.mentions": map[string]any{}}
		if m.Edit != nil && m.Edit.Channel == ChannelName {
			return a.editEvent(ctx, *m.Edit, c, m.Key)
		}
		addRelation(c, k, threads)
		return a.sendRef(ctx, k.Room, c, txnID(m.Key, "reply"))
	case core.KindCard, core.KindCardUpdate:
		if m.Card == nil {
			return core.MessageRef{}, &core.PermanentError{Err: fmt.Errorf("matrix: %s message without a card", m.Kind)}
		}
		if m.Kind == core.KindCardUpdate && m.Edit != nil && m.Edit.Channel == ChannelName {
			return a.editCard(ctx, m, k)
		}
		ref, err := a.sendRef(ctx, k.Room, cardEvent(*m.Card, k, threads), txnID(m.Key, "card"))
		if err == nil && m.Card.Pending() {
			a.seedReactions(ctx, k.Room, ref, m.Key)
		}
		return ref, err
	}
	return core.MessageRef{}, &core.PermanentError{Err: fmt.Errorf("matrix: unknown message kind %q", m.Kind)}
}

// cardEvent is a card as the content of an m.room.message in thread k.
func cardEvent(c core.Card, k threadKey, threads bool) map[string]any {
	plain, formatted := cardContent(c)
	content := map[string]any{"msgtype": "m.notice", "body": plain, "format": "org.matrix.custom.html",
		"formatted_body": formatted, "m.mentions": map[string]any{},
		"org.opsgate.card": cardMarker{ApprovalID: c.ApprovalID, Thread: k.String()}}
	addRelation(content, k, threads)
	return content
}

// editCard replaces a sent card's content.
func (a *Adapter) editCard(ctx context.Context, m core.Outbound, k threadKey) (core.MessageRef, error) {
	return a.editEvent(ctx, *m.Edit, cardEvent(*m.Card, k, *a.cfg.Threads), m.Key)
}

// editEvent replaces the content of the message ref names (m.replace names
// the original event); the reference stays the original's, so later edits
// name it too.
func (a *Adapter) editEvent(ctx context.Context, ref core.MessageRef, newContent map[string]any, key string) (core.MessageRef, error) {
	room, orig, err := parseMessageRef(ref.ID)
	if err != nil {
		return core.MessageRef{}, &core.PermanentError{Err: err}
	}
	delete(newContent, "m.relates_to") // m.new_content carries no relation
	edit := map[string]any{
		"msgtype": "m.notice", "body": "* " + newContent["body"].(string),
		"format": "org.matrix.custom.html", "formatted_body": "* " + newContent["formatted_body"].(string),
		"m.mentions": map[string]any{}, "m.new_content": newContent,
		"m.relates_to": map[string]any{"rel_type": "m.replace", "event_id": orig},
	}
	if _, err := a.sendEvent(ctx, room, "m.room.message", edit, txnID(key, "edit")); err != nil {
		return core.MessageRef{}, err
	}
	return ref, nil
}

// seedReactions puts ✅ and ❌ under a new card, so approvers decide with
// one click on the existing reaction. Best effort: a failure only means
// the approver picks the emoji themselves.
func (a *Adapter) seedReactions(ctx context.Context, room id.RoomID, ref core.MessageRef, key string) {
	_, ev, err := parseMessageRef(ref.ID)
	if err != nil {
		return
	}
	for _, emoji := range []string{reactApprove, reactReject} {
		c := map[string]any{"m.relates_to": map[string]any{"rel_type": "m.annotation", "event_id": ev, "key": emoji}}
		if _, err := a.sendEvent(ctx, room, "m.reaction", c, txnID(key, "react"+emoji)); err != nil {
			a.log.Debug("seed reaction", "room", room, "err", err)
			return
		}
	}
}

// addRelation places a message in thread k: an m.thread relation with
// the reply fallback for clients without threads, or (threads off) a plain
// reply to the thread's root.
func addRelation(c map[string]any, k threadKey, threads bool) {
	if k.Root == "" {
		return
	}
	if threads {
		c["m.relates_to"] = map[string]any{"rel_type": "m.thread", "event_id": k.Root, "is_falling_back": true,
			"m.in_reply_to": map[string]any{"event_id": k.Root}}
		return
	}
	c["m.relates_to"] = map[string]any{"m.in_reply_to": map[string]any{"event_id": k.Root}}
}

// noticeContent is a short plain notice in thread k.
func noticeContent(k threadKey, text string, threads bool) map[string]any {
	c := map[string]any{"msgtype": "m.notice", "body": inertPlain(text), "m.mentions": map[string]any{}}
	addRelation(c, k, threads)
	return c
}

func (a *Adapter) sendRef(ctx context.Context, room id.RoomID, content map[string]any, txn string) (core.MessageRef, error) {
	ev, err := a.sendEvent(ctx, room, "m.room.message", content, txn)
	if err != nil {
		return core.MessageRef{}, err
	}
	return core.MessageRef{Channel: ChannelName, ID: messageRef(room, ev)}, nil
}

// sendEvent is PUT /rooms/{room}/send/{type}/{txn}: the same txn is the
// same event, however often it is retried.
func (a *Adapter) sendEvent(ctx context.Context, room id.RoomID, typ string, content any, txn string) (id.EventID, error) {
	resp, err := a.cli.SendMessageEvent(ctx, room, event.Type{Type: typ, Class: event.MessageEventType}, content,
		mautrix.ReqSendEvent{TransactionID: txn})
	if err != nil {
		return "", apiError("send", err)
	}
	if resp.EventID == "" {
		return "", fmt.Errorf("matrix: send: answer without event_id")
	}
	return resp.EventID, nil
}

// apiError maps a Client-Server API failure onto what the delivery
// pipeline expects: M_LIMIT_EXCEEDED (or 429) → *core.RateLimitError with
// the server's retry_after_ms (or Retry-After); another 4xx (forbidden, not
// in the room, too large) → *core.PermanentError; 5xx and transport errors
// stay plain, to be retried with backoff. The access token travels in a
// header and never appears in the error.
func apiError(op string, err error) error {
	var he mautrix.HTTPError
	if !errors.As(err, &he) || he.Response == nil {
		return fmt.Errorf("matrix: %s: %w", op, err)
	}
	status := he.Response.StatusCode
	code := ""
	if he.RespError != nil {
		code = he.RespError.ErrCode
	}
	wrapped := fmt.Errorf("matrix: %s: %w", op, err)
	if status == http.StatusTooManyRequests || code == "M_LIMIT_EXCEEDED" {
		wait := time.Duration(0)
		if he.RespError != nil {
			if ms, ok := he.RespError.ExtraData["retry_after_ms"].(float64); ok && ms > 0 {
				wait = time.Duration(ms) * time.Millisecond
			}
		}
		if s, err := strconv.Atoi(he.Response.Header.Get("Retry-After")); err == nil && time.Duration(s)*time.Second > wait {
			wait = time.Duration(s) * time.Second
		}
		if wait <= 0 {
			wait = time.Second
		}
		return &core.RateLimitError{RetryAfter: wait, Err: wrapped}
	}
	if status >= 400 && status < 500 {
		return &core.PermanentError{Err: wrapped}
	}
	return wrapped
}
