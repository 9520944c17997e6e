package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/adapters/adaptertest"
)

// batch builds a /sync answer holding events (raw JSON) in room's timeline.
func batch(room string, events ...string) *syncResponse {
	var r syncResponse
	r.NextBatch = "s_next"
	jr := joinedRoom{}
	for _, e := range events {
		jr.Timeline.Events = append(jr.Timeline.Events, json.RawMessage(e))
	}
	r.Rooms.Join = map[string]joinedRoom{room: jr}
	return &r
}

func msgEvent(evID, sender, body string, extra string) string {
	return fmt.Sprintf(`{"type":"m.room.message","event_id":%q,"sender":%q,"origin_server_ts":1,"content":{"msgtype":"m.text","body":%q%s}}`,
		evID, sender, body, extra)
}

// badInput hands the adapter forged, malformed, misdirected and oversized
// events as a /sync batch would; each is refused (logged, or answered with
// a notice) and none reaches the store. RunConformance then checks that
// the store recorded nothing.
func badInput(t *testing.T, ad *Adapter, w *world) {
	t.Helper()
	ctx := context.Background()
	room := string(w.room)
	alice := string(w.alice.UserID)
	// A message dressed as one of the bot's cards, sent by alice: the
	// homeserver vouches that its sender is alice, so it is no card.
	forged := w.say(w.alice, "Approval needed: deploy", map[string]any{"msgtype": "m.notice",
		"org.opsgate.card": map[string]any{"approval_id": "ap-forged"}})
	cases := map[string]*syncResponse{
		"MalformedJSON":        batch(room, `{"type":"m.room.message","event_id":`),
		"NoEventID":            batch(room, fmt.Sprintf(`{"type":"m.room.message","sender":%q,"content":{"msgtype":"m.text","body":"!ops deploy api 1.2.3"}}`, alice)),
		"SenderNotAUser":       batch(room, msgEvent("$e1", "alice", "!ops deploy api 1.2.3", "")),
		"ContentNotAnObject":   batch(room, fmt.Sprintf(`{"type":"m.room.message","event_id":"$e2","sender":%q,"content":"!ops deploy"}`, alice)),
		"UnknownRoom":          batch("!elsewhere:localhost", msgEvent("$e3", alice, "!ops deploy api 1.2.3", "")),
		"OwnEcho":              batch(room, msgEvent("$e4", string(ad.self), "!ops deploy api 1.2.3", "")),
		"Oversized":            batch(room, msgEvent("$e5", alice, "!ops deploy "+strings.Repeat("x", maxRequestBytes), "")),
		"EventOver64KiB":       batch(room, msgEvent("$e6", alice, "!ops "+strings.Repeat("y", maxEventBytes), "")),
		"ReplyToForgedCard":    batch(room, msgEvent("$e7", string(w.bob.UserID), "approve", fmt.Sprintf(`,"m.relates_to":{"m.in_reply_to":{"event_id":%q}}`, forged))),
		"ReactionOnForged":     batch(room, fmt.Sprintf(`{"type":"m.reaction","event_id":"$e8","sender":%q,"content":{"m.relates_to":{"rel_type":"m.annotation","event_id":%q,"key":"✅"}}}`, w.bob.UserID, forged)),
		"ReactionOnNothing":    batch(room, fmt.Sprintf(`{"type":"m.reaction","event_id":"$e9","sender":%q,"content":{"m.relates_to":{"rel_type":"m.annotation","event_id":"$nope","key":"✅"}}}`, w.bob.UserID)),
		"ReactionNoRelation":   batch(room, fmt.Sprintf(`{"type":"m.reaction","event_id":"$e10","sender":%q,"content":{"key":"✅"}}`, w.bob.UserID)),
		"BadRelationTarget":    batch(room, msgEvent("$e11", alice, "approve", `,"m.relates_to":{"m.in_reply_to":{"event_id":"not an id"}}`)),
		"NotAddressedToTheBot": batch(room, msgEvent("$e12", alice, "deploy api 1.2.3", "")),
		"EditOfAnOldMessage":   batch(room, msgEvent("$e13", alice, "* !ops deploy api 1.2.3", `,"m.relates_to":{"rel_type":"m.replace","event_id":"$old"}`)),
		"RedactedRequest":      batch(room, fmt.Sprintf(`{"type":"m.room.message","event_id":"$e14","sender":%q,"content":{},"unsigned":{"redacted_because":{"type":"m.room.redaction"}}}`, alice)),
	}
	for name, b := range cases {
		if err := ad.handleBatch(ctx, "s_prev", b); err != nil {
			t.Errorf("%s: handleBatch = %v, want the event refused and the batch done", name, err)
		}
	}
	for _, bad := range []string{``, `[]`, `{"rooms":{}}`, `{"next_batch":"x","rooms":[]}`} {
		if _, err := parseSync([]byte(bad)); !errors.Is(err, ErrMalformedSync) {
			t.Errorf("parseSync(%q) = %v, want ErrMalformedSync", bad, err)
		}
	}
}

func TestRenderDefusesRoomMentionsAndMarkup(t *testing.T) {
	t.Parallel()
	for _, in := range append([]string{"@room deploy now", "hey @ROOM", "<font color=red>x</font>"}, adaptertest.Hostile...) {
		out := renderHTML(in)
		if err := inert(in, out); err != nil {
			t.Errorf("renderHTML(%q) = %q: %v", in, out, err)
		}
		if strings.Contains(out, "<font") {
			t.Errorf("renderHTML(%q) = %q: a live tag", in, out)
		}
	}
	plain, formatted := cardContent(adaptertest.HostileCard())
	for _, text := range []string{plain, plainBody(formattedBody(formatted))} {
		if err := adaptertest.CheckNoForgedLine(text); err != nil {
			t.Error(err)
		}
	}
	if strings.Contains(formatted, `<a href="https://evil`) {
		t.Errorf("card carries a live link from outside text:\n%s", formatted)
	}
}
