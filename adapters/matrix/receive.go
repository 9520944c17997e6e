package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// maxRequestBytes bounds a request's text; a longer message is answered
// with a notice and starts nothing.
const maxRequestBytes = 8 << 10

// commandPrefix addresses the bot in a room: "!ops deploy api 1.2.3".
const commandPrefix = "!ops"

// handleEvent turns one timeline event into at most one event for the
// sink, and answers what must be answered (refusals, encrypted rooms). It
// returns an error only when the batch must be read again: the sink or the
// homeserver failed. Everything else — not for us, forged, refused — is
// done with.
func (a *Adapter) handleEvent(ctx context.Context, room id.RoomID, ev *mxEvent, raw json.RawMessage) error {
	if id.UserID(ev.Sender) == a.self || len(ev.Unsigned.RedactedBecause) > 0 {
		return nil // our own echo, or a redacted event
	}
	switch ev.Type {
	case "m.room.message", "m.reaction", "m.room.encrypted", "m.room.encryption":
	default:
		return nil
	}
	direct := false
	if !a.isListed(room) {
		if !a.cfg.DirectMessages {
			a.log.Warn("ignored an event from a room not listed in channels.matrix.rooms", "room", room, "event_id", ev.EventID)
			return nil
		}
		d, err := a.isDirect(ctx, room)
		if err != nil {
			return err
		}
		if !d {
			a.log.Warn("ignored an event from a room that is neither listed nor direct", "room", room, "event_id", ev.EventID)
			return nil
		}
		direct = true
	}
	if ev.Type == "m.room.encryption" && ev.StateKey != nil {
		a.setEncrypted(room)
	}
	if ev.Type == "m.room.encryption" || ev.Type == "m.room.encrypted" || a.isEncrypted(room) {
		a.refuseEncrypted(ctx, room)
		return nil
	}
	if ev.Type == "m.reaction" {
		return a.handleReaction(ctx, room, ev, raw)
	}
	return a.handleMessage(ctx, room, ev, raw, direct)
}

func (a *Adapter) event(room id.RoomID, ev *mxEvent, raw json.RawMessage, k threadKey) core.ChannelEvent {
	return core.ChannelEvent{
		Channel: ChannelName, EventID: ev.EventID,
		Actor:      core.Actor{ID: ChannelName + ":" + ev.Sender, Name: ev.Sender},
		Thread:     core.Thread{Channel: ChannelName, Key: k.String()},
		Raw:        raw,
		ReceivedAt: a.now().UTC(),
	}
}

func (a *Adapter) handleMessage(ctx context.Context, room id.RoomID, ev *mxEvent, raw json.RawMessage, direct bool) error {
	m, err := ev.message()
	if err != nil {
		a.log.Warn("ignored malformed message", "room", room, "event_id", ev.EventID, "err", err)
		return nil
	}
	if m.RelatesTo != nil && m.RelatesTo.RelType == "m.replace" {
		return nil // edits of earlier messages
	}
	if fileTypes[m.MsgType] {
		return a.handleFile(ctx, room, ev, raw, m, direct)
	}
	if m.MsgType != "m.text" {
		return nil // notices (other bots), emotes, locations
	}
	body := m.Body
	target := m.replyTarget()
	if target != "" {
		body = stripReplyFallback(body)
	}
	root := m.threadRoot()
	if root == "" && !direct {
		root = ev.EventID
	}
	// A direct room is one conversation (its thread is the room), unless
	// the message is in a thread of its own.
	k := threadKey{Room: room, Root: id.EventID(root)}
	if len(body) > maxRequestBytes {
		a.notice(ctx, k, ev.EventID, fmt.Sprintf("⚠️ That message is too long for opsgate (%d bytes; at most %d). Nothing was started.", len(body), maxRequestBytes))
		return nil
	}
	if ref, ok := core.ParseApproveAll(body); ok && (target != "" || ref != "") {
		return a.approveAll(ctx, room, ev, raw, k, target, ref)
	}
	var ours *mxEvent
	if target != "" {
		var err error
		if ours, err = a.ownEvent(ctx, room, id.EventID(target)); err != nil {
			return err
		}
	}
	if d, ok := parseDecision(body); ok && ours != nil {
		if marker := cardMarkerOf(ours); marker != nil {
			return a.decide(ctx, room, ev, raw, marker, d)
		}
	}
	text, ok := a.requestText(body, m, direct)
	if !ok && ours != nil {
		// A reply to the bot addresses it: the next turn of its
		// conversation, or the answer to its question.
		text, ok = strings.TrimSpace(body), strings.TrimSpace(body) != ""
	}
	if !ok {
		return nil
	}
	e := a.event(room, ev, raw, k)
	e.Text = text
	if ours != nil {
		e.ReplyTo = &core.MessageRef{Channel: ChannelName, ID: messageRef(room, id.EventID(target))}
	}
	if _, err := a.sink.HandleEvent(ctx, e); err != nil {
		if errors.Is(err, core.ErrInvalidInput) { // retrying cannot help: drop it
			a.log.Warn("matrix: message refused", "event_id", ev.EventID, "err", err)
			return nil
		}
		return fmt.Errorf("matrix: record message %s: %w", ev.EventID, err)
	}
	return nil
}

