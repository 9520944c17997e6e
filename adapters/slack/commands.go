package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	slackapi "github.com/slack-go/slack"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/markdown"
)

// slashCommand is one slash command invocation, from an HTTP form or a
// Socket Mode slash_commands envelope.
type slashCommand struct {
	Command     string `json:"command"`
	Text        string `json:"text"`
	UserID      string `json:"user_id"`
	UserName    string `json:"user_name"`
	ChannelID   string `json:"channel_id"`
	TeamID      string `json:"team_id"`
	TriggerID   string `json:"trigger_id"`
	ResponseURL string `json:"response_url"`
}

func (c slashCommand) validate() error {
	if c.UserID == "" || c.ChannelID == "" || c.TriggerID == "" || c.Command == "" {
		return fmt.Errorf("%w: slash command without command, user_id, channel_id or trigger_id", ErrMalformed)
	}
	return nil
}

// parseSlashForm reads the application/x-www-form-urlencoded body Slack
// POSTs to /slack/commands.
func parseSlashForm(body []byte) (slashCommand, error) {
	v, err := url.ParseQuery(string(body))
	if err != nil {
		return slashCommand{}, fmt.Errorf("%w: slash command form: %w", ErrMalformed, err)
	}
	c := slashCommand{
		Command: v.Get("command"), Text: v.Get("text"), UserID: v.Get("user_id"), UserName: v.Get("user_name"),
		ChannelID: v.Get("channel_id"), TeamID: v.Get("team_id"), TriggerID: v.Get("trigger_id"),
		ResponseURL: v.Get("response_url"),
	}
	return c, c.validate()
}

// parseSlashJSON reads the payload of a Socket Mode slash_commands envelope.
func parseSlashJSON(payload []byte) (slashCommand, error) {
	var c slashCommand
	if err := json.Unmarshal(payload, &c); err != nil {
		return c, fmt.Errorf("%w: slash command payload: %w", ErrMalformed, err)
	}
	return c, c.validate()
}

// answer is a transport-neutral reply to an inbound payload: an HTTP
// status and JSON body, or a Socket Mode ack (status < 500) with the body
// as its payload. A 5xx is not acked over Socket Mode, so Slack redelivers.
type answer struct {
	status int
	body   any
}

var answerOK = answer{status: http.StatusOK}

// ephemeral answers a slash command with a message only its caller sees.
func ephemeral(text string) answer {
	return answer{status: http.StatusOK, body: map[string]string{"response_type": "ephemeral", "text": text}}
}

// handleSlash starts a run in a new thread. Slack gives a slash command no
// thread of its own, so the bot posts the thread's root message first — a
// single chat.postMessage bounded by RootPostTimeout, inside Slack's
// 3-second budget — and records the event with that thread's address.
// Every reply, card and card update of the run then goes to that thread,
// and people's follow-ups in it carry the same address. If the root cannot
// be posted, nothing is recorded and the caller is told why; if recording
// fails (or the command was already recorded), the root is deleted again.
// The run itself is executed by the engine after the ack. All of it is
// bounded by AckBudget.
func (a *Adapter) handleSlash(ctx context.Context, c slashCommand) answer {
	ctx, cancelAll := context.WithTimeout(ctx, a.cfg.AckBudget)
	defer cancelAll()
	pctx, cancel := context.WithTimeout(ctx, a.cfg.RootPostTimeout)
	defer cancel()
	rootText := fmt.Sprintf("<@%s> ran %s", c.UserID, codeSpan(strings.TrimSpace(c.Command+" "+c.Text)))
	_, ts, err := a.api.PostMessageContext(pctx, c.ChannelID,
		slackapi.MsgOptionText(rootText, false), slackapi.MsgOptionDisableLinkUnfurl())
	if err != nil {
		a.log.WarnContext(ctx, "slack: slash command root post failed", "channel_id", c.ChannelID, "err", err)
		return ephemeral(rootPostFailure(err))
	}
	key := threadKey{Team: c.TeamID, Channel: c.ChannelID, TS: ts}
	// Raw is kept as JSON whatever the transport (form or Socket Mode).
	raw, _ := json.Marshal(c)
	// Follow-ups here carry parent_user_id = the bot, so they are
	// recognized without the record; it is kept in memory now, and the
	// command's event recorded in the thread makes it durable (ThreadSeen).
	a.threads.add(key.String())
	ev := core.ChannelEvent{
		Channel:    channelName,
		EventID:    "command:" + c.TriggerID,
		Actor:      core.Actor{ID: channelName + ":" + c.UserID, Name: c.UserName},
		Thread:     key.thread(),
		Text:       cleanText(c.Text, ""),
		Raw:        raw,
		ReceivedAt: a.now(),
	}
	rc, err := a.sink.HandleEvent(ctx, ev)
	if err != nil || rc.Duplicate {
		a.deleteRoot(ctx, c.ChannelID, ts)
		if err != nil {
			a.log.ErrorContext(ctx, "slack: record slash command", "err", err)
			if errors.Is(err, core.ErrInvalidInput) {
				return ephemeral("opsgate cannot take this command (" + core.IngressMessage(err) + "), so nothing was started.")
			}
			return ephemeral("opsgate could not record this command, so nothing was started. Please try again.")
		}
	}
	return answerOK
}

// deleteRoot removes a root message whose command was not recorded, with a
// context of its own: the request's may be about to end.
func (a *Adapter) deleteRoot(ctx context.Context, channel, ts string) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.RootPostTimeout)
	defer cancel()
	if _, _, err := a.api.DeleteMessageContext(dctx, channel, ts); err != nil {
		a.log.WarnContext(ctx, "slack: delete unrecorded root message", "channel_id", channel, "ts", ts, "err", err)
	}
}

// rootPostFailure explains, to the person who typed the command, why the
// bot could not start a thread.
func rootPostFailure(err error) string {
	var rl *slackapi.RateLimitedError
	if errors.As(err, &rl) {
		return fmt.Sprintf("Slack is rate limiting messages here; nothing was started. Try again in %s.", rl.RetryAfter)
	}
	switch slackErrorCode(err) {
	case "not_in_channel":
		return "I am not a member of this channel, so I cannot start a thread here. Invite me with `/invite @opsgate` and try again."
	case "channel_not_found":
		return "I cannot post in this conversation (a private channel or a DM I am not part of). Invite me, or use a channel I am in."
	case "is_archived":
		return "This channel is archived; nothing was started."
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "Slack did not answer in time, so nothing was started. Please try again."
	}
	return "I could not post in this channel, so nothing was started: " + err.Error()
}

// slackErrorCode returns the "error" field of a Slack API error response,
// or "" for other errors.
func slackErrorCode(err error) string {
	var v slackapi.SlackErrorResponse
	if errors.As(err, &v) {
		return v.Err
	}
	var p *slackapi.SlackErrorResponse
	if errors.As(err, &p) && p != nil {
		return p.Err
	}
	return ""
}

// codeSpan renders s as inline code in mrkdwn, escaped; text containing a
// backtick is shown plain instead (mrkdwn has no way to escape one).
func codeSpan(s string) string {
	s = escapeMrkdwn(s)
	if strings.Contains(s, "`") || s == "" {
		return s
	}
	return "`" + s + "`"
}

// escapeMrkdwn escapes the three characters Slack requires escaped in any
// text it parses, so outside text never becomes a link or a mention.
func escapeMrkdwn(s string) string { return markdown.EscapeEntities(s) }
