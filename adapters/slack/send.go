package slack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/delivery"
)

// Pacing is one message a second per channel with bursts of 3 (Slack's
// chat.postMessage guidance), unless configured otherwise.
func (a *Adapter) Pacing() delivery.Pacing {
	return delivery.Pacing{Conversation: a.cfg.Conversation, Account: a.cfg.Account}
}

// Buckets draws every message to a thread from its channel's bucket: Slack
// limits per channel, not per thread.
func (a *Adapter) Buckets(thread core.Thread) delivery.Buckets {
	k, err := parseThreadKey(thread.Key)
	if err != nil {
		return delivery.Buckets{Conversation: thread.Key}
	}
	return delivery.Buckets{Conversation: k.Team + "/" + k.Channel}
}

// Send delivers one reply chunk, card or card update into the thread, and
// returns the message's reference (channel id and ts) so a card can be
// updated in place later.
func (a *Adapter) Send(ctx context.Context, m core.Outbound) (core.MessageRef, error) {
	if m.Thread.Channel != channelName {
		return core.MessageRef{}, &core.PermanentError{Err: fmt.Errorf("slack: thread %s is not a Slack thread", m.Thread)}
	}
	k, err := parseThreadKey(m.Thread.Key)
	if err != nil {
		return core.MessageRef{}, &core.PermanentError{Err: err}
	}
	opts := []slackapi.MsgOption{slackapi.MsgOptionDisableLinkUnfurl()}
	switch m.Kind {
	case core.KindReply:
		opts = append(opts, slackapi.MsgOptionText(m.Text, false))
		if blocks := a.questionBlocks(m); blocks != nil {
			opts = append(opts, slackapi.MsgOptionBlocks(blocks...))
		}
		if m.Edit != nil && m.Edit.ID != "" {
			// An agent's streamed answer, edited in place.
			ref, err := a.update(ctx, k, *m.Edit, opts)
			if err == nil {
				a.rememberThread(k.String())
			}
			return ref, err
		}
	case core.KindQuestionUpdate:
		// An answered question: its message shows the answer and loses its
		// buttons (blocks cleared), or the answer follows in the thread.
		opts = append(opts, slackapi.MsgOptionText(m.Text, false), slackapi.MsgOptionBlocks())
		if m.Edit != nil && m.Edit.ID != "" {
			return a.update(ctx, k, *m.Edit, opts)
		}
	case core.KindCard, core.KindCardUpdate:
		if m.Card == nil {
			return core.MessageRef{}, &core.PermanentError{Err: fmt.Errorf("slack: %s without a card", m.Kind)}
		}
		blocks, text := a.renderCard(*m.Card)
		opts = append(opts, slackapi.MsgOptionText(escapeMrkdwn(text), false), slackapi.MsgOptionBlocks(blocks...))
		if m.Kind == core.KindCardUpdate && m.Edit != nil && m.Edit.ID != "" {
			ref, err := a.update(ctx, k, *m.Edit, opts)
			if err == nil {
				a.rememberThread(k.String())
			}
			return ref, err
		}
	default:
		return core.MessageRef{}, &core.PermanentError{Err: fmt.Errorf("slack: unknown message kind %q", m.Kind)}
	}
	if k.TS != "" {
		opts = append(opts, slackapi.MsgOptionTS(k.TS))
	}
	ch, ts, err := a.api.PostMessageContext(ctx, k.Channel, opts...)
	if err != nil {
		return core.MessageRef{}, sendError("chat.postMessage", err)
	}
	a.rememberThread(k.String())
	return core.MessageRef{Channel: ch, ID: ts}, nil
}

// update edits a card in place (buttons removed, outcome shown). A card
// that can no longer be edited is re-posted in its thread instead, so the
// outcome is always visible.
func (a *Adapter) update(ctx context.Context, k threadKey, ref core.MessageRef, opts []slackapi.MsgOption) (core.MessageRef, error) {
	channel := ref.Channel
	if channel == "" {
		channel = k.Channel
	}
	ch, ts, _, err := a.api.UpdateMessageContext(ctx, channel, ref.ID, opts...)
	if err == nil {
		return core.MessageRef{Channel: ch, ID: ts}, nil
	}
	switch slackErrorCode(err) {
	case "message_not_found", "cant_update_message", "edit_window_closed":
		a.log.WarnContext(ctx, "slack: card cannot be updated; posting the outcome instead", "ts", ref.ID, "err", err)
		if k.TS != "" {
			opts = append(opts, slackapi.MsgOptionTS(k.TS))
		}
		ch, ts, perr := a.api.PostMessageContext(ctx, k.Channel, opts...)
		if perr != nil {
			return core.MessageRef{}, sendError("chat.postMessage", perr)
		}
		return core.MessageRef{Channel: ch, ID: ts}, nil
	}
	return core.MessageRef{}, sendError("chat.update", err)
}

