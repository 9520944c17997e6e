package matrix

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// The parts of a Matrix event the adapter reads, decoded by hand: what
// arrives in /sync is outside input, and every field used later is checked
// once here.
type mxEvent struct {
	Type     string          `json:"type"`
	EventID  string          `json:"event_id"`
	Sender   string          `json:"sender"`
	StateKey *string         `json:"state_key,omitempty"`
	Content  json.RawMessage `json:"content"`
	TS       int64           `json:"origin_server_ts"`
	Unsigned struct {
		RedactedBecause json.RawMessage `json:"redacted_because,omitempty"`
	} `json:"unsigned"`
}

// relatesTo is m.relates_to: a thread (m.thread), an edit (m.replace), a
// reaction (m.annotation with its key), and the reply target.
type relatesTo struct {
	RelType       string `json:"rel_type,omitempty"`
	EventID       string `json:"event_id,omitempty"`
	Key           string `json:"key,omitempty"`
	IsFallingBack bool   `json:"is_falling_back,omitempty"`
	InReplyTo     *struct {
		EventID string `json:"event_id"`
	} `json:"m.in_reply_to,omitempty"`
}

// messageContent is an m.room.message's content as read (and as sent: the
// card marker identifies a card the bot sent).
type messageContent struct {
	MsgType       string     `json:"msgtype"`
	Body          string     `json:"body"`
	Format        string     `json:"format,omitempty"`
	FormattedBody string     `json:"formatted_body,omitempty"`
	RelatesTo     *relatesTo `json:"m.relates_to,omitempty"`
	Mentions      *struct {
		UserIDs []string `json:"user_ids,omitempty"`
		Room    bool     `json:"room,omitempty"`
	} `json:"m.mentions,omitempty"`
	Card *cardMarker `json:"org.opsgate.card,omitempty"`
	// A file (m.file, m.image, m.audio, m.video; files.go): its mxc://
	// URI, its name (when body is a caption) and what the sender said of
	// it.
	URL      string    `json:"url,omitempty"`
	FileName string    `json:"filename,omitempty"`
	Info     *fileInfo `json:"info,omitempty"`
}

// cardMarker rides on every card the bot sends: which approval it shows,
// and the thread it belongs to. It is trusted only on events whose sender
// is the bot itself (the homeserver vouches for senders).
type cardMarker struct {
	ApprovalID string `json:"approval_id"`
	Thread     string `json:"thread,omitempty"`
}

type reactionContent struct {
	RelatesTo *relatesTo `json:"m.relates_to"`
}

// ErrMalformedEvent is an event that is not a Matrix event as the adapter
// reads them.
var ErrMalformedEvent = errors.New("matrix: malformed event")

// maxEventBytes is the spec's limit on a whole event; larger is forged.
const maxEventBytes = 65536

var (
	eventIDRE = regexp.MustCompile(`^\$[A-Za-z0-9+/=_\-.:]{1,255}$`)
	typeRE    = regexp.MustCompile(`^[A-Za-z0-9._\-]{1,255}$`)
)

// parseEvent decodes one event and checks its envelope: a type, an event
// id, a sender that is a user id, an object for content.
func parseEvent(b []byte) (*mxEvent, error) {
	if len(b) > maxEventBytes {
		return nil, fmt.Errorf("%w: %d bytes, over the 64 KiB event limit", ErrMalformedEvent, len(b))
	}
	var ev mxEvent
	if err := json.Unmarshal(b, &ev); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedEvent, err)
	}
	switch {
	case !typeRE.MatchString(ev.Type):
		return nil, fmt.Errorf("%w: bad type %q", ErrMalformedEvent, cutBytes(ev.Type, 40))
	case !eventIDRE.MatchString(ev.EventID):
		return nil, fmt.Errorf("%w: bad event_id %q", ErrMalformedEvent, cutBytes(ev.EventID, 40))
	case !userIDRE.MatchString(ev.Sender):
		return nil, fmt.Errorf("%w: bad sender %q", ErrMalformedEvent, cutBytes(ev.Sender, 40))
	}
	if len(ev.Content) == 0 || ev.Content[0] != '{' {
		if len(ev.Unsigned.RedactedBecause) == 0 {
			return nil, fmt.Errorf("%w: content is not an object", ErrMalformedEvent)
		}
		ev.Content = json.RawMessage("{}")
	}
	return &ev, nil
}

