package telegram

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The Bot API objects this package reads, decoded by hand: tgbotapi v5.5.1's
// types predate message_thread_id and is_topic_message, and an update
// decoded through them would silently lose the forum topic.

type tgUpdate struct {
	UpdateID      *int64           `json:"update_id"`
	Message       *tgMessage       `json:"message,omitempty"`
	CallbackQuery *tgCallbackQuery `json:"callback_query,omitempty"`
	// Other kinds (edited_message, channel_post, my_chat_member, …) are
	// acknowledged and ignored.
}

type tgUser struct {
	ID        int64  `json:"id"`
	IsBot     bool   `json:"is_bot"`
	FirstName string `json:"first_name"`
	LastName  string `json:"last_name,omitempty"`
	Username  string `json:"username,omitempty"`
}

type tgChat struct {
	ID      int64  `json:"id"`
	Type    string `json:"type"` // private | group | supergroup | channel
	Title   string `json:"title,omitempty"`
	IsForum bool   `json:"is_forum,omitempty"`
}

type tgMessage struct {
	MessageID       int64      `json:"message_id"`
	MessageThreadID int64      `json:"message_thread_id,omitempty"`
	IsTopicMessage  bool       `json:"is_topic_message,omitempty"`
	From            *tgUser    `json:"from,omitempty"`
	Chat            tgChat     `json:"chat"`
	Date            int64      `json:"date"`
	Text            string     `json:"text,omitempty"`
	ReplyToMessage  *tgMessage `json:"reply_to_message,omitempty"`
	// A file and its caption (files.go).
	Caption  string        `json:"caption,omitempty"`
	Document *tgFile       `json:"document,omitempty"`
	Photo    []tgPhotoSize `json:"photo,omitempty"`
	Audio    *tgFile       `json:"audio,omitempty"`
	Voice    *tgFile       `json:"voice,omitempty"`
	Video    *tgFile       `json:"video,omitempty"`
}

type tgCallbackQuery struct {
	ID              string     `json:"id"`
	From            tgUser     `json:"from"`
	Message         *tgMessage `json:"message,omitempty"`
	InlineMessageID string     `json:"inline_message_id,omitempty"`
	Data            string     `json:"data,omitempty"`
}

// ErrMalformedUpdate is an update body that is not a Bot API Update.
var ErrMalformedUpdate = errors.New("telegram: malformed update")

// parseUpdate decodes one update and checks the fields the adapter relies
// on, so later code never meets a message without a chat or a callback
// without an id.
func parseUpdate(b []byte) (*tgUpdate, error) {
	var u tgUpdate
	if err := json.Unmarshal(b, &u); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedUpdate, err)
	}
	if u.UpdateID == nil || *u.UpdateID < 0 {
		return nil, fmt.Errorf("%w: no update_id", ErrMalformedUpdate)
	}
	if m := u.Message; m != nil {
		if err := checkMessage(m); err != nil {
			return nil, err
		}
	}
	if q := u.CallbackQuery; q != nil {
		if q.ID == "" || q.From.ID == 0 {
			return nil, fmt.Errorf("%w: callback_query without id or sender", ErrMalformedUpdate)
		}
		if q.Message != nil {
			if err := checkMessage(q.Message); err != nil {
				return nil, err
			}
		}
	}
	return &u, nil
}

func checkMessage(m *tgMessage) error {
	if m.MessageID <= 0 || m.Chat.ID == 0 {
		return fmt.Errorf("%w: message without message_id or chat", ErrMalformedUpdate)
	}
	if m.MessageThreadID < 0 {
		return fmt.Errorf("%w: negative message_thread_id", ErrMalformedUpdate)
	}
	return nil
}

// threadKey is what a Thread.Key packs: the chat, the forum topic (0 when
// none) and the message replies answer (0 when none).
type threadKey struct {
	Chat, Topic, Msg int64
}

func (k threadKey) String() string { return fmt.Sprintf("%d/%d/%d", k.Chat, k.Topic, k.Msg) }