// permanentCodes are Slack error codes that retrying cannot fix.
var permanentCodes = map[string]bool{
	"channel_not_found": true, "not_in_channel": true, "is_archived": true, "msg_too_long": true,
	"no_text": true, "invalid_blocks": true, "invalid_blocks_format": true, "msg_blocks_too_long": true,
	"too_many_attachments": true, "invalid_auth": true, "not_authed": true, "account_inactive": true,
	"token_revoked": true, "token_expired": true, "missing_scope": true, "restricted_action": true,
	"invalid_arguments": true, "invalid_arg_name": true, "cant_update_message": true,
	"message_not_found": true, "edit_window_closed": true, "channel_is_archived": true,
	"restricted_action_read_only_channel": true, "restricted_action_thread_only_channel": true,
	"restricted_action_non_threadable_channel": true, "team_access_not_granted": true,
	"ekm_access_denied": true, "invalid_thread_ts": true, "thread_not_found": true,
}

// sendError maps a Web API failure to what the delivery pipeline acts on:
// a 429 becomes *core.RateLimitError with Slack's Retry-After, a failure
// that can never succeed *core.PermanentError, anything else is retried.
func sendError(method string, err error) error {
	wrapped := fmt.Errorf("slack: %s: %w", method, err)
	var rl *slackapi.RateLimitedError
	if errors.As(err, &rl) {
		return &core.RateLimitError{RetryAfter: rl.RetryAfter, Err: wrapped}
	}
	if code := slackErrorCode(err); code != "" {
		if code == "ratelimited" || code == "rate_limited" {
			// A body-level limit carries no Retry-After: wait a second.
			return &core.RateLimitError{RetryAfter: time.Second, Err: wrapped}
		}
		if permanentCodes[code] {
			return &core.PermanentError{Err: wrapped}
		}
		return wrapped
	}
	var sc slackapi.StatusCodeError
	if errors.As(err, &sc) && sc.Code >= 400 && sc.Code < 500 && sc.Code != http.StatusRequestTimeout {
		return &core.PermanentError{Err: wrapped}
	}
	return wrapped
}

var _ core.QuestionRenderer = (*Adapter)(nil)

// RendersQuestions implements core.QuestionRenderer: a single choice or
// confirm question gets buttons, an optional one a Skip button; words are
// a reply in the thread.
func (a *Adapter) RendersQuestions() bool { return true }

// questionBlocks renders a reply that asks an agent's single choice or
// confirm question: the text, then one button per answer (at most 25, the
// actions block's limit; more choices are answered by a reply). nil when
// the reply has no buttons to show.
func (a *Adapter) questionBlocks(m core.Outbound) []slackapi.Block {
	answers := m.Question.Buttons()
	if len(answers) > 24 || (len(answers) == 0 && !m.Question.Skippable()) {
		return nil
	}
	var btns []slackapi.BlockElement
	button := func(choice, label string) {
		ref := m.Question.RunID + "|" + m.Question.ActionID + "|" + choice
		btns = append(btns, slackapi.NewButtonBlockElement(actionAnswer, a.sign.buttonValue(actionAnswer, ref),
			slackapi.NewTextBlockObject(slackapi.PlainTextType, clip(label, 75), false, false)))
	}
	for i, label := range answers {
		button(strconv.Itoa(i), label)
	}
	if m.Question.Skippable() {
		button(skipChoice, "Skip")
	}
	text := slackapi.NewTextBlockObject(slackapi.MarkdownType, clip(m.Text, sectionTextMax), false, false)
	return []slackapi.Block{
		slackapi.NewSectionBlock(text, nil, nil),
		slackapi.NewActionBlock("opsgate:question", btns...),
	}
}

var _ core.ReplyEditor = (*Adapter)(nil)

// EditsReplies implements core.ReplyEditor: chat.update edits a reply.
func (a *Adapter) EditsReplies() bool { return true }
