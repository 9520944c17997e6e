package discord

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core/approvalref"
)

// approvalID returns the approval of the one run in the store.
func (e *env) approvalID() string {
	e.t.Helper()
	aps, _, err := e.h.Store.ApprovalList(context.Background(), approvals.ApprovalListParams{Limit: 10})
	if err != nil || len(aps) != 1 {
		e.t.Fatalf("approvals = %d (%v), want 1", len(aps), err)
	}
	return aps[0].ID
}

// A Reject or Edit click on a decided approval reaches the engine like a
// late Approve click: refused there, audited, answered with the engine's
// refusal, and no modal opens. An Edit modal submitted after the approval
// closed is refused and audited the same way.
func TestLateRejectAndEditOnDecidedApprovalAreAudited(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	card := e.askDeploy()
	bs := buttons(card)
	if r := e.post(e.click(approverID, card, bs["Approve"])); !strings.Contains(r.Data.Content, "Approved") {
		t.Fatalf("approve answered %+v", r)
	}
	for _, b := range []string{"Reject", "Edit"} {
		r := e.post(e.click(approverID, card, bs[b]))
		if r.Type != 4 || r.Data.Flags&64 == 0 || !strings.Contains(r.Data.Content, "Already decided by discord:"+approverID+" at ") {
			t.Errorf("late %s answered %+v, want the engine's already-decided refusal, ephemeral", b, r)
		}
	}
	// A modal opened before the approval closed, submitted after.
	r := e.post(e.submit(approverID, card, bs["Edit"], map[string]string{inputArg + "service": "api", inputArg + "version": "9"}))
	if !strings.Contains(r.Data.Content, "Already decided") {
		t.Errorf("late edit modal answered %+v, want the engine's refusal", r)
	}
	got := e.h.RefusedActions("discord:" + approverID)
	if got["reject"] != 1 || got["edit"] != 2 {
		t.Errorf("audited refusals = %v, want one reject and two edits", got)
	}
	e.h.Eventually("deploy dispatched", func() bool { return len(e.h.Dispatches()) == 1 })
	if c := e.h.Dispatches()[0]; c.Args["version"] != "1.2.3" {
		t.Errorf("dispatched %v, want the approved arguments", c.Args)
	}
}

// The same on an approval that expired: refused as expired, audited.
func TestLateRejectOnExpiredApprovalIsAudited(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{ttl: 500 * time.Millisecond})
	card := e.askDeploy()
	id := e.approvalID()
	e.h.Eventually("approval expired", func() bool {
		a, err := e.h.Store.ApprovalGet(context.Background(), id)
		return err == nil && a.Status == approvals.StatusExpired
	})
	for _, act := range []approvalref.Action{approvalref.Reject, approvalref.Edit} {
		cid, err := e.ad.buttons.Encode(approvalref.Ref{Action: act, ApprovalID: id})
		if err != nil {
			t.Fatal(err)
		}
		r := e.post(e.click(approverID, card, cid))
		if r.Type != 4 || r.Data.Flags&64 == 0 || !strings.HasPrefix(r.Data.Content, "⌛ This approval expired at ") {
			t.Errorf("late %c click answered %+v, want the engine's expiry refusal", act, r)
		}
	}
	got := e.h.RefusedActions("discord:" + approverID)
	if got["reject"] != 1 || got["edit"] != 1 {
		t.Errorf("audited refusals = %v, want one reject and one edit", got)
	}
	if n := len(e.h.Dispatches()); n != 0 {
		t.Errorf("dispatches = %d, want none", n)
	}
}
