package delivery_test

import (
	"testing"
	"time"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/delivery"
)

// A platform that cannot edit replies gets no streamed text, and the final
// answer of a run that streamed as a plain reply.
func TestStreamOnAPlatformThatCannotEdit(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	f := newFakeServer(t, limit{}, limit{})
	p := newFakePlatform(f, delivery.Pacing{}, 500)
	th := core.Thread{Channel: "fake", Key: "s1"}
	queue(t, s,
		core.OutboxMessage{Thread: th, Kind: core.KindStream, Text: "Checking …"},
		core.OutboxMessage{Thread: th, Kind: core.KindStreamEnd, Text: "Checked: all healthy."},
	)
	startWorker(t, delivery.Options{Store: s, Cards: &cards{}, Platform: p, Owner: "w1", Subscribe: s.Subscribe})
	waitFor(t, "both to be done", 10*time.Second, func() bool { return countStatus(t, s, core.DeliverySent) == 2 })
	got := f.received()
	if len(got) != 1 || got[0].Text != "Checked: all healthy." {
		t.Fatalf("received %+v", got)
	}
}
