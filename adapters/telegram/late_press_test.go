package telegram

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core/approvalref"
)

// A Reject or Edit press on a decided approval reaches the engine like a
// late Approve press: the engine refuses it, audits the attempt, and the
// clicker reads the engine's refusal. No prompt is sent.
func TestLateRejectAndEditOnDecidedApprovalAreAudited(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	card, _ := e.askDeploy()
	bs := buttons(t, card)
	u, cb := e.press(card, approverID, bs["Approve"])
	e.mustPost(u)
	if a := e.waitAnswer(cb); !strings.Contains(a, "Approved") {
		t.Fatalf("approve answered %q", a)
	}
	e.h.Eventually("card shows the decision", func() bool {
		m, _ := e.fake.Message(groupChat, card.ID)
		return m.Markup == "" && strings.Contains(visible(m.Text), "Approved by telegram:42")
	})

	for _, name := range []string{"Reject", "Edit"} {
		u, cb := e.press(card, approverID, bs[name])
		e.mustPost(u)
		a := e.waitAnswer(cb)
		if !strings.Contains(a, "Already decided by telegram:42") {
			t.Errorf("late %s answered %q, want the engine's already-decided refusal", name, a)
		}
	}
	for _, m := range e.fake.Messages(groupChat) {
		if strings.Contains(m.Markup, "force_reply") {
			t.Errorf("a prompt was sent for a decided approval: %s", m.Text)
		}
	}
	got := e.h.RefusedActions(ChannelName + ":" + strconv.Itoa(approverID))
	if got["reject"] != 1 || got["edit"] != 1 {
		t.Errorf("audited refusals = %v, want one reject and one edit", got)
	}
	if n := len(e.h.Dispatches()); n > 1 {
		t.Errorf("dispatches = %d, want at most 1", n)
	}
}

// The same on an approval that expired: refused as expired, audited.
func TestLateRejectOnExpiredApprovalIsAudited(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{ttl: 500 * time.Millisecond})
	card, _ := e.askDeploy()
	id := e.approvalID()
	e.h.Eventually("approval expired", func() bool {
		a, err := e.h.Store.ApprovalGet(context.Background(), id)
		return err == nil && a.Status == approvals.StatusExpired
	})
	for _, act := range []approvalref.Action{approvalref.Reject, approvalref.Edit} {
		data, err := e.ad.buttons.Encode(approvalref.Ref{Action: act, ApprovalID: id})
		if err != nil {
			t.Fatal(err)
		}
		u, cb := e.press(card, approverID, data)
		e.mustPost(u)
		if a := e.waitAnswer(cb); !strings.HasPrefix(a, "⌛ This approval expired at ") {
			t.Errorf("late %c press answered %q, want the engine's expiry refusal", act, a)
		}
	}
	got := e.h.RefusedActions(ChannelName + ":" + strconv.Itoa(approverID))
	if got["reject"] != 1 || got["edit"] != 1 {
		t.Errorf("audited refusals = %v, want one reject and one edit", got)
	}
	if n := len(e.h.Dispatches()); n != 0 {
		t.Errorf("dispatches = %d, want none", n)
	}
}

// approvalID returns the approval of the one run in the store.
func (e *env) approvalID() string {
	e.t.Helper()
	aps, _, err := e.h.Store.ApprovalList(context.Background(), approvals.ApprovalListParams{Limit: 10})
	if err != nil || len(aps) != 1 {
		e.t.Fatalf("approvals = %d (%v), want 1", len(aps), err)
	}
	return aps[0].ID
}
