package telegram

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/chunk"
	"github.com/opsgate/opsgate/core/delivery"
)

// Format implements delivery.Platform: Telegram HTML, cut at 4,096 UTF-16
// code units. The splitter counts tags too, which Telegram does not, so a
// chunk is never longer than Telegram allows.
func (a *Adapter) Format() delivery.Format {
	return delivery.Format{
		Limit: MaxText, Unit: chunk.UTF16, Syntax: chunk.HTML, Markers: true,
		Render: renderHTML,
	}
}

// Pacing implements delivery.Platform with Telegram's published limits:
// about one message a second per chat, 20 a minute per group, 30 a second
// per bot. Bursts are 1, so no window ever holds more than the limit.
func (a *Adapter) Pacing() delivery.Pacing {
	return delivery.Pacing{
		Conversation: delivery.Rate{Every: time.Second, Burst: 1},
		Group:        delivery.Rate{Every: 3 * time.Second, Burst: 1},
		Account:      delivery.Rate{Every: time.Second / 30, Burst: 1},
	}
}

// Buckets implements delivery.Platform: one bucket per chat; group chats
// (negative ids: groups, supergroups, channels) also draw from the group
// bucket.
func (a *Adapter) Buckets(t core.Thread) delivery.Buckets {
	k, err := parseThreadKey(t.Key)
	if err != nil {
		return delivery.Buckets{Conversation: t.Key}
	}
	chat := strconv.FormatInt(k.Chat, 10)
	b := delivery.Buckets{Conversation: chat}
	if k.Chat < 0 {
		b.Group = chat
	}
	return b
}

// Send implements core.Adapter: a reply chunk or a card goes to the
// thread's chat and forum topic as an answer to the message that asked; a
// card update edits the card in place and removes its keyboard once
// decided, or posts the card anew when the original cannot be edited.
func (a *Adapter) Send(ctx context.Context, m core.Outbound) (core.MessageRef, error) {
	k, err := parseThreadKey(m.Thread.Key)
	if err != nil {
		return core.MessageRef{}, &core.PermanentError{Err: err}
	}
	switch m.Kind {
	case core.KindReply:
		if m.Edit != nil && m.Edit.Channel == ChannelName && m.Question == nil {
			// A streamed reply (or the run's status) edited in place.
			return a.editReply(ctx, k, *m.Edit, m.Text)
		}
		var markup any
		if m.Question != nil {
			kb, err := questionKeyboard(a.buttons, m.Question)
			if err != nil {
				// The question still goes out, answered by a reply.
				a.log.Error("question without buttons", "run", m.Question.RunID, "err", err)
			} else if len(kb.InlineKeyboard) > 0 {
				markup = kb
			}
		}
		return a.deliver(a.sendMessage(ctx, k, m.Text, markup))
	case core.KindQuestionUpdate:
		// An answered question: its message shows the answer and loses
		// its buttons, or, when it cannot be edited, the answer follows.
		if m.Edit != nil && m.Edit.Channel == ChannelName {
			ref, err := a.editText(ctx, *m.Edit, m.Text)
			var ae *APIError
			if !errors.As(err, &ae) || !ae.editGone() {
				return a.deliver(ref, err)
			}
		}
		return a.deliver(a.sendMessage(ctx, k, m.Text, nil))
	case core.KindCard:
		if m.Card == nil {
			return core.MessageRef{}, &core.PermanentError{Err: errors.New("telegram: card message without a card")}
		}
		return a.sendCard(ctx, k, *m.Card)
	case core.KindCardUpdate:
		if m.Card == nil {
			return core.MessageRef{}, &core.PermanentError{Err: errors.New("telegram: card update without a card")}
		}
		if m.Edit != nil && m.Edit.Channel == ChannelName {
			ref, err := a.editCard(ctx, *m.Edit, *m.Card)
			var ae *APIError
			if !errors.As(err, &ae) || !ae.editGone() {
				return a.deliver(ref, err)
			}
			a.log.Info("card no longer editable; posting it again", "approval", m.Card.ApprovalID, "ref", m.Edit.ID)
		}
		return a.sendCard(ctx, k, *m.Card)
	}
	return core.MessageRef{}, &core.PermanentError{Err: fmt.Errorf("telegram: unknown message kind %q", m.Kind)}
}

var _ core.QuestionRenderer = (*Adapter)(nil)

// RendersQuestions implements core.QuestionRenderer: a question's choices,
// Yes/No and Skip are buttons; words are a reply.
func (a *Adapter) RendersQuestions() bool { return true }

// editText rewrites a sent message's text and removes its keyboard.
func (a *Adapter) editText(ctx context.Context, ref core.MessageRef, text string) (core.MessageRef, error) {
	chat, msg, err := parseMessageRef(ref.ID)
	if err != nil {
		return core.MessageRef{}, &core.PermanentError{Err: err}
	}
	err = a.api.call(ctx, "editMessageText", map[string]any{
		"chat_id": chat, "message_id": msg, "text": text, "parse_mode": "HTML",
		"disable_web_page_preview": true, "reply_markup": noKeyboard,
	}, nil)
	var ae *APIError
	if err != nil && !(errors.As(err, &ae) && ae.notModified()) {
		return core.MessageRef{}, err
	}
	return ref, nil
}

