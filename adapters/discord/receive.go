package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	discordapi "github.com/bwmarrin/discordgo"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/chunk"
)

// handleTimeout bounds the work done for one interaction; it is detached
// from the request so Discord closing the connection cannot cut a commit
// in half.
const handleTimeout = 10 * time.Second

// ErrMalformed is an interaction body that is not a usable interaction.
var ErrMalformed = errors.New("discord: malformed interaction")

// interaction is one parsed interaction: discordgo's shape plus the partial
// channel object (type, parent) that discordgo does not keep.
type interaction struct {
	*discordapi.Interaction
	ChannelType discordapi.ChannelType
	ParentID    string
}

// parseInteraction reads an interaction body. Everything the adapter later
// relies on is checked here, so handlers can trust it.
func parseInteraction(body []byte) (*interaction, error) {
	var in discordapi.Interaction
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	var extra struct {
		Channel *struct {
			Type     discordapi.ChannelType `json:"type"`
			ParentID string                 `json:"parent_id"`
		} `json:"channel"`
	}
	if err := json.Unmarshal(body, &extra); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if !isSnowflake(in.ID) {
		return nil, fmt.Errorf("%w: id %q", ErrMalformed, in.ID)
	}
	out := &interaction{Interaction: &in}
	if extra.Channel != nil {
		out.ChannelType, out.ParentID = extra.Channel.Type, extra.Channel.ParentID
	}
	if in.Type == discordapi.InteractionPing {
		return out, nil
	}
	switch in.Data.(type) {
	case discordapi.ApplicationCommandInteractionData, discordapi.MessageComponentInteractionData, discordapi.ModalSubmitInteractionData:
	default:
		return nil, fmt.Errorf("%w: type %d without usable data", ErrMalformed, in.Type)
	}
	if in.Token == "" || !isSnowflake(in.ChannelID) || (in.GuildID != "" && !isSnowflake(in.GuildID)) {
		return nil, fmt.Errorf("%w: missing token or channel", ErrMalformed)
	}
	if u := out.user(); u == nil || !isSnowflake(u.ID) {
		return nil, fmt.Errorf("%w: no user", ErrMalformed)
	}
	if out.ParentID != "" && !isSnowflake(out.ParentID) {
		return nil, fmt.Errorf("%w: parent_id %q", ErrMalformed, out.ParentID)
	}
	return out, nil
}

// user is who acted: the member's user in a guild, the user in a DM.
func (i *interaction) user() *discordapi.User {
	if i.Member != nil && i.Member.User != nil {
		return i.Member.User
	}
	return i.User
}

func (i *interaction) actor() core.Actor {
	u := i.user()
	name := u.GlobalName
	if name == "" {
		name = u.Username
	}
	return core.Actor{ID: ChannelName + ":" + u.ID, Name: name}
}

// isThread reports whether the interaction came from inside a thread.
func (i *interaction) isThread() bool {
	switch i.ChannelType {
	case discordapi.ChannelTypeGuildNewsThread, discordapi.ChannelTypeGuildPublicThread, discordapi.ChannelTypeGuildPrivateThread:
		return true
	}
	return false
}

// here is the thread key of where the interaction happened.
func (i *interaction) here() threadKey {
	g := i.GuildID
	if g == "" {
		g = dmGuild
	}
	if i.isThread() && i.ParentID != "" {
		return threadKey{Guild: g, Channel: i.ParentID, Thread: i.ChannelID}
	}
	return threadKey{Guild: g, Channel: i.ChannelID, Thread: i.ChannelID}
}