// requestText applies Matrix's addressing habits and returns the request
// without them, or ok=false when the message is not for the bot:
//
//	"!ops deploy api 1.2.3"          → "deploy api 1.2.3"
//	"opsgate: deploy api 1.2.3"      → "deploy api 1.2.3" (a mention pill)
//	"@opsgate:example.org deploy …"  → "deploy …"
//	"deploy api 1.2.3"               → as is in a direct room, ignored elsewhere
func (a *Adapter) requestText(body string, m *messageContent, direct bool) (string, bool) {
	text := strings.TrimSpace(body)
	if text == "" {
		return "", false
	}
	if rest, ok := cutWord(text, commandPrefix); ok {
		if rest == "" {
			return "help", true
		}
		return rest, true
	}
	a.mu.Lock()
	names := []string{string(a.self), a.self.Localpart(), a.displayName}
	a.mu.Unlock()
	for _, n := range names {
		if n == "" {
			continue
		}
		if rest, ok := cutWord(text, n); ok {
			rest = strings.TrimSpace(strings.TrimLeft(rest, ",:"))
			if rest == "" {
				rest = "help"
			}
			return rest, true
		}
	}
	if direct {
		return text, true
	}
	if m.Mentions != nil {
		for _, u := range m.Mentions.UserIDs {
			if id.UserID(u) == a.self {
				return text, true
			}
		}
	}
	return "", false
}

// cutWord reports whether text starts with word (case-insensitively),
// followed by the end, a space, a line break, ',' or ':', and returns the
// rest trimmed.
func cutWord(text, word string) (string, bool) {
	if len(text) < len(word) || !strings.EqualFold(text[:len(word)], word) {
		return "", false
	}
	rest := text[len(word):]
	if rest != "" && !strings.ContainsAny(rest[:1], " \n\t,:") {
		return "", false
	}
	return strings.TrimSpace(strings.TrimLeft(rest, ",:")), true
}

func (a *Adapter) handleReaction(ctx context.Context, room id.RoomID, ev *mxEvent, raw json.RawMessage) error {
	r, err := ev.reaction()
	if err != nil {
		a.log.Warn("ignored malformed reaction", "room", room, "event_id", ev.EventID, "err", err)
		return nil
	}
	act := reactionAction(r.Key)
	if act == "" || r.EventID == "" {
		return nil
	}
	marker, err := a.cardOf(ctx, room, id.EventID(r.EventID))
	if err != nil || marker == nil {
		return err // a reaction to anything but a card of ours is not a decision
	}
	return a.decide(ctx, room, ev, raw, marker, decisionText{Action: act})
}

// decide records a decision on the card marker names, and answers a
// refusal (or a counted approval short of quorum) with a notice in the
// card's thread.
func (a *Adapter) decide(ctx context.Context, room id.RoomID, ev *mxEvent, raw json.RawMessage, marker *cardMarker, d decisionText) error {
	k := threadKey{Room: room}
	if pk, err := parseThreadKey(marker.Thread); err == nil && pk.Room == room {
		k = pk
	}
	if d.Problem != "" {
		a.notice(ctx, k, ev.EventID, "⚠️ Arguments not accepted: "+d.Problem)
		return nil
	}
	e := a.event(room, ev, raw, k)
	e.Decision = &core.Decision{ApprovalID: marker.ApprovalID, Action: approvals.Action(d.Action), Reason: d.Reason, Args: d.Args}
	rc, err := a.sink.HandleEvent(ctx, e)
	var de *core.DecisionError
	switch {
	case errors.As(err, &de):
		a.notice(ctx, k, ev.EventID, core.RefusalText(de))
		return nil
	case err != nil:
		return fmt.Errorf("matrix: record %s decision %s: %w", d.Action, ev.EventID, err)
	case !rc.Duplicate && rc.ApprovalStatus == string(approvals.StatusPending):
		a.notice(ctx, k, ev.EventID, core.AckText(rc))
	}
	return nil
}