func (a *Adapter) sendCard(ctx context.Context, k threadKey, c core.Card) (core.MessageRef, error) {
	var markup any
	if c.Pending() || c.BatchPending() {
		kb, err := cardKeyboard(a.buttons, c)
		if err != nil {
			// An id that cannot travel in callback_data: the card still
			// goes out, decidable from the console it links to.
			a.log.Error("card without buttons", "approval", c.ApprovalID, "err", err)
		} else {
			markup = kb
		}
	}
	ref, err := a.deliver(a.sendMessage(ctx, k, cardHTML(c), markup))
	if err == nil && !c.Pending() {
		// Sent decided (it was queued before the decision and delivered
		// after): say so in the ref, which the card's updates edit.
		ref.ID += decidedSuffix
	}
	return ref, err
}

// decidedSuffix marks the ref of a card sent in its decided state. A
// decided card never changes again, so an update of it would be refused
// as "message is not modified" (twice: the text, then the keyboard): it is
// skipped instead.
const decidedSuffix = "#decided"

// editCard rewrites a sent card; a decided card loses its keyboard.
func (a *Adapter) editCard(ctx context.Context, ref core.MessageRef, c core.Card) (core.MessageRef, error) {
	id, decided := strings.CutSuffix(ref.ID, decidedSuffix)
	if decided && !c.Pending() {
		return ref, nil
	}
	chat, msg, err := parseMessageRef(id)
	if err != nil {
		return core.MessageRef{}, &core.PermanentError{Err: err}
	}
	markup := any(noKeyboard)
	if c.Pending() || c.BatchPending() {
		kb, err := cardKeyboard(a.buttons, c)
		if err == nil {
			markup = kb
		}
	}
	err = a.api.call(ctx, "editMessageText", map[string]any{
		"chat_id": chat, "message_id": msg, "text": cardHTML(c), "parse_mode": "HTML",
		"disable_web_page_preview": true, "reply_markup": markup,
	}, nil)
	var ae *APIError
	if errors.As(err, &ae) && ae.notModified() {
		// Same text already (a redelivered update): make sure the keyboard
		// is gone all the same.
		err = nil
		if !c.Pending() {
			err = a.api.call(ctx, "editMessageReplyMarkup", map[string]any{
				"chat_id": chat, "message_id": msg, "reply_markup": noKeyboard,
			}, nil)
			if errors.As(err, &ae) && ae.notModified() {
				err = nil
			}
		}
	}
	if err != nil {
		return core.MessageRef{}, err
	}
	return ref, nil
}

// sendMessage posts HTML text to k's chat, in k's forum topic, replying to
// k's message when there is one (and still sending if it was deleted).
func (a *Adapter) sendMessage(ctx context.Context, k threadKey, text string, markup any) (core.MessageRef, error) {
	p := map[string]any{
		"chat_id": k.Chat, "text": text, "parse_mode": "HTML", "disable_web_page_preview": true,
	}
	if k.Topic > 0 {
		p["message_thread_id"] = k.Topic
	}
	if k.Msg > 0 {
		p["reply_parameters"] = map[string]any{"message_id": k.Msg, "allow_sending_without_reply": true}
	}
	if markup != nil {
		p["reply_markup"] = markup
	}
	var sent tgMessage
	if err := a.api.call(ctx, "sendMessage", p, &sent); err != nil {
		return core.MessageRef{}, err
	}
	if sent.MessageID <= 0 {
		return core.MessageRef{}, fmt.Errorf("telegram: sendMessage: result without message_id")
	}
	return core.MessageRef{Channel: ChannelName, ID: messageRef(k.Chat, sent.MessageID)}, nil
}

// deliver maps Bot API failures onto what the delivery pipeline expects:
// 429 → *core.RateLimitError with Telegram's retry_after; other 4xx (bad
// request, bot blocked or removed, chat migrated) → *core.PermanentError;
// 5xx and transport errors stay plain, to be retried with backoff.
func (a *Adapter) deliver(ref core.MessageRef, err error) (core.MessageRef, error) {
	if err == nil {
		return ref, nil
	}
	var ae *APIError
	if errors.As(err, &ae) {
		switch {
		case ae.Code == http.StatusTooManyRequests:
			wait := ae.RetryAfter
			if wait <= 0 {
				wait = time.Second
			}
			return core.MessageRef{}, &core.RateLimitError{RetryAfter: wait, Err: err}
		case ae.Code >= 400 && ae.Code < 500:
			return core.MessageRef{}, &core.PermanentError{Err: err}
		}
	}
	return core.MessageRef{}, err
}
