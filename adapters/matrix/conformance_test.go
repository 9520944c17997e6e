package matrix

import (
	"fmt"
	"strings"
	"testing"

	"maunium.net/go/mautrix/id"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/core"
)

// TestConformance runs adaptertest's rules against a real homeserver. The
// cases share one room and one thread (alice's "hello"), each with a bot of
// its own, so what a case "received" is what its bot posted there.
func TestConformance(t *testing.T) {
	w := newWorld(t, false) // skips loudly (fails under CI) without Dendrite
	root := w.say(w.alice, "hello", nil)
	adaptertest.RunConformance(t, adaptertest.Suite{
		New: func(t *testing.T) (*adaptertest.Harness, adaptertest.Fake) {
			e := newEnv(t, envOpts{world: w, noRun: true})
			return e.h, received{e}
		},
		Thread:    core.Thread{Channel: ChannelName, Key: threadKey{Room: w.room, Root: id.EventID(root)}.String()},
		Requester: "matrix:" + string(w.alice.UserID),
		Approver:  "matrix:" + string(w.bob.UserID),
		Inert:     inert,
		BadInput: func(t *testing.T, h *adaptertest.Harness) {
			badInput(t, h.Platform.(*Adapter), w)
		},
	})
}

// inert fails when rendered holds markup a Matrix client would act on: a
// live tag from the input, a link to an outside site, a room mention.
func inert(input, rendered string) error {
	for _, live := range []string{"<script", `<a href="https://evil`, `href="javascript`, "<b>bold</b>"} {
		if strings.Contains(rendered, live) {
			return fmt.Errorf("live markup %q", live)
		}
	}
	if strings.Contains(strings.ToLower(plainBody(rendered)), "@room") {
		return fmt.Errorf("a live @room mention")
	}
	return nil
}