func (ev *mxEvent) message() (*messageContent, error) {
	var m messageContent
	if err := json.Unmarshal(ev.Content, &m); err != nil {
		return nil, fmt.Errorf("%w: message content: %v", ErrMalformedEvent, err)
	}
	if r := m.RelatesTo; r != nil {
		if err := checkRelation(r); err != nil {
			return nil, err
		}
	}
	return &m, nil
}

func (ev *mxEvent) reaction() (*relatesTo, error) {
	var c reactionContent
	if err := json.Unmarshal(ev.Content, &c); err != nil {
		return nil, fmt.Errorf("%w: reaction content: %v", ErrMalformedEvent, err)
	}
	r := c.RelatesTo
	if r == nil || r.RelType != "m.annotation" || r.Key == "" {
		return nil, fmt.Errorf("%w: reaction without an m.annotation", ErrMalformedEvent)
	}
	if err := checkRelation(r); err != nil {
		return nil, err
	}
	return r, nil
}

func checkRelation(r *relatesTo) error {
	if r.EventID != "" && !eventIDRE.MatchString(r.EventID) {
		return fmt.Errorf("%w: relation to a bad event_id", ErrMalformedEvent)
	}
	if r.InReplyTo != nil && !eventIDRE.MatchString(r.InReplyTo.EventID) {
		return fmt.Errorf("%w: reply to a bad event_id", ErrMalformedEvent)
	}
	if len(r.Key) > 64 {
		return fmt.Errorf("%w: reaction key too long", ErrMalformedEvent)
	}
	return nil
}

// replyTarget is the event m answers: its reply target (also inside a
// thread, where a fallback reply points at the thread's latest event).
func (m *messageContent) replyTarget() string {
	if r := m.RelatesTo; r != nil && r.InReplyTo != nil {
		return r.InReplyTo.EventID
	}
	return ""
}

// threadRoot is the root of the thread m was sent in, or "".
func (m *messageContent) threadRoot() string {
	if r := m.RelatesTo; r != nil && r.RelType == "m.thread" {
		return r.EventID
	}
	return ""
}

// stripReplyFallback removes the quoted "> <@user:server> …" lines older
// clients put before a reply's own text.
func stripReplyFallback(body string) string {
	if !strings.HasPrefix(body, "> ") {
		return body
	}
	lines := strings.Split(body, "\n")
	i := 0
	for i < len(lines) && strings.HasPrefix(lines[i], ">") {
		i++
	}
	return strings.TrimSpace(strings.Join(lines[i:], "\n"))
}

// decisionText is a reply's words as a decision: "approve", "reject" or
// "reject: <reason>", "edit {json}". ok is false for any other text.
type decisionText struct {
	Action string
	Reason string
	Args   map[string]any
	// Problem is why edit arguments were not accepted.
	Problem string
}

func parseDecision(text string) (decisionText, bool) {
	t := strings.TrimSpace(text)
	word, rest, _ := strings.Cut(t, " ")
	if i := strings.IndexAny(word, ":\n"); i >= 0 {
		word, rest = t[:i], t[i:]
	}
	rest = strings.TrimSpace(rest)
	switch strings.ToLower(strings.TrimRight(word, ".!")) {
	case "approve", "approved", "lgtm":
		if rest != "" {
			return decisionText{}, false
		}
		return decisionText{Action: "approve"}, true
	case "reject", "rejected", "deny":
		rest = strings.TrimSpace(strings.TrimPrefix(rest, ":"))
		return decisionText{Action: "reject", Reason: rest}, true
	case "edit":
		rest = strings.TrimSpace(strings.TrimPrefix(rest, ":"))
		args, err := parseArgs(rest)
		if err != nil {
			return decisionText{Action: "edit", Problem: err.Error()}, true
		}
		return decisionText{Action: "edit", Args: args}, true
	}
	return decisionText{}, false
}

// parseArgs reads edited arguments: one JSON object.
func parseArgs(s string) (map[string]any, error) {
	s = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(s), "```json"), "```"))
	s = strings.TrimSpace(strings.TrimPrefix(s, "```"))
	if s == "" {
		return nil, fmt.Errorf(`give the new arguments as one JSON object, e.g. edit {"version": "1.2.4"}`)
	}
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("not a valid JSON object: %v", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("not a valid JSON object: text after the closing brace")
	}
	if m == nil {
		return nil, fmt.Errorf("not a JSON object")
	}
	return m, nil
}

// reactionAction maps a reaction key to a decision, ignoring the emoji
// variation selector.
func reactionAction(key string) string {
	switch strings.TrimSuffix(key, "\ufe0f") {
	case reactApprove, "✔", "👍":
		return "approve"
	case reactReject, "✖", "👎":
		return "reject"
	}
	return ""
}