// parseThreadKey reads a Thread.Key written by threadKey.String; a bare
// chat id is accepted too, for threads written by hand (config, API).
func parseThreadKey(s string) (threadKey, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 1 && len(parts) != 3 {
		return threadKey{}, fmt.Errorf("telegram: thread key %q: want <chat>/<topic>/<message>", s)
	}
	var n [3]int64
	for i, p := range parts {
		v, err := strconv.ParseInt(p, 10, 64)
		if err != nil || (i > 0 && v < 0) {
			return threadKey{}, fmt.Errorf("telegram: thread key %q: bad number %q", s, p)
		}
		n[i] = v
	}
	if n[0] == 0 {
		return threadKey{}, fmt.Errorf("telegram: thread key %q: no chat", s)
	}
	return threadKey{Chat: n[0], Topic: n[1], Msg: n[2]}, nil
}

// keyOf addresses answers to m: same chat, same forum topic, replying to m.
// A private chat is one conversation: its thread is the chat, and every
// message continues it (docs/telegram.md, "Conversations").
func keyOf(m *tgMessage) threadKey {
	if m.Chat.Type == "private" {
		return threadKey{Chat: m.Chat.ID}
	}
	k := threadKey{Chat: m.Chat.ID, Msg: m.MessageID}
	// message_thread_id also appears on plain reply chains in ordinary
	// groups, where sending it back fails: only a forum topic keeps it.
	if m.IsTopicMessage {
		k.Topic = m.MessageThreadID
	}
	return k
}

// messageRef is how a sent message is remembered for later edits.
func messageRef(chat, msg int64) string { return fmt.Sprintf("%d/%d", chat, msg) }

func parseMessageRef(s string) (chat, msg int64, err error) {
	c, m, ok := strings.Cut(s, "/")
	if ok {
		chat, err = strconv.ParseInt(c, 10, 64)
		if err == nil {
			msg, err = strconv.ParseInt(m, 10, 64)
		}
	}
	if !ok || err != nil || chat == 0 || msg <= 0 {
		return 0, 0, fmt.Errorf("telegram: message ref %q: want <chat>/<message id>", s)
	}
	return chat, msg, nil
}

// displayName is how a user is shown in prompts and actor names.
func (u tgUser) displayName() string {
	n := strings.TrimSpace(u.FirstName + " " + u.LastName)
	if n == "" && u.Username != "" {
		n = "@" + u.Username
	}
	if n == "" {
		n = strconv.FormatInt(u.ID, 10)
	}
	return n
}

// commandText applies Telegram's addressing habits to a message and returns
// the request without them, or ok=false when the message is not for us:
//
//	"/ops deploy api 1.2.3"        → "deploy api 1.2.3"
//	"/deploy@opsbot api 1.2.3"     → "deploy api 1.2.3"  (groups)
//	"/deploy@otherbot api"         → ignored: another bot's command
//	"@opsbot deploy api 1.2.3"     → "deploy api 1.2.3"  (groups)
//	"deploy api 1.2.3"             → as is in a private chat, ignored in groups
func commandText(m *tgMessage, botUsername string) (string, bool) {
	text := strings.TrimSpace(m.Text)
	if text == "" {
		return "", false
	}
	if strings.HasPrefix(text, "/") {
		word, rest, _ := strings.Cut(text, " ")
		if i := strings.IndexAny(word, "\n\t"); i >= 0 {
			word, rest = text[:i], text[i+1:]
		}
		cmd, at, addressed := strings.Cut(word[1:], "@")
		if addressed && !strings.EqualFold(at, botUsername) {
			return "", false
		}
		if cmd == "" {
			return "", false
		}
		rest = strings.TrimSpace(rest)
		if strings.EqualFold(cmd, "ops") {
			if rest == "" {
				return "help", true
			}
			return rest, true
		}
		if rest == "" {
			return cmd, true
		}
		return cmd + " " + rest, true
	}
	if m.Chat.Type == "private" {
		return text, true
	}
	if botUsername != "" {
		mention := "@" + botUsername
		if len(text) >= len(mention) && strings.EqualFold(text[:len(mention)], mention) {
			rest := text[len(mention):]
			if rest == "" || rest[0] == ' ' || rest[0] == '\n' || rest[0] == ',' || rest[0] == ':' {
				rest = strings.TrimSpace(strings.TrimLeft(rest, ",:"))
				if rest == "" {
					rest = "help"
				}
				return rest, true
			}
		}
	}
	return "", false
}