// InteractionsHandler serves POST /discord/interactions. A request is
// verified (Ed25519 signature and a timestamp within MaxSkew; 401 and
// nothing recorded otherwise), parsed (400 when malformed), and answered
// within Discord's 3 seconds: PING with PONG, a slash command after its
// event is recorded with a deferred response and a follow-up, a button with
// an ephemeral answer or a modal, a modal with an ephemeral answer.
func (a *Adapter) InteractionsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.cfg.MaxBodyBytes))
		if err != nil {
			var mb *http.MaxBytesError
			if errors.As(err, &mb) {
				http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "cannot read body", http.StatusBadRequest)
			return
		}
		if err := verify(a.pub, r.Header.Get(headerSignature), r.Header.Get(headerTimestamp), body, a.now(), a.cfg.MaxSkew); err != nil {
			a.log.Warn("refused interaction", "err", err, "remote", r.RemoteAddr)
			http.Error(w, "invalid request signature", http.StatusUnauthorized)
			return
		}
		in, err := parseInteraction(body)
		if err != nil {
			a.log.Warn("malformed interaction", "err", err)
			http.Error(w, "malformed interaction", http.StatusBadRequest)
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), handleTimeout)
		defer cancel()
		resp, after, err := a.handleInteraction(ctx, body, in)
		if err != nil {
			a.log.Error("interaction not recorded", "interaction", in.ID, "err", err)
			if core.IngressStatus(err) == http.StatusServiceUnavailable {
				w.Header().Set("Retry-After", core.StoreRetryAfter)
			}
			if msg := core.IngressMessage(err); msg != "" {
				http.Error(w, msg, core.IngressStatus(err))
				return
			}
			http.Error(w, "temporarily unavailable", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(resp); err != nil {
			a.log.Warn("write interaction response", "interaction", in.ID, "err", err)
		}
		if after != nil {
			// Follow-ups need the response to have reached Discord first.
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
			a.wg.Add(1)
			go func() {
				defer a.wg.Done()
				fctx, fcancel := context.WithTimeout(context.Background(), handleTimeout)
				defer fcancel()
				after(fctx)
			}()
		}
	})
}

// handleInteraction answers one verified interaction. after, when set,
// runs once the response is written (follow-ups through the webhook). An
// error means nothing was recorded and Discord should show a failure.
func (a *Adapter) handleInteraction(ctx context.Context, raw []byte, in *interaction) (resp *discordapi.InteractionResponse, after func(context.Context), err error) {
	switch in.Type {
	case discordapi.InteractionPing:
		return &discordapi.InteractionResponse{Type: discordapi.InteractionResponsePong}, nil, nil
	case discordapi.InteractionApplicationCommand:
		return a.handleCommand(ctx, raw, in)
	case discordapi.InteractionMessageComponent:
		r, err := a.handleComponent(ctx, raw, in)
		return r, nil, err
	case discordapi.InteractionModalSubmit:
		r, err := a.handleModal(ctx, raw, in)
		return r, nil, err
	}
	return ephemeral("This kind of interaction is not supported."), nil, nil
}

// ephemeral is a message only the person who acted sees.
func ephemeral(text string) *discordapi.InteractionResponse {
	return &discordapi.InteractionResponse{
		Type: discordapi.InteractionResponseChannelMessageWithSource,
		Data: &discordapi.InteractionResponseData{
			Content: chunk.Cut(text, maxEphemeralText, chunk.Runes), Flags: discordapi.MessageFlagsEphemeral, AllowedMentions: noMentions,
		},
	}
}

// event is the ChannelEvent skeleton of an interaction, deduplicated on the
// interaction id.
func (a *Adapter) event(raw []byte, in *interaction, k threadKey) core.ChannelEvent {
	return core.ChannelEvent{
		Channel: ChannelName, EventID: in.ID, Actor: in.actor(), Thread: k.thread(),
		Raw: json.RawMessage(raw), ReceivedAt: a.now().UTC(),
	}
}