// approveAll records the approve-all command: in a reply to a card, for
// that card's batch; otherwise ref names the approval.
func (a *Adapter) approveAll(ctx context.Context, room id.RoomID, ev *mxEvent, raw json.RawMessage, k threadKey, target, ref string) error {
	marker := &cardMarker{ApprovalID: ref, Thread: k.String()}
	if target != "" {
		own, err := a.ownEvent(ctx, room, id.EventID(target))
		if err != nil {
			return err
		}
		if m := cardMarkerOf(own); m != nil {
			marker = m
		}
	}
	if marker.ApprovalID == "" {
		a.notice(ctx, k, ev.EventID, "❓ Which card? Reply to the card with \""+strings.TrimSpace(core.ApproveAllCommand(""))+"\".")
		return nil
	}
	return a.decide(ctx, room, ev, raw, marker, decisionText{Action: string(core.ActionApproveAll)})
}

// cardOf returns the card marker of event target in room when it is a
// card the bot sent, or nil: a reply to or reaction on anything else is
// not a decision.
func (a *Adapter) cardOf(ctx context.Context, room id.RoomID, target id.EventID) (*cardMarker, error) {
	ev, err := a.ownEvent(ctx, room, target)
	return cardMarkerOf(ev), err
}

// ownEvent returns event target of room when the bot sent it (a message),
// or nil. Only the bot's own events are trusted, and the homeserver
// vouches for who sent an event.
func (a *Adapter) ownEvent(ctx context.Context, room id.RoomID, target id.EventID) (*mxEvent, error) {
	u := a.cli.BuildClientURL("v3", "rooms", room, "event", target)
	body, err := a.cli.MakeFullRequest(ctx, mautrix.FullRequest{Method: http.MethodGet, URL: u})
	var he mautrix.HTTPError
	if errors.As(err, &he) && (he.IsStatus(http.StatusNotFound) || he.IsStatus(http.StatusForbidden)) {
		return nil, nil
	}
	if err != nil {
		return nil, apiError("event", err)
	}
	ev, err := parseEvent(body)
	if err != nil || id.UserID(ev.Sender) != a.self || ev.Type != "m.room.message" {
		return nil, nil
	}
	return ev, nil
}

// cardMarkerOf is the card marker of the bot's event ev, or nil.
func cardMarkerOf(ev *mxEvent) *cardMarker {
	if ev == nil {
		return nil
	}
	m, err := ev.message()
	if err != nil || m.Card == nil || m.Card.ApprovalID == "" {
		return nil
	}
	return m.Card
}

// refuseEncrypted answers the first event seen from an end-to-end
// encrypted room with a notice naming the room, once (kept in the store,
// so replicas and restarts do not repeat it), and logs every refusal.
func (a *Adapter) refuseEncrypted(ctx context.Context, room id.RoomID) {
	a.log.Error("refused an end-to-end encrypted room: opsgate reads only unencrypted rooms (docs/matrix.md)", "room", room)
	key := "matrix:e2ee-notice:" + string(a.self) + ":" + string(room)
	if _, err := a.store.StateGet(ctx, key); err == nil || !errors.Is(err, core.ErrNotFound) {
		return
	}
	text := fmt.Sprintf("⛔ Room %s is end-to-end encrypted. opsgate does not read encrypted rooms, so nothing here starts or decides a run. "+
		"Ask in an unencrypted room (or a direct room without encryption), or decide in the console.", room)
	if _, err := a.sendEvent(ctx, room, "m.room.message", noticeContent(threadKey{Room: room}, text, *a.cfg.Threads), txnID(key, "e2ee")); err != nil {
		a.log.Warn("send encrypted-room notice", "room", room, "err", err)
		return
	}
	if err := a.store.StatePut(ctx, key, []byte("sent"), a.now()); err != nil {
		a.log.Warn("remember encrypted-room notice", "room", room, "err", err)
	}
}

// notice sends a short answer outside the outbox (a refusal, which nothing
// needs to remember), with a transaction id from the event it answers, so
// reading a batch again never doubles it; failures are logged.
func (a *Adapter) notice(ctx context.Context, k threadKey, answering, text string) {
	if _, err := a.sendEvent(ctx, k.Room, "m.room.message", noticeContent(k, text, *a.cfg.Threads), txnID(answering, "notice")); err != nil {
		a.log.Warn("send notice", "room", k.Room, "err", err)
	}
}
