package delivery_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/delivery"
)

// An answered question's update edits the message the question went out
// as — its last chunk, which carried the buttons — or, when the platform
// cannot edit, arrives as a new message.
func TestQuestionUpdateEditsTheQuestion(t *testing.T) {
	t.Parallel()
	for _, noEdit := range []bool{false, true} {
		t.Run(fmt.Sprintf("noEdit=%v", noEdit), func(t *testing.T) {
			t.Parallel()
			s := openStore(t)
			f := newFakeServer(t, limit{}, limit{})
			f.noEdit = noEdit
			p := newFakePlatform(f, delivery.Pacing{}, 40)
			th := core.Thread{Channel: "fake", Key: "c1"}
			question := "Which environment should I deploy to, staging or prod? Reply here."
			queue(t, s, core.OutboxMessage{ID: "q1", Thread: th, Kind: core.KindReply, Text: question})
			startWorker(t, delivery.Options{Store: s, Cards: &cards{}, Platform: p, Owner: "w1", Subscribe: s.Subscribe})
			waitFor(t, "the question", 10*time.Second, func() bool { return countStatus(t, s, core.DeliverySent) == 1 })
			queue(t, s, core.OutboxMessage{ID: "u1", Thread: th, Kind: core.KindQuestionUpdate, Replaces: "q1", Text: "Answered: staging"})
			waitFor(t, "the update", 10*time.Second, func() bool { return countStatus(t, s, core.DeliverySent) == 2 })
			got := f.received()
			if len(got) < 3 {
				t.Fatalf("received %+v; want the question in chunks, then the update", got)
			}
			last, upd := got[len(got)-2], got[len(got)-1]
			if upd.Kind != core.KindQuestionUpdate || !strings.Contains(upd.Text, "Answered: staging") {
				t.Fatalf("update = %+v", upd)
			}
			if noEdit && (upd.Edit != "" || upd.ID == last.ID) {
				t.Errorf("without edits the update must be a new message; got %+v", upd)
			}
			if !noEdit && (upd.Edit != last.ID || upd.ID != last.ID) {
				t.Errorf("the update must edit the question's last chunk %s; got %+v", last.ID, upd)
			}
		})
	}
}
