package slack

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/adapters/slack/internal/fakeslack"
	"github.com/opsgate/opsgate/core"
)

// received adapts the fake to adaptertest.Fake: every post and update, as
// the thread it landed in.
type received struct{ f *fakeslack.Server }

func (r received) Received() []adaptertest.Message {
	var out []adaptertest.Message
	for _, m := range r.f.Log() {
		root := m.ThreadTS
		if root == "" {
			root = m.TS
		}
		out = append(out, adaptertest.Message{
			Thread: core.Thread{Channel: "slack", Key: "T1/" + m.Channel + "/" + root},
			ID:     m.TS, EditOf: m.EditOf, Text: fakeslack.VisibleText(m),
		})
	}
	return out
}

func TestConformance(t *testing.T) {
	var mu sync.Mutex
	envs := map[*adaptertest.Harness]*env{}
	adaptertest.RunConformance(t, adaptertest.Suite{
		New: func(t *testing.T) (*adaptertest.Harness, adaptertest.Fake) {
			e := setup(t)
			mu.Lock()
			envs[e.h] = e
			mu.Unlock()
			return e.h, received{e.fake}
		},
		Thread:    thread1,
		Requester: requester,
		Approver:  approver,
		Inert: func(input, rendered string) error {
			// Slack acts on <…> (links, mentions, <!channel>); with every
			// < and > entity-escaped nothing in the text can become live.
			if strings.ContainsAny(rendered, "<>") {
				return fmt.Errorf("live angle brackets in %q", rendered)
			}
			return nil
		},
		BadInput: func(t *testing.T, h *adaptertest.Harness) {
			mu.Lock()
			e := envs[h]
			mu.Unlock()
			badInput(t, e)
		},
	})
}
