package slack

import (
	"fmt"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

func batchCard(n int) core.Card {
	c := testCard()
	for i := range n {
		bc := core.CardCall{ApprovalID: fmt.Sprintf("ap-%d", i+1), Tool: "deploy", Risk: "high_impact", Quorum: 1,
			Args: []core.CardArg{{Name: "service", Value: fmt.Sprintf("svc%d", i)}}, Reason: fmt.Sprintf("reason %d", i), Status: approvals.StatusPending}
		if i == 0 {
			bc.Status = approvals.StatusApproved
			bc.Outcome = &core.CardOutcome{Status: approvals.StatusApproved, By: []string{approver}}
		}
		c.Batch = append(c.Batch, bc)
	}
	return c
}

func TestRenderBatchCard(t *testing.T) {
	t.Parallel()
	a := testAdapter(t)
	t.Run("EachCallDecidableAndApproveAll", func(t *testing.T) {
		blocks, text := a.renderCard(batchCard(3))
		raw := checkLimits(t, blocks)
		if !strings.Contains(text, "3 calls") {
			t.Errorf("text %q", text)
		}
		// The approved first call has no buttons; the other two have theirs.
		for _, id := range []string{"ap-2", "ap-3"} {
			if !strings.Contains(raw, a.sign.buttonValue(actionApprove, id)) || !strings.Contains(raw, a.sign.buttonValue(actionReject, id)) {
				t.Errorf("no buttons for %s", id)
			}
		}
		if strings.Contains(raw, a.sign.buttonValue(actionApprove, "ap-1")) {
			t.Error("a decided call still has its buttons")
		}
		if !strings.Contains(raw, a.sign.buttonValue(actionApproveAll, "ap-1")) || !strings.Contains(raw, "Approve all") {
			t.Error("no Approve all for the batch")
		}
		if !strings.Contains(raw, "reason 2") || !strings.Contains(raw, "Approved* by") {
			t.Error("reasons or outcomes missing")
		}
	})
	t.Run("ManyCallsStayInLimits", func(t *testing.T) {
		blocks, _ := a.renderCard(batchCard(40))
		raw := checkLimits(t, blocks)
		if !strings.Contains(raw, "more calls") || !strings.Contains(raw, "Approve all") {
			t.Error("the overflow note or Approve all is missing")
		}
	})
	t.Run("AllDecidedShowsNoButtons", func(t *testing.T) {
		c := batchCard(2)
		c.Batch[1].Status = approvals.StatusRejected
		blocks, text := a.renderCard(c)
		raw := checkLimits(t, blocks)
		if strings.Contains(raw, "Approve all") || !strings.Contains(text, "Decided") {
			t.Errorf("decided batch still offers buttons: %s", text)
		}
	})
}
