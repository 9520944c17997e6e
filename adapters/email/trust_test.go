package email

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/approvals"
)

// TestAttack_RequesterApprovesOwnCallByMail: the card used to be Cc'd to
// the requester with the reply token, so anyone who could send mail asked
// for a high-impact call and approved it with a forged approver From:. The
// requester's copy now carries no token, and a token counts only from the
// address it was issued to.
func TestAttack_RequesterApprovesOwnCallByMail(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.Request("deploy api 1.2.3")
	card, ap := e.Card()
	mine := e.WaitMail("alice's copy", func(m sent) bool { return slices.Equal(m.Rcpt, []string{alice}) && m.Subject == card.Subject })
	if strings.Contains(mine.Header.Get("Reply-To"), "+") || strings.Contains(mine.Text+mine.HTML, "ops+") {
		t.Fatalf("the requester's copy carries a reply token: %q", mine.Header.Get("Reply-To"))
	}
	// alice answers her copy as herself, and again posing as bob.
	e.ReplyTo(mine, "gmail_reply.eml", alice, "", "approve")
	e.ReplyTo(mine, "gmail_reply.eml", bob, "", "approve")
	e.h.Eventually("both refusals audited", func() bool { return len(e.Audit("approval.refused")) >= 2 })
	for _, a := range e.Audit("approval.refused") {
		if !strings.Contains(string(a.Detail), "missing_reply_token") {
			t.Errorf("refusal %s, want missing_reply_token", a.Detail)
		}
	}
	// Nor can she use an approver's token she got hold of (a forwarded
	// card) from her own address.
	e.ReplyTo(card, "outlook_reply.eml", alice, "", "approve")
	e.h.Eventually("the wrong-sender refusal", func() bool {
		for _, a := range e.Audit("approval.refused") {
			if strings.Contains(string(a.Detail), "sender_mismatch") {
				return true
			}
		}
		return false
	})
	if got, _ := e.h.Store.ApprovalGet(context.Background(), ap.ID); got.Status != approvals.StatusPending || len(got.Decisions) != 0 {
		t.Fatalf("approval %s with %d decisions", got.Status, len(got.Decisions))
	}
	if d := e.h.Dispatches(); len(d) != 0 {
		t.Fatalf("dispatched %+v", d)
	}
}

// A requester who is also an eligible approver gets only the token-less
// copy: self-approval by mail is impossible, whatever the policy.
func TestRequesterAmongApproversGetsNoToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{Approvers: []string{Actor(alice), Actor(bob)}})
	e.Request("deploy api 1.2.3")
	card := e.CardFor(bob)
	e.WaitMail("alice's copy", func(m sent) bool { return slices.Equal(m.Rcpt, []string{alice}) && m.Subject == card.Subject })
	for _, m := range e.smtp.Sent() {
		if slices.Contains(m.Rcpt, alice) && strings.Contains(m.Header.Get("Reply-To"), "+") {
			t.Fatalf("the requester got a reply token: %q", m.Header.Get("Reply-To"))
		}
	}
}
