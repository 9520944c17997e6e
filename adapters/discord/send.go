package discord

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	discordapi "github.com/bwmarrin/discordgo"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/chunk"
	"github.com/opsgate/opsgate/core/delivery"
)

// Format implements delivery.Platform: Discord Markdown, cut at 2,000
// characters. Counting UTF-16 units is never less than Discord's count, so
// no chunk is refused for length.
func (a *Adapter) Format() delivery.Format {
	return delivery.Format{
		Limit: MaxContent, Unit: chunk.UTF16, Syntax: chunk.Markdown, Markers: true,
		Render: renderMarkdown,
	}
}

// Pacing implements delivery.Platform with Discord's published limits:
// 5 messages per 5 seconds per channel (one every 1.25 s, no burst, so no
// 5-second window holds more than 5) and 50 requests a second per bot.
// Per-route buckets learned from response headers come on top, in the
// adapter's transport.
func (a *Adapter) Pacing() delivery.Pacing {
	return delivery.Pacing{
		Conversation: delivery.Rate{Every: 1250 * time.Millisecond, Burst: 1},
		Account:      delivery.Rate{Every: time.Second / 50, Burst: 1},
	}
}

// Buckets implements delivery.Platform: Discord limits per channel, and a
// thread is a channel of its own.
func (a *Adapter) Buckets(t core.Thread) delivery.Buckets {
	k, err := parseThreadKey(t.Key)
	if err != nil {
		return delivery.Buckets{Conversation: t.Key}
	}
	return delivery.Buckets{Conversation: k.Thread}
}

// Send implements core.Adapter: replies and cards go to the thread's
// channel through the bot token (valid long after the interaction token's
// 15 minutes); a card update edits the card in place and removes its
// buttons once decided, or posts it anew if the original is gone.
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
		msg := &discordapi.MessageSend{Content: m.Text, AllowedMentions: noMentions}
		if m.Question != nil {
			comps, err := questionComponents(a.buttons, m.Question)
			if err != nil {
				// The question still goes out, answered by a reply.
				a.log.Error("question without buttons", "run", m.Question.RunID, "err", err)
			}
			msg.Components = comps
		}
		return a.post(ctx, k.Thread, msg)
	case core.KindQuestionUpdate:
		// An answered question: its message shows the answer and loses its
		// buttons, or, when it is gone, the answer follows.
		if m.Edit != nil && m.Edit.Channel == ChannelName {
			ref, err := a.editMessage(ctx, *m.Edit, m.Text, nil, []discordapi.MessageComponent{})
			if !isUnknownMessage(err) {
				return ref, err
			}
		}
		return a.post(ctx, k.Thread, &discordapi.MessageSend{Content: m.Text, AllowedMentions: noMentions})
	case core.KindCard, core.KindCardUpdate:
		if m.Card == nil {
			return core.MessageRef{}, &core.PermanentError{Err: fmt.Errorf("discord: %s without a card", m.Kind)}
		}
		comps, err := cardComponents(a.buttons, *m.Card)
		if err != nil {
			// An id that cannot travel in custom_id: the card still goes
			// out, decidable from the console it links to.
			a.log.Error("card without buttons", "approval", m.Card.ApprovalID, "err", err)
			comps = []discordapi.MessageComponent{}
		}
		embed := cardEmbed(*m.Card)
		content := cardContent(*m.Card)
		if m.Kind == core.KindCardUpdate && m.Edit != nil && m.Edit.Channel == ChannelName {
			ref, err := a.editCard(ctx, *m.Edit, content, embed, comps)
			if !isUnknownMessage(err) {
				return ref, err
			}
			a.log.Info("card no longer editable; posting it again", "approval", m.Card.ApprovalID, "ref", m.Edit.ID)
		}
		return a.post(ctx, k.Thread, &discordapi.MessageSend{
			Content: content, Embeds: []*discordapi.MessageEmbed{embed}, Components: comps, AllowedMentions: noMentions,
		})
	}
	return core.MessageRef{}, &core.PermanentError{Err: fmt.Errorf("discord: unknown message kind %q", m.Kind)}
}

