package matrix

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"maunium.net/go/mautrix/id"
)

// threadKey is what a Thread.Key packs: the room and the event that roots
// the conversation (the request, or the root of the thread it was sent
// in). Root is empty for a thread written by hand ("!room:server"): the
// bot then posts to the room without a relation.
type threadKey struct {
	Room id.RoomID
	Root id.EventID
}

// String writes "<room id>/<root event id>". Server names never hold '/'
// or '$', so the first "/$" separates the two.
func (k threadKey) String() string {
	if k.Root == "" {
		return string(k.Room)
	}
	return string(k.Room) + "/" + string(k.Root)
}

func parseThreadKey(s string) (threadKey, error) {
	room, root, ok := strings.Cut(s, "/$")
	k := threadKey{Room: id.RoomID(room)}
	if ok {
		k.Root = id.EventID("$" + root)
	}
	if !roomIDRE.MatchString(room) || (ok && len(root) == 0) {
		return threadKey{}, fmt.Errorf("matrix: thread key %q: want <room id>/<event id>", s)
	}
	return k, nil
}

// A MessageRef.ID is "<room id>/<event id>" of the original event: edits
// (m.replace) always name the original, never an earlier edit.
func messageRef(room id.RoomID, ev id.EventID) string { return string(room) + "/" + string(ev) }

func parseMessageRef(s string) (id.RoomID, id.EventID, error) {
	room, ev, ok := strings.Cut(s, "/$")
	if !ok || !roomIDRE.MatchString(room) || ev == "" {
		return "", "", fmt.Errorf("matrix: message ref %q: want <room id>/<event id>", s)
	}
	return id.RoomID(room), id.EventID("$" + ev), nil
}

// txnID is the transaction id of one outbound event: derived from the
// outbox key (stable across retries of the same chunk) and what the event
// is, so a retry after a lost response is the same event to the
// homeserver, never a second message.
func txnID(key, what string) string {
	sum := sha256.Sum256([]byte(key + "\x00" + what))
	return "opsgate." + hex.EncodeToString(sum[:16])
}