// commandText turns a slash command into the router's text: `/ops
// command:"deploy api 1.2.3"` → "deploy api 1.2.3"; `/deploy service:api
// version:1.2.3` → "deploy api 1.2.3" (the flow's literals, then the options
// in pattern order, quoted when needed, skipped optional ones filled with
// their defaults). ok is false for a command this adapter does not know.
func (a *Adapter) commandText(d discordapi.ApplicationCommandInteractionData) (string, bool) {
	opts := map[string]string{}
	for _, o := range d.Options {
		if o != nil && o.Value != nil {
			opts[o.Name] = strings.TrimSpace(fmt.Sprint(o.Value))
		}
	}
	if d.Name == a.cfg.Command {
		return strings.TrimSpace(opts["command"]), true
	}
	for _, f := range a.cfg.Flows {
		if f.Name != d.Name {
			continue
		}
		words := append([]string(nil), f.Literals...)
		last := -1
		for i, o := range f.Options {
			if _, ok := opts[o.Name]; ok {
				last = i
			}
		}
		for i, o := range f.Options {
			v, ok := opts[o.Name]
			switch {
			case ok:
			case !o.Optional:
				v = "" // Discord enforces required options; an empty token fails the route visibly
			case i > last:
				continue
			default:
				v = o.Default
			}
			words = append(words, quoteWord(v))
		}
		return strings.Join(words, " "), true
	}
	return "", false
}

// quoteWord quotes a value for the router's tokenizer when it holds
// whitespace, quotes or backslashes (or is empty).
func quoteWord(v string) string {
	if v != "" && !strings.ContainsAny(v, " \t\n\r\"\\") {
		return v
	}
	return `"` + quoteEscapes.Replace(v) + `"`
}

// quoteEscapes is built once (a Replacer is safe for concurrent use).
var quoteEscapes = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", " ", "\r", " ")

// handleCommand starts a run for a slash command in a thread of its own.
// Within Discord's 3 seconds (RootTimeout) it posts the bot's root message
// in the channel and starts a thread from it, then records the event with
// that thread's address — so nothing is acknowledged before it is recorded
// — and answers with a deferred ephemeral response that the follow-up
// fills with a link to the thread. If the root cannot be posted nothing is
// recorded and the caller is told why; if the event was already recorded,
// the new root is deleted again. Inside a thread or a DM the run lives
// where the command was typed.
func (a *Adapter) handleCommand(ctx context.Context, raw []byte, in *interaction) (*discordapi.InteractionResponse, func(context.Context), error) {
	text, ok := a.commandText(in.ApplicationCommandData())
	if !ok {
		return ephemeral("Unknown command."), nil, nil
	}
	if text == "" {
		return ephemeral(fmt.Sprintf("Usage: `/%s command:<what to do>`, e.g. `/%s command:help`.", a.cfg.Command, a.cfg.Command)), nil, nil
	}
	if !a.seen.add(in.ID, a.now()) {
		return ephemeral("ℹ️ Already received."), nil, nil
	}
	k := in.here()
	var root string
	if in.GuildID != "" && !in.isThread() {
		rctx, cancel := context.WithTimeout(ctx, a.cfg.RootTimeout)
		thread, msg, err := a.startThread(rctx, in.ChannelID, fmt.Sprintf("<@%s> asked: %s", in.user().ID, inlineCode(text)), text)
		cancel()
		if err != nil && msg == "" {
			a.seen.forget(in.ID)
			a.log.Warn("slash command root post failed", "channel_id", in.ChannelID, "err", err)
			return ephemeral(rootFailure(err)), nil, nil
		}
		if err != nil {
			// The root is there but no thread (missing permission): the
			// run replies under the root in the channel.
			a.log.Warn("start thread failed; the run lives in the channel", "channel_id", in.ChannelID, "err", err)
		}
		root = msg
		k.Thread = thread
	}
	ev := a.event(raw, in, k)
	ev.Text = text
	rc, err := a.sink.HandleEvent(ctx, ev)
	if err != nil || rc.Duplicate {
		if root != "" {
			a.deleteRoot(ctx, in.ChannelID, root)
		}
		if err != nil {
			a.seen.forget(in.ID)
			a.log.Error("record slash command", "interaction", in.ID, "err", err)
			return ephemeral("opsgate could not record this command, so nothing was started. Please try again."), nil, nil
		}
		return ephemeral("ℹ️ Already received."), nil, nil
	}
	note := "🛠️ Working on it here."
	if k.Thread != k.Channel && !in.isThread() {
		note = fmt.Sprintf("🛠️ Working on it in <#%s>.", k.Thread)
	}
	follow := func(fctx context.Context) {
		_, err := a.api.InteractionResponseEdit(in.Interaction, &discordapi.WebhookEdit{Content: &note, AllowedMentions: noMentions},
			discordapi.WithContext(fctx))
		if err != nil {
			// A rate-limit error names the URL, which holds the token.
			msg := strings.ReplaceAll(err.Error(), in.Token, "[token]")
			a.log.Warn("interaction follow-up", "interaction", in.ID, "err", msg)
		}
	}
	return &discordapi.InteractionResponse{
		Type: discordapi.InteractionResponseDeferredChannelMessageWithSource,
		Data: &discordapi.InteractionResponseData{Flags: discordapi.MessageFlagsEphemeral},
	}, follow, nil
}

