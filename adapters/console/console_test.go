package console_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/adapters/console"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/delivery"
)

func newHarness(t *testing.T) *adaptertest.Harness {
	return adaptertest.NewHarness(t, adaptertest.HarnessOptions{
		Platform: func(*adaptertest.Harness) delivery.Platform { return console.New() },
	})
}

// A deploy asked from the console is carded, approved from another surface,
// dispatched once and answered; every console message ends up sent, with
// its outbox key as reference.
func TestDeployRoundTrip(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	thread := core.Thread{Channel: "console", Key: "ops-1"}
	rc := h.Send("console:req", thread, "deploy api 1.2.3")
	if rc.RunID == "" {
		t.Fatal("no run started")
	}
	ap := h.WaitApprovalPending(rc.RunID)
	if _, err := h.Decide("console:admin", ap.ID, "approve", ""); err != nil {
		t.Fatalf("decide: %v", err)
	}
	h.WaitRun(rc.RunID, core.RunSucceeded)
	h.WaitIdle()
	calls := h.Dispatches()
	if len(calls) != 1 || calls[0].Args["env"] != "staging" || calls[0].IdempotencyKey == "" {
		t.Fatalf("dispatches = %+v, want one deploy to staging with a key", calls)
	}
	var kinds []string
	var result bool
	for _, d := range h.Deliveries() {
		if d.Status != core.DeliverySent {
			t.Errorf("delivery %s (%s) is %s: %s", d.ID, d.Kind, d.Status, d.LastError)
		}
		if len(d.Refs) != d.ChunksSent || d.ChunksSent == 0 || d.Refs[0].Channel != "console" || !strings.HasPrefix(d.Refs[0].ID, d.ID+"/") {
			t.Errorf("delivery %s refs = %+v (chunks %d)", d.ID, d.Refs, d.ChunksSent)
		}
		kinds = append(kinds, string(d.Kind))
		result = result || strings.Contains(d.Text, "deployed api 1.2.3 to staging")
	}
	if !result {
		t.Errorf("no reply carries the tool output; kinds %v", kinds)
	}
	if !strings.Contains(strings.Join(kinds, ","), "card") {
		t.Errorf("no card delivered; kinds %v", kinds)
	}
}

// Sending to a thread of another channel is refused for good, not retried.
func TestSendRefusesForeignThread(t *testing.T) {
	t.Parallel()
	_, err := console.New().Send(context.Background(), core.Outbound{Thread: core.Thread{Channel: "slack", Key: "C1"}, Key: "x/0"})
	var perm *core.PermanentError
	if !errors.As(err, &perm) {
		t.Fatalf("err = %v, want *core.PermanentError", err)
	}
}

// A Recorder of another channel records that channel's messages under their
// outbox keys and refuses the console's threads.
func TestRecorderOfAnotherChannel(t *testing.T) {
	t.Parallel()
	r := delivery.NewRecorder("webhook")
	if r.Channel() != "webhook" {
		t.Errorf("Channel() = %q", r.Channel())
	}
	ref, err := r.Send(context.Background(), core.Outbound{Thread: core.Thread{Channel: "webhook", Key: "ci/1"}, Key: "o1/0"})
	if err != nil || ref != (core.MessageRef{Channel: "webhook", ID: "o1/0"}) {
		t.Errorf("Send = %+v, %v; want webhook ref o1/0", ref, err)
	}
	_, err = r.Send(context.Background(), core.Outbound{Thread: core.Thread{Channel: console.Channel, Key: "ops-1"}, Key: "o2/0"})
	var perm *core.PermanentError
	if !errors.As(err, &perm) || !strings.Contains(err.Error(), "not a webhook thread") {
		t.Errorf("console thread: err = %v, want a permanent 'not a webhook thread'", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Send(ctx, core.Outbound{Thread: core.Thread{Channel: "webhook", Key: "ci/1"}, Key: "o3/0"}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err = %v", err)
	}
}