func (a *Adapter) post(ctx context.Context, channel string, msg *discordapi.MessageSend) (core.MessageRef, error) {
	ctx, ci := withCallInfo(ctx)
	sent, err := a.api.ChannelMessageSendComplex(channel, msg, discordapi.WithContext(ctx))
	if err != nil {
		return core.MessageRef{}, deliveryError("send message", err, ci)
	}
	if sent == nil || sent.ID == "" {
		return core.MessageRef{}, fmt.Errorf("discord: send message: answer without an id")
	}
	return core.MessageRef{Channel: ChannelName, ID: messageRef(channel, sent.ID)}, nil
}

func (a *Adapter) editCard(ctx context.Context, ref core.MessageRef, content string, embed *discordapi.MessageEmbed, comps []discordapi.MessageComponent) (core.MessageRef, error) {
	return a.editMessage(ctx, ref, content, []*discordapi.MessageEmbed{embed}, comps)
}

// editMessage rewrites a sent message's content, embeds (nil: none) and
// components.
func (a *Adapter) editMessage(ctx context.Context, ref core.MessageRef, content string, embeds []*discordapi.MessageEmbed, comps []discordapi.MessageComponent) (core.MessageRef, error) {
	ch, id, err := parseMessageRef(ref.ID)
	if err != nil {
		return core.MessageRef{}, &core.PermanentError{Err: err}
	}
	ctx, ci := withCallInfo(ctx)
	if embeds == nil {
		embeds = []*discordapi.MessageEmbed{}
	}
	_, err = a.api.ChannelMessageEditComplex(&discordapi.MessageEdit{
		ID: id, Channel: ch, Content: &content, Embeds: &embeds, Components: &comps, AllowedMentions: noMentions,
	}, discordapi.WithContext(ctx))
	if err != nil {
		return core.MessageRef{}, deliveryError("edit message", err, ci)
	}
	return ref, nil
}

var _ core.QuestionRenderer = (*Adapter)(nil)

// RendersQuestions implements core.QuestionRenderer: a question's choices,
// Yes/No and Skip are buttons, words a form.
func (a *Adapter) RendersQuestions() bool { return true }

// Discord's JSON error codes the adapter tells apart.
const (
	codeUnknownChannel = 10003
	codeUnknownMessage = 10008
)

func isUnknownMessage(err error) bool {
	var re *discordapi.RESTError
	if !errors.As(err, &re) {
		return false
	}
	return re.Message != nil && (re.Message.Code == codeUnknownMessage) ||
		re.Response != nil && re.Response.StatusCode == http.StatusNotFound && (re.Message == nil || re.Message.Code != codeUnknownChannel)
}

// deliveryError maps REST failures onto what the delivery pipeline
// expects: 429 → *core.RateLimitError with Discord's retry_after (scope
// "global" for the global limit); other 4xx → *core.PermanentError, never
// retried, so invalid requests stay far below Discord's ban threshold; 5xx
// and transport errors stay plain, to be retried with backoff.
func deliveryError(what string, err error, ci *callInfo) error {
	err = fmt.Errorf("discord: %s: %w", what, err)
	var rl *discordapi.RateLimitError
	if errors.As(err, &rl) {
		wait := time.Second
		if rl.TooManyRequests != nil && rl.RetryAfter > 0 {
			wait = rl.RetryAfter
		}
		scope := ""
		if ci != nil {
			ci.mu.Lock()
			if ci.global {
				scope = "global"
			}
			ci.mu.Unlock()
		}
		return &core.RateLimitError{RetryAfter: wait, Scope: scope, Err: err}
	}
	var re *discordapi.RESTError
	if errors.As(err, &re) && re.Response != nil {
		if c := re.Response.StatusCode; c >= 400 && c < 500 {
			return &core.PermanentError{Err: err}
		}
	}
	return err
}
