package slack

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/opsgate/opsgate/core"
)

// ErrMalformed is an inbound payload that does not parse or lacks what
// every payload of its kind must carry; it is answered 400.
var ErrMalformed = errors.New("slack: malformed payload")

// eventEnvelope is the outer shape of an Events API delivery (over HTTP, and
// the payload of a Socket Mode events_api envelope).
type eventEnvelope struct {
	Type           string          `json:"type"`
	Challenge      string          `json:"challenge"`
	TeamID         string          `json:"team_id"`
	APIAppID       string          `json:"api_app_id"`
	EventID        string          `json:"event_id"`
	EventTime      int64           `json:"event_time"`
	Event          json.RawMessage `json:"event"`
	Authorizations []struct {
		TeamID string `json:"team_id"`
		UserID string `json:"user_id"`
		IsBot  bool   `json:"is_bot"`
	} `json:"authorizations"`
}

// innerEvent holds the fields of app_mention and message events opsgate
// reads.
type innerEvent struct {
	Type         string `json:"type"`
	Subtype      string `json:"subtype"`
	User         string `json:"user"`
	BotID        string `json:"bot_id"`
	Text         string `json:"text"`
	TS           string `json:"ts"`
	ThreadTS     string `json:"thread_ts"`
	Channel      string `json:"channel"`
	ChannelType  string `json:"channel_type"`
	ParentUserID string `json:"parent_user_id"`
	Team         string `json:"team"`
	Files        []struct {
		ID         string `json:"id"`
		Name       string `json:"name"`
		Mimetype   string `json:"mimetype"`
		URLPrivate string `json:"url_private"`
		Size       int64  `json:"size"`
	} `json:"files"`
}

// parseEnvelope decodes an Events API body. It checks only the outer shape;
// normalizeEvent decides what the event means.
func parseEnvelope(body []byte) (eventEnvelope, error) {
	var env eventEnvelope
	if err := json.Unmarshal(body, &env); err != nil {
		return env, fmt.Errorf("%w: events body: %w", ErrMalformed, err)
	}
	switch env.Type {
	case "url_verification":
		if env.Challenge == "" {
			return env, fmt.Errorf("%w: url_verification without challenge", ErrMalformed)
		}
	case "event_callback":
		if env.EventID == "" || len(env.Event) == 0 {
			return env, fmt.Errorf("%w: event_callback without event_id or event", ErrMalformed)
		}
	case "":
		return env, fmt.Errorf("%w: events body without type", ErrMalformed)
	}
	return env, nil
}

// eventContext is what normalization needs beyond the payload.
type eventContext struct {
	// botUserID is the bot's own user id; its own messages are ignored and
	// its mention is stripped.
	botUserID string
	// knownThread reports whether the bot has posted in a thread, so a
	// follow-up there without a mention still reaches opsgate.
	knownThread func(key string) bool
	now         time.Time
}

// normalizeEvent turns an event_callback into a ChannelEvent. ok is false
// for events opsgate deliberately ignores (the bot's own messages, edits,
// chatter in threads it is not part of); err is set for malformed ones.
func normalizeEvent(env eventEnvelope, raw []byte, ec eventContext) (ev core.ChannelEvent, ok bool, err error) {
	var in innerEvent
	if err := json.Unmarshal(env.Event, &in); err != nil {
		return ev, false, fmt.Errorf("%w: event: %w", ErrMalformed, err)
	}
	if in.Type != "app_mention" && in.Type != "message" {
		return ev, false, nil
	}
	if in.Channel == "" || in.TS == "" {
		return ev, false, fmt.Errorf("%w: %s event without channel or ts", ErrMalformed, in.Type)
	}
	// Bots never drive opsgate: its own messages would loop, and another
	// bot answering in a thread would trigger an endless exchange.
	if in.BotID != "" || in.User == "" || (ec.botUserID != "" && in.User == ec.botUserID) {
		return ev, false, nil
	}
	// Edits, deletions, joins and other message subtypes are not requests.
	if in.Subtype != "" && in.Subtype != "file_share" && in.Subtype != "thread_broadcast" {
		return ev, false, nil
	}
	team := env.TeamID
	if team == "" {
		team = in.Team
	}
	root := in.ThreadTS
	if root == "" {
		root = in.TS
	}
	key := threadKey{Team: team, Channel: in.Channel, TS: root}
	mention := ec.botUserID != "" && strings.Contains(in.Text, "<@"+ec.botUserID+">")
	if in.Type == "message" && in.ChannelType != "im" {
		// In channels a mention arrives twice (app_mention and message);
		// app_mention handles it. Other messages count only as follow-ups
		// in a thread the bot takes part in.
		if mention || in.ThreadTS == "" || in.ThreadTS == in.TS {
			return ev, false, nil
		}
		if in.ParentUserID != ec.botUserID && (ec.knownThread == nil || !ec.knownThread(key.String())) {
			return ev, false, nil
		}
	}
	ev = core.ChannelEvent{
		Channel:    channelName,
		EventID:    env.EventID,
		Actor:      core.Actor{ID: channelName + ":" + in.User},
		Thread:     key.thread(),
		Text:       cleanText(in.Text, ec.botUserID),
		Raw:        json.RawMessage(raw),
		ReceivedAt: ec.now,
	}
	for _, f := range in.Files {
		ev.Attachments = append(ev.Attachments, core.NewAttachment(f.ID, f.Name, f.Mimetype, f.Size))
	}
	return ev, true, nil
}

var (
	// slackLink matches Slack's angle-bracket markup: <https://x|label>,
	// <@U123>, <#C123|name>, <!here>.
	slackLink = regexp.MustCompile(`<([^<>|]*)(?:\|([^<>]*))?>`)
)

// cleanText turns Slack's wire text back into what the person typed: the
// bot's mention removed, links and mentions unwrapped, entities decoded.
// "<@UBOT> deploy <http://api.example.com|api.example.com> 1.2.3" becomes
// "deploy api.example.com 1.2.3".
func cleanText(s, botUserID string) string {
	if botUserID != "" {
		s = strings.ReplaceAll(s, "<@"+botUserID+">", " ")
	}
	s = slackLink.ReplaceAllStringFunc(s, func(m string) string {
		sub := slackLink.FindStringSubmatch(m)
		target, label := sub[1], sub[2]
		switch {
		case strings.HasPrefix(target, "@"):
			return target // <@U123> → @U123
		case strings.HasPrefix(target, "#"):
			if label != "" {
				return "#" + label
			}
			return target
		case strings.HasPrefix(target, "!"):
			if label != "" {
				return label
			}
			return "@" + strings.TrimPrefix(target, "!")
		case label != "":
			return label
		}
		return target
	})
	s = unescapeEntities.Replace(s)
	// Collapse the spaces a removed mention leaves, but keep line breaks:
	// a multi-line request keeps its shape.
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

// unescapeEntities undoes Slack's three entities; built once (a Replacer
// is safe for concurrent use).
var unescapeEntities = strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&")
