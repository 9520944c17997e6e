package signal

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/adapters/signal/internal/fakesignal"
	"github.com/opsgate/opsgate/approvals"
)

// A decision that comes too late is told what happened, in the words every
// channel uses: who decided and when; when the approval expired.
func TestLateDecisionsToldWhoAndWhen(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.fake.Push(e.dm(aliceNumber, "!ops deploy api 1.2.3"))
	e.waitSent("the card", func(s fakesignal.Sent) bool { return strings.Contains(s.Message, "Approval needed") })
	id := mustApproval(t, e, e.runs()[0].ID)
	if _, err := e.h.Decide("signal:"+bobNumber, id, "approve", ""); err != nil {
		t.Fatal(err)
	}
	e.fake.Push(e.dm(bobNumber, "approve "+codeFor(id, 4)))
	e.waitSent("the already-decided notice", func(s fakesignal.Sent) bool {
		return strings.HasPrefix(s.Message, "ℹ️ Already decided by signal:"+bobNumber+" at ")
	})

	x := newEnv(t, envOpts{base: adaptertest.HarnessOptions{ApprovalTTL: 300 * time.Millisecond}})
	x.fake.Push(x.dm(aliceNumber, "!ops deploy api 1.2.4"))
	var xid string
	x.h.Eventually("the approval to expire", func() bool {
		runs := x.runs()
		if len(runs) == 0 {
			return false
		}
		aps, _, err := x.h.Store.ApprovalList(context.Background(), approvals.ApprovalListParams{RunID: runs[0].ID, Limit: 1})
		if err != nil || len(aps) == 0 {
			return false
		}
		xid = aps[0].ID
		return aps[0].Status == approvals.StatusExpired
	})
	x.waitSent("the card", func(s fakesignal.Sent) bool { return strings.HasPrefix(s.Message, "Approval ") })
	x.fake.Push(x.dm(bobNumber, "approve "+codeFor(xid, 4)))
	x.waitSent("the expired notice", func(s fakesignal.Sent) bool { return strings.HasPrefix(s.Message, "⌛ This approval expired at ") })
}