// startThread posts the bot's root message in channel and starts a thread
// from it. A thread started from a message takes the message's id, so
// thread == msg on success; on a failed thread start msg is set and thread
// falls back to the channel.
func (a *Adapter) startThread(ctx context.Context, channel, rootText, name string) (thread, msg string, err error) {
	m, err := a.api.ChannelMessageSendComplex(channel, &discordapi.MessageSend{
		Content: chunk.Cut(rootText, MaxContent, chunk.Runes), AllowedMentions: noMentions,
	}, discordapi.WithContext(ctx))
	if err != nil {
		return "", "", fmt.Errorf("discord: post root message: %w", err)
	}
	if m == nil || !isSnowflake(m.ID) {
		return "", "", errors.New("discord: post root message: answer without an id")
	}
	ch, err := a.api.MessageThreadStartComplex(channel, m.ID, &discordapi.ThreadStart{
		Name: chunk.Cut(strings.Join(strings.Fields(name), " "), maxThreadName, chunk.Runes), AutoArchiveDuration: 1440,
	}, discordapi.WithContext(ctx))
	if err != nil || ch == nil || !isSnowflake(ch.ID) {
		if err == nil {
			err = errors.New("answer without an id")
		}
		return channel, m.ID, fmt.Errorf("discord: start thread: %w", err)
	}
	return ch.ID, m.ID, nil
}

// deleteRoot removes a root message whose command was not recorded, with a
// context of its own: the request's may be about to end.
func (a *Adapter) deleteRoot(ctx context.Context, channel, msg string) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.RootTimeout)
	defer cancel()
	if err := a.api.ChannelMessageDelete(channel, msg, discordapi.WithContext(dctx)); err != nil {
		a.log.Warn("delete unrecorded root message", "channel_id", channel, "message_id", msg, "err", err)
	}
}

// rootFailure explains to the person who typed the command why nothing
// was started.
func rootFailure(err error) string {
	var rl *discordapi.RateLimitError
	if errors.As(err, &rl) {
		return fmt.Sprintf("⏳ Discord is rate limiting this bot here; nothing was started. Try again in %s.", rl.RetryAfter.Round(time.Second)+time.Second)
	}
	var re *discordapi.RESTError
	if errors.As(err, &re) && re.Response != nil && (re.Response.StatusCode == http.StatusForbidden || re.Response.StatusCode == http.StatusNotFound) {
		return "⛔ I cannot post in this channel (missing permission or not a member), so nothing was started. Invite the bot with Send Messages and Create Public Threads."
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "⌛ Discord did not answer in time, so nothing was started. Please try again."
	}
	return "⚠️ I could not post in this channel, so nothing was started."
}
