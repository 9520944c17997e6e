package email

import (
	"strings"
	"testing"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// A mail read twice — a lost cursor, a new UIDVALIDITY, a second
// replica — is answered once: only the first sighting of its Message-ID
// gets an answer, and the core audits it once. Each case delivers the same
// message (same Message-ID) twice in a row.
func TestAnswersOnlyOnFirstSighting(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.Request("deploy api 1.2.3")
	card, ap := e.Card()
	uid := uint32(1)
	twice := func(m testMail) {
		t.Helper()
		m.Subject, m.InReplyTo, m.References = "Re: "+card.Subject, card.MessageID, "<"+card.MessageID+">"
		e.Deliver(m)
		e.Deliver(m)
		uid += 2
		e.WaitCursor(e.a, uid)
	}
	count := func(match func(sent) bool) int {
		n := 0
		for _, m := range e.smtp.Sent() {
			if match(m) {
				n++
			}
		}
		return n
	}
	refusedWith := func(want string) int {
		n := 0
		for _, a := range e.Audit("approval.refused") {
			if strings.Contains(string(a.Detail), want) {
				n++
			}
		}
		return n
	}
	check := func(what string, match func(sent) bool, auditWant string) {
		t.Helper()
		if n := count(match); n != 1 {
			t.Errorf("%s: %d answers to the same mail read twice, want 1", what, n)
		}
		if n := refusedWith(auditWant); n != 1 {
			t.Errorf("%s: %d audit entries with %q, want 1", what, n, auditWant)
		}
	}
	token := replyAddress(t, card)

	// Refused by the adapter: no reply token.
	twice(testMail{From: bob, To: botAddr, MessageID: "no-token@mail.example.com", Body: "approve"})
	check("no token", func(m sent) bool { return strings.Contains(m.Text, "approval's own reply address") }, "missing_reply_token")

	// Unreadable: the token is right, the answer is not a decision.
	twice(testMail{From: bob, To: token, MessageID: "unreadable@mail.example.com", Body: "maybe tomorrow"})
	check("unreadable", func(m sent) bool { return strings.Contains(m.Text, "not understood") }, "unreadable reply")

	// Refused: bob's token, carol's address.
	twice(testMail{From: carol, To: token, MessageID: "carol@mail.example.com", Body: "approve"})
	check("wrong sender", func(m sent) bool { return strings.Contains(m.Text, "sent to another approver") }, "sender_mismatch")

	if got, err := e.h.Store.ApprovalGet(t.Context(), ap.ID); err != nil || got.Status != approvals.StatusPending {
		t.Fatalf("approval %v, %v after refused replies, want pending", got, err)
	}

	// Closed: bob approves, then a late reply arrives twice.
	twice(testMail{From: bob, To: token, MessageID: "approve@mail.example.com", Body: "approve"})
	e.h.WaitRun(e.OnlyRun().ID, core.RunSucceeded)
	before := refusedWith("already decided")
	twice(testMail{From: bob, To: token, MessageID: "late@mail.example.com", Body: "reject: too late"})
	if n := count(func(m sent) bool { return strings.Contains(m.Text, "already closed") }); n != 1 {
		t.Errorf("closed: %d answers to the same late reply read twice, want 1", n)
	}
	if n := refusedWith("already decided") - before; n != 1 {
		t.Errorf("closed: %d audit entries for the late reply, want 1", n)
	}
	// An unreadable late reply is recorded (and refused) as well.
	twice(testMail{From: bob, To: token, MessageID: "late-unreadable@mail.example.com", Body: "hmm"})
	if n := count(func(m sent) bool { return strings.Contains(m.Text, "already closed") }); n != 2 {
		t.Errorf("closed, unreadable: %d 'already closed' answers in all, want 2", n)
	}
	if n := refusedWith(`\"hmm\"`); n != 1 {
		t.Errorf("closed, unreadable: %d audit entries, want 1", n)
	}
	if d := e.h.Dispatches(); len(d) != 1 {
		t.Errorf("%d dispatches, want 1", len(d))
	}
}
