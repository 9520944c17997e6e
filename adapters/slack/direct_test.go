package slack

import (
	"context"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core"
)

// Escalation's direct messages: a user id gives a DM thread, whose
// messages (a reminder, an escalated approver's card) are posted to the
// user at the top level of the app's DM; anything else gives none.
func TestDirectMessages(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, bad := range []string{"C123", "", "u1", "U1/x", "UAPP/1"} {
		if _, ok := e.a.DirectThread(bad); ok {
			t.Errorf("DirectThread(%q) gave a thread", bad)
		}
	}
	dm, ok := e.a.DirectThread("UAPP")
	if !ok {
		t.Fatal("no DM thread for a user id")
	}
	e.h.WaitDelivered(e.h.QueueReply(dm, "⏰ Reminder: approval waits for you"))
	rc := e.h.Send(requester, thread1, "deploy api 1.2.3")
	ap := e.h.WaitApprovalPending(rc.RunID)
	if _, err := e.h.Store.InboxRecord(context.Background(), core.InboxRecordParams{
		Event:   core.ChannelEvent{Channel: "slack", EventID: "dm-card", Actor: core.Actor{ID: "slack:system"}, Thread: dm, ReceivedAt: time.Now()},
		Replies: []core.OutboxMessage{{ID: "dm-card", Thread: dm, Kind: core.KindCard, ApprovalID: ap.ID, RunID: rc.RunID}},
	}); err != nil {
		t.Fatal(err)
	}
	e.h.WaitDelivered("dm-card")
	var toUser []string
	for _, c := range e.fake.Calls("chat.postMessage") {
		if c.Params["channel"] == "UAPP" {
			if _, threaded := c.Params["thread_ts"]; threaded {
				t.Errorf("a direct message was threaded: %v", c.Params)
			}
			toUser = append(toUser, c.Params["text"])
		}
	}
	if len(toUser) != 2 {
		t.Fatalf("posts to the user: %q", toUser)
	}
}
