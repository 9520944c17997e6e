package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	discordapi "github.com/bwmarrin/discordgo"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/chunk"
)

// Run registers the slash commands (when they differ from Discord's) and,
// with Config.Gateway, reads messages over the Gateway until ctx ends.
// discordgo reconnects and resumes the Gateway session by itself; Run only
// retries the first connection, with capped backoff. It returns nil when
// ctx ends.
func (a *Adapter) Run(ctx context.Context) error {
	defer a.wg.Wait()
	if !a.cfg.SkipRegister {
		a.registerWithRetry(ctx)
	}
	if !a.cfg.Gateway {
		<-ctx.Done()
		return nil
	}
	remove := []func(){
		a.api.AddHandler(func(_ *discordapi.Session, r *discordapi.Ready) {
			if r.User != nil {
				a.setBotID(r.User.ID)
			}
		}),
		a.api.AddHandler(func(_ *discordapi.Session, m *discordapi.MessageCreate) {
			if m.Message == nil {
				return
			}
			a.wg.Add(1)
			defer a.wg.Done()
			hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handleTimeout)
			defer cancel()
			if err := a.handleMessage(hctx, m.Message); err != nil {
				a.log.Error("gateway message not recorded", "message_id", m.ID, "err", err)
			}
		}),
	}
	defer func() {
		for _, f := range remove {
			f()
		}
	}()
	for attempt := 0; ; attempt++ {
		err := a.api.Open()
		if err == nil {
			break
		}
		wait := min(time.Second<<min(attempt, 6), time.Minute)
		a.log.Warn("gateway connect failed; retrying", "err", err, "in", wait)
		if sleep(ctx, wait) != nil {
			return nil
		}
	}
	<-ctx.Done()
	if err := a.api.Close(); err != nil {
		a.log.Warn("gateway close", "err", err)
	}
	return nil
}

// registerWithRetry retries command registration on transient failures;
// a 4xx (bad token, bad command) is logged once and not repeated, to keep
// invalid requests away from Discord's ban threshold.
func (a *Adapter) registerWithRetry(ctx context.Context) {
	for attempt := 0; ; attempt++ {
		_, err := a.RegisterCommands(ctx)
		if err == nil || ctx.Err() != nil {
			return
		}
		var re *discordapi.RESTError
		if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode >= 400 && re.Response.StatusCode < 500 {
			a.log.Error("slash commands not registered", "err", err)
			return
		}
		var rl *discordapi.RateLimitError
		wait := min(time.Second<<min(attempt, 6), time.Minute)
		if errors.As(err, &rl) && rl.TooManyRequests != nil {
			wait = max(wait, rl.RetryAfter)
		}
		a.log.Warn("slash command registration failed; retrying", "err", err, "in", wait)
		if sleep(ctx, wait) != nil {
			return
		}
	}
}

func (a *Adapter) setBotID(id string) {
	a.mu.Lock()
	a.botID = id
	a.mu.Unlock()
}

func (a *Adapter) getBotID() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.botID
}

var mentionRE = regexp.MustCompile(`<@!?([0-9]{1,20})>`)

// messageText decides whether a message addresses the bot — a DM, or a
// mention of the bot — and returns its text with the bot's mentions
// removed. Other users' mentions stay as written.
func messageText(m *discordapi.Message, botID string) (string, bool) {
	text, addressed := addressedText(m, botID)
	return text, addressed && text != ""
}

// addressedText is messageText without requiring text: a message of only
// files addresses the bot too (a DM, or a mention).
func addressedText(m *discordapi.Message, botID string) (string, bool) {
	if m == nil || m.Author == nil || m.Author.Bot || m.WebhookID != "" || botID == "" || m.Author.ID == botID {
		return "", false
	}
	mentioned := m.GuildID == "" || repliesTo(m, botID)
	for _, u := range m.Mentions {
		if u != nil && u.ID == botID {
			mentioned = true
		}
	}
	text := mentionRE.ReplaceAllStringFunc(m.Content, func(s string) string {
		if mentionRE.FindStringSubmatch(s)[1] == botID {
			mentioned = true
			return " "
		}
		return s
	})
	text = strings.Join(strings.Fields(text), " ")
	if !mentioned {
		return "", false
	}
	return text, true
}

// repliesTo reports whether m is a reply to a message of botID's.
func repliesTo(m *discordapi.Message, botID string) bool {
	r := m.ReferencedMessage
	return m.MessageReference != nil && r != nil && r.Author != nil && r.Author.ID == botID && isSnowflake(r.ID)
}

// handleMessage turns a Gateway message that addresses the bot into a run
// in a thread started from that message (or in the thread or DM it was
// written in), deduplicated on the message id.
func (a *Adapter) handleMessage(ctx context.Context, m *discordapi.Message) error {
	text, ok := addressedText(m, a.getBotID())
	files := attachmentsOf(m)
	if !ok || (text == "" && len(files) == 0) || !isSnowflake(m.ID) || !isSnowflake(m.ChannelID) {
		return nil
	}
	if !a.seen.add(m.ID, a.now()) {
		return nil
	}
	k := threadKey{Guild: dmGuild, Channel: m.ChannelID, Thread: m.ChannelID}
	if m.GuildID != "" {
		k.Guild = m.GuildID
		ch, err := a.api.Channel(m.ChannelID, discordapi.WithContext(ctx))
		switch {
		case err != nil:
			a.log.Warn("look up channel; the run lives in the channel", "channel_id", m.ChannelID, "err", err)
		case ch.IsThread():
			if isSnowflake(ch.ParentID) {
				k.Channel = ch.ParentID
			}
		case repliesTo(m, a.getBotID()):
			// It continues the conversation of the message it answers:
			// no thread of its own.
		default:
			th, err := a.api.MessageThreadStartComplex(m.ChannelID, m.ID, &discordapi.ThreadStart{
				Name: chunk.Cut(threadName(text, files), maxThreadName, chunk.Runes), AutoArchiveDuration: 1440,
			}, discordapi.WithContext(ctx))
			if err != nil || th == nil || !isSnowflake(th.ID) {
				a.log.Warn("start thread failed; the run lives in the channel", "channel_id", m.ChannelID, "err", err)
			} else {
				k.Thread = th.ID
			}
		}
	}
	raw, _ := json.Marshal(m)
	name := m.Author.GlobalName
	if name == "" {
		name = m.Author.Username
	}
	ev := core.ChannelEvent{
		Channel: ChannelName, EventID: m.ID, Actor: core.Actor{ID: ChannelName + ":" + m.Author.ID, Name: name},
		Thread: k.thread(), Text: text, Raw: raw, ReceivedAt: a.now().UTC(),
	}
	if repliesTo(m, a.getBotID()) {
		// A reply to the bot continues the conversation of the message it
		// answers (the engine finds its thread).
		ev.ReplyTo = &core.MessageRef{Channel: ChannelName, ID: messageRef(m.ChannelID, m.ReferencedMessage.ID)}
	}
	ev.Attachments = files
	if _, err := a.sink.HandleEvent(ctx, ev); err != nil {
		if errors.Is(err, core.ErrInvalidInput) { // retrying cannot help: drop it
			a.log.Warn("discord: message refused", "message_id", m.ID, "err", err)
			return nil
		}
		a.seen.forget(m.ID)
		return fmt.Errorf("discord: record message %s: %w", m.ID, err)
	}
	return nil
}
